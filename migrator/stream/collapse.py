"""The final state per key of a micro-batch: what the applier writes, one change per key.

Writing only the last change of each key is equivalent to replaying every change in order
(each change is the whole state of its item: a put replaces the item, a delete removes it)
and writes less. A key's changes are ordered by `ChangeRecord.order`, which puts a parent
shard's records before its children's whatever their sequence numbers (for Kinesis, after
the change's creation time, since Kinesis may deliver a key's changes out of order).
"""

from __future__ import annotations

import base64
import json
from typing import Iterable

from migrator.stream.records import DELETE, ChangeRecord


def collapse(changes: Iterable[ChangeRecord]) -> list[ChangeRecord]:
    """The last change of each key, ordered by the key's JSON form, so the output is stable.

    A PUT after a DELETE resurrects the item and a DELETE after a PUT deletes it. Records
    seen twice (a replayed range) are the same record and count once; among changes of
    equal `order`, the shard id decides, so the result never depends on the input order.
    """
    last: dict[tuple, ChangeRecord] = {}
    for change in changes:
        known = last.get(change.key)
        if known is None or _rank(change) > _rank(known):
            last[change.key] = change
    return sorted(last.values(), key=lambda change: key_repr(change.key))


def drop_filtered(
    changes: Iterable[ChangeRecord], skip_ttl_deletes: bool, skip_replicated: bool = False
) -> list[ChangeRecord]:
    """The changes the user wants applied: without deletions by Time to Live, and without a
    global table's writes replicated from other regions, when asked.

    Filter before `collapse`: a dropped change must not hide the one before it.
    """
    return [
        change for change in changes
        if not (skip_ttl_deletes and change.user_identity_is_ttl and change.operation == DELETE)
        and not (skip_replicated and change.replicated)
    ]


def key_repr(key: tuple) -> str:
    """The key as canonical JSON (binary as base64): a total, stable order over keys of any type."""
    return json.dumps(key, separators=(",", ":"), ensure_ascii=False, default=_bytes_as_base64)


def _rank(change: ChangeRecord) -> tuple:
    return change.order, change.shard_id


def _bytes_as_base64(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not part of a wire-form key")
