"""One Scan segment, page by page, paced by the capacity each page consumed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from migrator.aws import retries_of, translated
from migrator.items import Item, item_size_bytes
from migrator.ratelimit import CapacityLimiter


@dataclass
class ScanCounters:
    pages: int = 0
    items: int = 0
    retries: int = 0
    read_units: float = 0.0
    # After each page: the key the next Scan call starts after, None once the segment is done.
    # A caller that stops part way (an export's file full) resumes the segment from here.
    resume_key: Item | None = None


def scan_segment(client: Any, table: str, segment: int, total_segments: int, **options: Any) -> Iterator[list[Item]]:
    """Yield the items of one segment, one page at a time (`options` as `scan_responses` takes them)."""
    for response in scan_responses(client.scan, table, segment, total_segments, **options):
        yield response.get("Items", [])


def scan_responses(
    scan: Callable[..., dict[str, Any]],
    table: str,
    segment: int,
    total_segments: int,
    *,
    limiter: CapacityLimiter,
    counters: ScanCounters,
    consistent_read: bool = False,
    report_capacity: bool = True,
    start_key: Item | None = None,
    attributes: tuple[str, ...] = (),
) -> Iterator[dict[str, Any]]:
    """Yield each Scan response of one segment, called with `scan` (a client's `scan`, or the lean client's
    `scan_keeping_texts`); after `start_key` when given (a `resume_key` of an earlier call); only
    `attributes` of each item when given."""
    request: dict[str, Any] = {
        "TableName": table,
        "Segment": segment,
        "TotalSegments": total_segments,
        "ConsistentRead": consistent_read,
    }
    if attributes:  # names go through placeholders: any name is valid, reserved words too
        request["ProjectionExpression"] = ", ".join(f"#a{i}" for i in range(len(attributes)))
        request["ExpressionAttributeNames"] = {f"#a{i}": name for i, name in enumerate(attributes)}
    if start_key:
        request["ExclusiveStartKey"] = start_key
    if report_capacity:
        request["ReturnConsumedCapacity"] = "TOTAL"
    while True:
        limiter.wait()
        with translated("scanning", f"source table {table!r} (segment {segment} of {total_segments})"):
            response = scan(**request)
        items = response.get("Items", [])
        units = read_units(response if report_capacity else {}, items, consistent_read)
        limiter.spend(units)
        counters.pages += 1
        counters.items += len(items)
        counters.retries += retries_of(response)
        counters.read_units += units
        last_key = response.get("LastEvaluatedKey")
        counters.resume_key = last_key or None
        yield response
        if not last_key:
            return
        request["ExclusiveStartKey"] = last_key


def read_units(response: dict[str, Any], items: list[Item], consistent_read: bool) -> float:
    """Reported capacity, or an estimate from item sizes when the endpoint reports none.

    A Scan or GetItem costs one unit per started 4 KB read (at least one), half that when
    eventually consistent. Callers pass an empty response when capacity was not asked for:
    some endpoints report it anyway.
    """
    consumed = response.get("ConsumedCapacity")
    if consumed and "CapacityUnits" in consumed:
        return float(consumed["CapacityUnits"])
    units = math.ceil(sum(item_size_bytes(item) for item in items) / 4096) or 1
    return units if consistent_read else units / 2


def read_item(
    client: Any, table: str, key: Item, *, limiter: CapacityLimiter, report_capacity: bool = True
) -> Item | None:
    """The item under `key` as it is now (a strongly consistent GetItem), or None; paced by `limiter`."""
    limiter.acquire(1.0)  # a read costs at least one unit; the rest is settled once known
    request: dict[str, Any] = {"TableName": table, "Key": key, "ConsistentRead": True}
    if report_capacity:
        request["ReturnConsumedCapacity"] = "TOTAL"
    with translated("reading from", f"table {table!r}"):
        response = client.get_item(**request)
    item = response.get("Item")
    limiter.settle(read_units(response if report_capacity else {}, [item] if item else [], True) - 1.0)
    return item
