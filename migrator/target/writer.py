"""BatchWriteItem in batches, retrying unprocessed items with exponential back-off and jitter.

Errors (throttling, 5xx, dropped connections) are retried inside botocore's adaptive retry
mode; what DynamoDB accepts but leaves in UnprocessedItems is resent here. Nothing is
dropped: items still unprocessed after every attempt raise WriteFailed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from migrator.aws import retries_of, translated
from migrator.errors import WriteFailed
from migrator.items import Item, item_size_bytes
from migrator.ratelimit import CapacityLimiter

UNPROCESSED_ATTEMPTS = 15


@dataclass
class WriteCounters:
    requests: int = 0
    items: int = 0
    retries: int = 0
    unprocessed_retries: int = 0
    write_units: float = 0.0

    def add(self, other: "WriteCounters") -> None:
        """Fold another writer's counts into these."""
        self.requests += other.requests
        self.items += other.items
        self.retries += other.retries
        self.unprocessed_retries += other.unprocessed_retries
        self.write_units += other.write_units


class _Unprocessed(Exception):
    """Some requests of a batch came back in UnprocessedItems."""


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
    ):
        self._client = client
        self._table = table
        self._batch_size = batch_size
        self._limiter = limiter
        self._counters = counters
        self._report_capacity = report_capacity
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
        remaining = requests
        retrying = Retrying(
            retry=retry_if_exception_type(_Unprocessed),
            wait=wait_random_exponential(multiplier=0.05, max=5),
            stop=stop_after_attempt(UNPROCESSED_ATTEMPTS),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        self._counters.unprocessed_retries += 1
                    remaining = self._send(remaining)
                    if remaining:
                        raise _Unprocessed()
        except _Unprocessed:
            raise WriteFailed(self._table, len(remaining), UNPROCESSED_ATTEMPTS) from None
        self._counters.items += len(requests)

    def _send(self, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One BatchWriteItem; returns the requests DynamoDB left unprocessed."""
        estimate = float(sum(_request_units(r) for r in requests))
        self._limiter.acquire(estimate)
        call: dict[str, Any] = {"RequestItems": {self._table: requests}}
        if self._report_capacity:
            call["ReturnConsumedCapacity"] = "TOTAL"
        with translated("writing to", f"target table {self._table!r}"):
            response = self._client.batch_write_item(**call)
        unprocessed = response.get("UnprocessedItems", {}).get(self._table, [])
        units = _write_units(response if self._report_capacity else {}, requests, unprocessed)
        self._limiter.settle(units - estimate)
        self._counters.requests += 1
        self._counters.retries += retries_of(response)
        self._counters.write_units += units
        return unprocessed


def _write_units(response: dict[str, Any], sent: list[dict[str, Any]], unprocessed: list) -> float:
    """Reported capacity, or one unit per started KB of each written item.

    Callers pass an empty response when capacity was not asked for: some endpoints
    (moto among them) report a figure anyway that does not follow DynamoDB's rules.
    """
    consumed = response.get("ConsumedCapacity")
    if consumed:
        return float(sum(entry.get("CapacityUnits", 0) for entry in consumed))
    written = sent[: len(sent) - len(unprocessed)] if unprocessed else sent
    return float(sum(_request_units(r) for r in written))


def _request_units(request: dict[str, Any]) -> int:
    """One unit per started KB of a put item; a delete costs at least one unit."""
    if "PutRequest" in request:
        return math.ceil(item_size_bytes(request["PutRequest"]["Item"]) / 1024) or 1
    return 1
