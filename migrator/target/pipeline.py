"""Writes overlapped with the work that produces them: several BatchWriteItem calls in flight per task.

With one request at a time, the service waits while the task decodes the next lines, and the
task waits while the service writes. Here a few writer threads keep up to `writers` batches
in flight, each thread with its own `BatchWriter` and counters, all sharing one capacity
limiter. Memory stays bounded: the caller blocks once 2 × `writers` batches are waiting.
Items go out as the DynamoDB JSON they came in (`migrator.wire`).

`put_or_delete` is the one loop that turns item states into writes, for every path that
applies changes rather than copies items: replication's micro-batches and an incremental
export's newest record per key.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable, Mapping

from migrator.connection import ClientSpec
from migrator.items import Item, rename_attributes
from migrator.ratelimit import CapacityLimiter
from migrator.target.writer import BatchWriter, WriteCounters
from migrator.wire import wire_client

WRITES_IN_FLIGHT = 4

_PUT, _DELETE = "put", "delete"


class PipelinedWriter:
    """Puts and deletes for one table, sent `batch_size` at a time by background threads.

    Use as a context manager; `close()` (or leaving the block) waits for every write and
    raises the first failure. The requests of one batch must name distinct keys, as
    BatchWriteItem requires.
    """

    def __init__(
        self,
        target: ClientSpec,
        table: str,
        *,
        batch_size: int,
        limiter: CapacityLimiter,
        report_capacity: bool,
        writers: int = WRITES_IN_FLIGHT,
    ):
        self._target = target
        self._table = table
        self._batch_size = batch_size
        self._limiter = limiter
        self._report_capacity = report_capacity
        self._writers = writers
        self._pool = ThreadPoolExecutor(writers, thread_name_prefix="write")
        self._in_flight: deque[Future] = deque()
        self._batch: list[tuple[str, Item]] = []
        self._per_thread = threading.local()
        self._thread_counters: list[WriteCounters] = []
        self._closed = False

    def __enter__(self) -> "PipelinedWriter":
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        else:  # a failure upstream: let running writes end, start no new ones
            self._pool.shutdown(wait=True, cancel_futures=True)

    def put(self, item: Item) -> None:
        self._add((_PUT, item))

    def delete(self, key: Item) -> None:
        self._add((_DELETE, key))

    def written_so_far(self) -> tuple[int, int]:
        """Items the target has confirmed so far and their bytes; read while the writes go on, for progress."""
        counters = list(self._thread_counters)
        return sum(c.items for c in counters), sum(c.item_bytes for c in counters)

    def close(self) -> WriteCounters:
        """Send what is buffered, wait for every write, and return the summed counters."""
        if not self._closed:
            self._closed = True
            try:
                self._submit()
                while self._in_flight:
                    self._in_flight.popleft().result()  # raises the first write failure
            finally:
                self._pool.shutdown(wait=True, cancel_futures=True)
        total = WriteCounters()
        for counters in self._thread_counters:
            total.add(counters)
        return total

    def _add(self, request: tuple[str, Item]) -> None:
        self._batch.append(request)
        if len(self._batch) >= self._batch_size:
            self._submit()
        while len(self._in_flight) > 2 * self._writers:  # bounded memory: wait for the oldest
            self._in_flight.popleft().result()

    def _submit(self) -> None:
        if self._batch:
            self._in_flight.append(self._pool.submit(self._write, self._batch))
            self._batch = []

    def _write(self, batch: list[tuple[str, Item]]) -> None:
        writer = self._writer()
        for operation, item in batch:
            if operation == _PUT:
                writer.put(item)
            else:
                writer.delete(item)
        writer.flush()

    def _writer(self) -> BatchWriter:
        """This thread's writer: BatchWriter keeps a buffer, so threads cannot share one."""
        writer = getattr(self._per_thread, "writer", None)
        if writer is None:
            counters = WriteCounters()
            self._thread_counters.append(counters)
            writer = self._per_thread.writer = BatchWriter(
                wire_client(self._target), self._table, batch_size=self._batch_size,
                limiter=self._limiter, counters=counters, report_capacity=self._report_capacity,
                give_up_seconds=self._target.throttling_give_up_seconds,
            )  # fmt: skip
        return writer


def put_or_delete(
    writer: PipelinedWriter, states: Iterable[tuple[Item, Item | None]], renames: Mapping[str, str]
) -> tuple[int, int]:
    """Write each key's state, given as (keys, image): put the image, or delete the key when the
    image is None. Attributes are renamed as the target names them (key attributes included).
    Returns (puts, deletes) queued; `writer.close()` still has to confirm them.
    """
    puts = deletes = 0
    for keys, image in states:
        if image is None:
            writer.delete(rename_attributes(keys, renames, tuple(keys)))
            deletes += 1
        else:
            writer.put(rename_attributes(image, renames, tuple(keys)))
            puts += 1
    return puts, deletes
