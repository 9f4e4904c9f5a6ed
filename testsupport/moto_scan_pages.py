"""Emulator extension: a Scan page read from where the last page ended, not from the table's start.

moto 5.2 answers every Scan page by sorting all of the table's items, comparing their keys in
Python, then walking them from the first, testing each one for the requested segment and for
coming before ExclusiveStartKey. So one page costs the whole table, and reading a table of n
items page by page costs n times the pages; the suite's copy of a 50,000-item table spends most of
its emulator time there. This extension hands moto's own Scan loop only the items that can be on
the page: those of the requested segment (tested once per partition key), in moto's order (its
comparison of each key's `cast_value`, computed once per item), from the first one after
ExclusiveStartKey (a bisection). moto's loop then runs unchanged on them: limits, size limit,
filters, projection, LastEvaluatedKey. A Scan of an index is left to moto.

Pinned to moto 5.2: it wraps `Table.scan` and serves that call's `Table.all_items()`;
tests/support/test_moto_internals.py checks that both ways page through a table identically.
"""

from __future__ import annotations

import bisect
import functools
import inspect
import threading

from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table

_this_scan = threading.local()  # the table being scanned on this thread and the items its page may hold


def install() -> None:
    Table.all_items = _page_candidates_first(Table.all_items)
    Table.scan = _from_the_start_key(Table.scan)


def _from_the_start_key(scan):
    signature = inspect.signature(scan)

    @functools.wraps(scan)
    def scan_from_the_start_key(self: Table, *args, **kwargs):
        call = signature.bind(self, *args, **kwargs)
        call.apply_defaults()
        if call.arguments["index_name"]:
            return scan(self, *args, **kwargs)
        _this_scan.view = (self, page_candidates(self, call.arguments["segments"], call.arguments["exclusive_start_key"]))
        try:
            return scan(self, *args, **kwargs)
        finally:
            _this_scan.view = None

    return scan_from_the_start_key


def _page_candidates_first(all_items):
    @functools.wraps(all_items)
    def items(self: Table) -> list[Item]:
        view = getattr(_this_scan, "view", None)
        if view is not None and view[0] is self:
            return view[1]
        return all_items(self)

    return items


def page_candidates(table: Table, segments, start_key: dict | None) -> list[Item]:
    """The table's items in the segment, in moto's Scan order, from the first after `start_key`."""
    in_segment: list[Item] = []
    for bucket in table.items.values():
        members = list(bucket.values()) if table.range_key_attr else [bucket]
        if members and members[0].is_within_segment(segments):  # one partition key: one segment
            in_segment.extend(members)
    keyed = sorted(((_order(item.hash_key, item.range_key), item) for item in in_segment), key=lambda pair: pair[0])
    if not start_key:
        return [item for _, item in keyed]
    start = _order(DynamoType(start_key[table.hash_key_attr]), _start_range(table, start_key))
    first = bisect.bisect_right(keyed, start, key=lambda pair: pair[0])
    return [item for _, item in keyed[first:]]


def _start_range(table: Table, start_key: dict) -> DynamoType | None:
    return DynamoType(start_key[table.range_key_attr]) if table.range_key_attr else None


def _order(hash_key: DynamoType, range_key: DynamoType | None) -> tuple:
    """moto sorts by (hash key, range key), comparing DynamoTypes by their cast_value."""
    return (hash_key.cast_value,) if range_key is None else (hash_key.cast_value, range_key.cast_value)
