"""The validator's work on executors: read each side's items, then judge, recheck and repair each key.

A table is read a scan segment at a time, paced like the snapshot's Scan (`scan_responses` with the
task's share of the side's read rate); an S3 export a data file at a time, as its import reads
it. Source items are renamed as the migration renames them, so they meet the target's items
under the target's names, and those the migration skips as expired are marked so. Each item
goes with its canonical key (numbers by value), by which both sides meet in a bucket
(`migrator.validate.buckets`), their items still JSON text (as each Scan response sent it, when no
rename changes it) in the work file and there: an item the
same text on both sides is equal (`compare`'s rules hold every value DynamoDB accepts equal to
itself), and only the others are parsed and compared by value. What differs is read again by key
after a delay (`_second_look`; a Delta target's keys a chunk at a time, `items_by_key`), and only
what still differs is counted and repaired (a Delta target's repairs handed back as MERGE rows,
`delta_repairs`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Iterator

from migrator.connection import ClientSpec
from migrator.export.decode import read_items
from migrator.items import Item, is_expired, rename_attributes
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.export_copy import FileTask, local_copy
from migrator.snapshot.prune import canonical_key
from migrator.scan_page import ITEM_TEXTS
from migrator.source.scan import ScanCounters, read_item, scan_responses
from migrator.target.delta import KEYS_PER_READ, items_by_key
from migrator.target.pipeline import PipelinedWriter
from migrator.task_boundary import errors_returned
from migrator.validate.compare import differing_attributes
from migrator.validate.delta_repairs import DeltaRepairRows, DeltaTableSide
from migrator.validate.report import DIFFERENT, DUPLICATE, EXTRA, MISSING, Sample, Tally
from migrator.validate.work_file import Entry, HeldEntry, held_item, item_text, kept_text
from migrator.wire import wire_client


@dataclass(frozen=True)
class SideScan:
    """How to scan one side: plain values only, shipped to the executors."""

    spec: ClientSpec
    table: str
    total_segments: int
    read_units_per_second: float | None
    report_capacity: bool
    key_names: tuple[str, ...]  # as this side names them
    renames: tuple[tuple[str, str], ...] = ()  # the source's renames; none for the target
    ttl_attribute: str | None = None  # the source's TTL attribute when expired items are skipped
    consistent_read: bool = False


@dataclass(frozen=True)
class KeyCheck:
    """How to judge, recheck and repair the keys of one bucket."""

    key_names: tuple[str, ...]  # the target's key attributes: what the samples show
    source: SideScan | None  # None when a side cannot be read again by key (an S3 export): no recheck
    target: SideScan | None  # None for an S3 export target: read once by its data files, never written
    tolerance: float
    failures_to_fetch: int
    recheck_seconds: float
    copy_missing: bool
    repair_differences: bool
    delete_extra: bool
    batch_size: int
    write_units_per_second: float | None
    delta: DeltaTableSide | None = None  # a Delta target: read again by key at its newest version, repaired by MERGE

    @property
    def repairs(self) -> bool:
        return self.copy_missing or self.repair_differences or self.delete_extra

    @property
    def rechecks(self) -> bool:
        return bool(self.recheck_seconds) and self.source is not None


# A key that differs at first sight: (canonical key, source item or None, target item or None).
Difference = tuple[str, Item | None, Item | None]


@dataclass(frozen=True)
class HeldTwice:
    """A key that more than one row of a side holds (a Delta table, an export): its rows on each side, and
    one row of each side (the source's is the one a repair writes when the source holds it once)."""

    order: str  # the canonical key
    source_rows: int
    target_rows: int
    source: HeldEntry | None
    target: HeldEntry | None


def scanned_entries(scan: SideScan, segment: int) -> Iterator[tuple[str, HeldEntry]]:
    """Every item of this segment under the target's names as JSON text, by canonical key, marked when expired."""
    target_key_names = _target_key_names(scan)
    limiter = CapacityLimiter(scan.read_units_per_second)
    responses = scan_responses(
        wire_client(scan.spec).scan_keeping_texts, scan.table, segment, scan.total_segments, limiter=limiter,
        counters=ScanCounters(), consistent_read=scan.consistent_read, report_capacity=scan.report_capacity,
    )  # fmt: skip
    for response in responses:
        now = time.time()
        items = response.get("Items", [])
        for item, sent in zip(items, response.get(ITEM_TEXTS) or [None] * len(items)):
            renamed, expired = _as_target_names(scan, item, now)
            key = canonical_key({name: renamed[name] for name in target_key_names})
            yield key, (held_text(scan, item, renamed, sent), expired)


def held_text(scan: SideScan, item: Item, renamed: Item, sent: bytes | None) -> bytes:
    """The text of `renamed` (`item` under the target's names): the text the Scan response sent of `item`,
    unless a rename changed the item or the response's texts were not kept; then `renamed` encoded."""
    if sent is None or any(name in item for name, _ in scan.renames):
        return item_text(renamed)
    return kept_text(sent, item)


def _as_target_names(scan: SideScan, item: Item, now: float) -> Entry:
    """The item renamed as the migration renames it, and whether the migration skips it as expired."""
    expired = is_expired(item, scan.ttl_attribute, now)
    return rename_attributes(item, dict(scan.renames), scan.key_names), expired


def exported_entries(
    task: FileTask, renames: dict[str, str], key_names: tuple[str, ...]
) -> Iterator[tuple[str, HeldEntry]]:
    """Every item of a full S3 export's data file, renamed, by canonical key; the file's MD5 checked first.

    An export holds what the table held at export time, expired or not, and its import copies
    everything: no item is skipped as expired.
    """
    target_key_names = _renamed_names(renames, key_names)
    with local_copy(task) as copy:
        for item in read_items(task.data_file, copy, task.output_format):
            renamed = rename_attributes(item, renames, key_names)
            yield canonical_key({name: renamed[name] for name in target_key_names}), (item_text(renamed), False)


def _target_key_names(scan: SideScan) -> tuple[str, ...]:
    return _renamed_names(dict(scan.renames), scan.key_names)


def _renamed_names(renames: dict[str, str], names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(renames.get(name, name) for name in names)


def check_keys(
    check: KeyCheck, pairs: Iterable[tuple[str, tuple[HeldEntry | None, HeldEntry | None]]],
    delta_repairs: DeltaRepairRows | None = None, held_twice: Iterable[HeldTwice] = (),
) -> Iterator[Tally]:  # fmt: skip
    """Classify each key met in a bucket (missing, extra, different, equal, expired), recheck what differs,
    repair what is asked; one Tally. Never raises (`migrator.task_boundary`): a failure comes back in it.
    A Delta target's repairs go into `delta_repairs`, for the driver to merge. The keys `held_twice` are
    duplicates, whatever their rows hold (`_settle_duplicates`)."""
    tally = Tally(check.failures_to_fetch)
    with errors_returned("checking keys") as caught:
        differences = _first_look(check, pairs, tally)
        if check.rechecks:
            differences = _second_look(check, [(order, _key(check, s or t)) for order, s, t in differences], tally)
        if check.repairs:
            with delta_repairs if check.delta is not None else _writer(check) as writer:
                _settle(check, differences, tally, writer)
                _settle_duplicates(check, held_twice, tally, writer)
        else:
            _settle(check, differences, tally, None)
            _settle_duplicates(check, held_twice, tally, None)
    tally.error = caught.error
    yield tally


def _first_look(check: KeyCheck, pairs, tally: Tally) -> Iterator[Difference]:
    """The keys that differ in the scans; counts the items read, the equal ones and the expired ones."""
    for order, (source, target) in pairs:
        tally.source_items += source is not None
        tally.target_items += target is not None
        if _same_text(source, target):
            tally.equal += 1
            continue
        difference = _judged(check, order, _parsed(source), _parsed(target), tally)
        if difference is not None:
            yield difference


def _same_text(source: HeldEntry | None, target: HeldEntry | None) -> bool:
    """Both sides hold the key, the source item is not expired, and both items are the same bytes."""
    return source is not None and target is not None and not source[1] and source[0] == target[0]


def _parsed(held: HeldEntry | None) -> Entry | None:
    return None if held is None else (held_item(held[0]), held[1])


def _judged(check: KeyCheck, order: str, source: Entry | None, target: Entry | None, tally: Tally) -> Difference | None:
    """None when the key is settled (equal, or an expired source item: neither missing nor compared)."""
    if source is not None and source[1]:
        tally.skipped_expired += 1
        return None
    source_item = source[0] if source is not None else None
    target_item = target[0] if target is not None else None
    if source_item is not None and target_item is not None and not differing_attributes(
        source_item, target_item, check.tolerance
    ):
        tally.equal += 1
        return None
    if source_item is None and target_item is None:  # gone from both sides by the recheck: they agree
        tally.equal += 1
        return None
    return order, source_item, target_item


def _second_look(check: KeyCheck, keys: list[tuple[str, Item]], tally: Tally) -> Iterator[Difference]:
    """After `recheck_seconds`, the keys that still differ read with strongly consistent GetItem on both
    sides: a change in flight (replication running) reached one side's scan and not the other's."""
    if not keys:
        return
    time.sleep(check.recheck_seconds)  # the delay is the point: writes in flight land meanwhile
    source_limiter = CapacityLimiter(check.source.read_units_per_second)
    if check.delta is not None:
        yield from _second_look_delta(check, keys, source_limiter, tally)
        return
    target_limiter = CapacityLimiter(check.target.read_units_per_second)
    for order, key in keys:
        source = _reread(check.source, key, source_limiter)
        target = _reread(check.target, key, target_limiter)
        difference = _judged(check, order, source, target, tally)
        if difference is not None:
            yield difference


def _second_look_delta(
    check: KeyCheck, keys: list[tuple[str, Item]], source_limiter: CapacityLimiter, tally: Tally
) -> Iterator[Difference]:  # fmt: skip
    """The keys read again in chunks: each source item by GetItem, then the chunk's rows of the Delta table
    at its newest version in one filtered read (`items_by_key`)."""
    for start in range(0, len(keys), KEYS_PER_READ):
        chunk = keys[start : start + KEYS_PER_READ]
        sources = [_reread(check.source, key, source_limiter) for _, key in chunk]
        found = items_by_key(check.delta.location, check.delta.layout, [key for _, key in chunk])
        targets = {canonical_key(_key(check, item)): item for item in found}
        for (order, _), source in zip(chunk, sources):
            target = (targets[order], False) if order in targets else None
            difference = _judged(check, order, source, target, tally)
            if difference is not None:
                yield difference


def _reread(scan: SideScan, key: Item, limiter: CapacityLimiter) -> Entry | None:
    """The side's item under `key` (target names) as it is now, renamed and marked like a scanned one."""
    renames = dict(scan.renames)
    own_key = {name: key[renames.get(name, name)] for name in scan.key_names}
    item = read_item(wire_client(scan.spec), scan.table, own_key, limiter=limiter, report_capacity=scan.report_capacity)
    return None if item is None else _as_target_names(scan, item, time.time())


def _writer(check: KeyCheck) -> PipelinedWriter:
    return PipelinedWriter(
        check.target.spec, check.target.table, batch_size=check.batch_size,
        limiter=CapacityLimiter(check.write_units_per_second), report_capacity=check.target.report_capacity,
    )  # fmt: skip


def _settle(
    check: KeyCheck, differences: Iterable[Difference], tally: Tally, writer: PipelinedWriter | DeltaRepairRows | None
) -> None:  # fmt: skip
    """Count and sample each confirmed difference, and repair it when asked."""
    for order, source, target in differences:
        if source is None:
            kind, repair = EXTRA, check.delete_extra
            tally.extra += 1
        elif target is None:
            kind, repair = MISSING, check.copy_missing
            tally.missing += 1
        else:
            kind, repair = DIFFERENT, check.repair_differences
            tally.different += 1
        attributes = tuple(differing_attributes(source, target, check.tolerance)) if kind == DIFFERENT else ()
        tally.sample(Sample(order, kind, _key(check, source or target), attributes))
        if writer is None or not repair:
            continue
        if kind == EXTRA:
            writer.delete(_key(check, target))
        else:
            writer.put(source)
        tally.repaired[kind] += 1


def _settle_duplicates(
    check: KeyCheck, held_twice: Iterable[HeldTwice], tally: Tally, writer: PipelinedWriter | DeltaRepairRows | None
) -> None:  # fmt: skip
    """Count and sample each key held twice, its rows counted as items read. It is never compared: which of its
    rows would be is the read order's chance. Repaired (repairDifferences) when only the target holds it twice:
    the source's item written once in place of every row, or the key deleted where the source lacks it
    (deleteExtraRows)."""
    for held in held_twice:
        tally.source_items += held.source_rows
        tally.target_items += held.target_rows
        tally.duplicate += 1
        source = _parsed(held.source)
        item = source[0] if source is not None and not source[1] else None  # an expired item is not copied
        key = _key(check, item if item is not None else _parsed(held.source or held.target)[0])
        tally.sample(Sample(held.order, DUPLICATE, key))
        repair = held.source_rows <= 1 and (check.repair_differences if item is not None else check.delete_extra)
        if writer is None or not repair:
            continue
        if item is not None:
            writer.put(item)
        else:
            writer.delete(key)
        tally.repaired[DUPLICATE] += 1


def _key(check: KeyCheck, item: Item) -> Item:
    return {name: item[name] for name in check.key_names}
