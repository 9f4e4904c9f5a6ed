"""BatchWriteItem in batches, resending unprocessed items with capped exponential back-off and jitter.

Errors (throttling, 5xx, dropped connections) are retried by the client (`migrator.wire`);
what DynamoDB accepts but leaves in UnprocessedItems (its throttling, item by item) is resent
here, for as long as some of it gets through now and then: only the target's
throttlingGiveUpMinutes without any progress raise `Throttled` (see `migrator.throttling`).
Nothing is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from migrator.aws import retries_of, translated
from migrator.connection import DEFAULT_THROTTLING_GIVE_UP_SECONDS
from migrator.items import Item, item_size_bytes
from migrator.ratelimit import CapacityLimiter
from migrator.throttling import UNPROCESSED, ThrottledRetry


@dataclass
class WriteCounters:
    requests: int = 0
    items: int = 0
    retries: int = 0
    unprocessed_retries: int = 0
    write_units: float = 0.0
    item_bytes: int = 0  # of the items put, as DynamoDB sizes them

    def add(self, other: "WriteCounters") -> None:
        """Fold another writer's counts into these."""
        self.requests += other.requests
        self.items += other.items
        self.retries += other.retries
        self.unprocessed_retries += other.unprocessed_retries
        self.write_units += other.write_units
        self.item_bytes += other.item_bytes


class BatchWriter:
    """Buffers puts and sends them `batch_size` at a time to one table."""

    def __init__(
        self,
        client: Any,
        table: str,
        *,
        batch_size: int,
        limiter: CapacityLimiter,
        counters: WriteCounters,
        report_capacity: bool = True,
        give_up_seconds: float = DEFAULT_THROTTLING_GIVE_UP_SECONDS,
    ):
        self._client = client
        self._table = table
        self._batch_size = batch_size
        self._limiter = limiter
        self._counters = counters
        self._report_capacity = report_capacity
        self._give_up_seconds = give_up_seconds
        self._pending: list[dict[str, Any]] = []

    def put(self, item: Item) -> None:
        self._add({"PutRequest": {"Item": item}})

    def delete(self, key: Item) -> None:
        """Delete an item by its key attributes (deleting a missing item is a no-op)."""
        self._add({"DeleteRequest": {"Key": key}})

    def _add(self, request: dict[str, Any]) -> None:
        self._pending.append(request)
        if len(self._pending) >= self._batch_size:
            self.flush()

    def flush(self) -> None:
        """Send everything buffered; returns only when all of it is written."""
        requests, self._pending = self._pending, []
        if requests:
            self._write_all(requests)

    def _write_all(self, requests: list[dict[str, Any]]) -> None:
        # Each item sized once: its bytes, the write's estimate and, when unreported, its cost.
        sizes = [_request_bytes(r) for r in requests]
        pending, pending_sizes = requests, sizes
        throttled: ThrottledRetry | None = None
        while True:
            unprocessed = self._send(pending, pending_sizes)
            if not unprocessed:
                break
            if throttled is None:
                throttled = ThrottledRetry("writing to", f"target table {self._table!r}", "target", self._give_up_seconds)
            elif len(unprocessed) < len(pending):
                throttled.progressed()  # some items got through: the give-up clock starts again
            throttled.wait(UNPROCESSED)  # raises Throttled once the give-up time has passed
            self._counters.unprocessed_retries += 1
            pending, pending_sizes = unprocessed, [_request_bytes(r) for r in unprocessed]
        self._counters.items += len(requests)
        self._counters.item_bytes += sum(sizes)

    def _send(self, requests: list[dict[str, Any]], sizes: list[int]) -> list[dict[str, Any]]:
        """One BatchWriteItem (`sizes`: each request's item bytes); returns the requests DynamoDB left unprocessed."""
        units_each = [_units(size) for size in sizes]
        estimate = float(sum(units_each))
        self._limiter.acquire(estimate)
        call: dict[str, Any] = {"RequestItems": {self._table: requests}}
        if self._report_capacity:
            call["ReturnConsumedCapacity"] = "TOTAL"
        with translated("writing to", f"target table {self._table!r}"):
            response = self._client.batch_write_item(**call)
        unprocessed = response.get("UnprocessedItems", {}).get(self._table, [])
        units = _write_units(response if self._report_capacity else {}, units_each, unprocessed)
        self._limiter.settle(units - estimate)
        self._counters.requests += 1
        self._counters.retries += retries_of(response)
        self._counters.write_units += units
        return unprocessed


def _write_units(response: dict[str, Any], units_each: list[int], unprocessed: list) -> float:
    """Reported capacity, or one unit per started KB of each written item (`units_each`: of each request sent).

    Callers pass an empty response when capacity was not asked for: some endpoints
    (moto among them) report a figure anyway that does not follow DynamoDB's rules.
    """
    consumed = response.get("ConsumedCapacity")
    if consumed:
        return float(sum(entry.get("CapacityUnits", 0) for entry in consumed))
    written = units_each[: len(units_each) - len(unprocessed)] if unprocessed else units_each
    return float(sum(written))


def _request_bytes(request: dict[str, Any]) -> int:
    """The bytes of a put's item; a delete writes none."""
    if "PutRequest" in request:
        return item_size_bytes(request["PutRequest"]["Item"])
    return 0


def _units(size: int) -> int:
    """One unit per started KB of a put item; a delete costs at least one unit."""
    return math.ceil(size / 1024) or 1
