"""An incremental export's records, and the newest write per key across files, partitions and exports.

Each line of an incremental export ("DynamoDB table export output format", Incremental
export output, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/S3DataExport.Output.html)
says how one item ended up by the end of the export window: `Keys`, `NewImage` when the
item exists (inserted or updated), no `NewImage` when it was deleted (`OldImage` alone, or
keys alone with the NEW_IMAGE view), and `Metadata.WriteTimestampMicros`, the time of that
last write by DynamoDB's clock. AWS compacts each export to one record per item, but the
same key can appear in several exports chained one after another (and, when windows
overlap, twice for the same write).

Applying only the record with the greatest WriteTimestampMicros per key leaves the target
as applying every record in time order would: each record is the item's whole state (a put
replaces the item, a delete removes it). `newer` is associative and commutative, so it can
reduce records per key in any order (Spark's reduceByKey) and always pick the same one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

from migrator.items import Item


@dataclass(frozen=True)
class IncrementalRecord:
    """The state of one item after an export window: `new_image`, or None when it was deleted.

    Keys and image are in DynamoDB JSON wire form (binary as base64 text). `key` is the
    canonical JSON of `keys`: one string per item, whatever file or export it came from.
    """

    keys: Item = field(hash=False)
    new_image: Item | None = field(hash=False)
    write_timestamp_micros: int
    key: str = field(init=False)

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("an incremental record needs the item's key attributes")
        object.__setattr__(self, "key", canonical_json(self.keys))

    @property
    def is_delete(self) -> bool:
        return self.new_image is None


def newer(first: IncrementalRecord, second: IncrementalRecord) -> IncrementalRecord:
    """The record of the two that describes the item's later state; both must be of one key.

    The greater WriteTimestampMicros wins. Two records of one key with the same timestamp
    are normally one write exported twice (overlapping windows) and agree. When they do not,
    the tie is broken by content, never by which file came first, so every run and every
    partitioning gives the same target: a delete wins over a put (the export cannot say
    which came last, and a delete never brings back an item the source may have removed),
    and between two puts the image whose canonical JSON sorts last wins.
    """
    if first.key != second.key:
        raise ValueError(f"records of different keys: {first.key} and {second.key}")
    if first.write_timestamp_micros != second.write_timestamp_micros:
        return first if first.write_timestamp_micros > second.write_timestamp_micros else second
    if first.is_delete or second.is_delete:
        return first if first.is_delete else second
    return first if canonical_json(first.new_image) >= canonical_json(second.new_image) else second


def newest_per_key(records: Iterable[IncrementalRecord]) -> list[IncrementalRecord]:
    """The newest record of each key, ordered by key so the output is stable."""
    newest: dict[str, IncrementalRecord] = {}
    for record in records:
        known = newest.get(record.key)
        newest[record.key] = record if known is None else newer(known, record)
    return [newest[key] for key in sorted(newest)]


def puts_and_deletes(records: Iterable[IncrementalRecord]) -> tuple[list[Item], list[Item]]:
    """What to write to the target so it holds each key's newest state: (items to put, keys to delete)."""
    puts: list[Item] = []
    deletes: list[Item] = []
    for record in newest_per_key(records):
        if record.is_delete:
            deletes.append(record.keys)
        else:
            puts.append(record.new_image)
    return puts, deletes


def canonical_json(value: object) -> str:
    """One text per wire-form value: names sorted, no spaces, non-ASCII kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
