"""Reading one shard page by page: the loop DynamoDB Streams and Kinesis share.

Both services hand out shard iterators and pages of records with a next iterator, which is
absent once a closed shard is read to its end. What differs (how an iterator is requested,
where a record keeps its sequence number, which errors mean what) comes in as a `ShardApi`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol


class Expired(Exception):
    """The shard iterator expired: get a new one after the last record read."""


class ShardApi(Protocol):
    def iterator(self, shard_id: str, after: str | None) -> str | None:
        """An iterator at the first record after sequence number `after` (None: the start)."""

    def page(self, shard_id: str, iterator: str, limit: int) -> dict[str, Any]:
        """One GetRecords response; raises Expired when the iterator has expired."""


@dataclass
class ShardRead:
    """Records read from one shard, and whether the shard is closed and fully read."""

    records: list[dict[str, Any]]
    reached_end: bool
    next_iterator: str | None = None  # where the next read of this shard can go on from
    millis_behind: int | None = None  # Kinesis: the last page's MillisBehindLatest (0: at the stream's tip)


def read_pages(
    api: ShardApi,
    sequence_of: Callable[[dict[str, Any]], str],
    shard_id: str,
    after: str | None,
    *,
    max_records: int,
    max_calls: int,
    until: str | None = None,
    iterator: str | None = None,
    page_limit: int = 1000,
    pause: Callable[[], None] | None = None,
) -> ShardRead:
    """Records of a shard after sequence number `after`.

    Without `until` (reading what is new): stops after the first page that has records or
    the first empty one (an open shard's empty page means "nothing new yet"). With `until`
    (re-reading a planned range): stops past it (inclusive), after `max_records` or
    `max_calls`. Either way stops at the end of a closed shard. `iterator`, the
    `next_iterator` of the read that ended at `after`, saves a GetShardIterator call; an
    expired one is replaced. `pause` runs between two calls of one read (rate limits).
    """
    records: list[dict[str, Any]] = []
    iterator = iterator or api.iterator(shard_id, after)
    calls = 0
    millis_behind = None
    while iterator and calls < max_calls and len(records) < max_records:
        if calls and pause is not None:
            pause()
        calls += 1
        try:
            response = api.page(shard_id, iterator, min(page_limit, max_records - len(records)))
        except Expired:
            iterator = api.iterator(shard_id, sequence_of(records[-1]) if records else after)
            continue
        for record in response.get("Records", []):
            if until is not None and int(sequence_of(record)) > int(until):
                return ShardRead(records, reached_end=False)
            records.append(record)
        if until is not None and records and sequence_of(records[-1]) == until:
            return ShardRead(records, reached_end=False)
        iterator = response.get("NextShardIterator")
        millis_behind = response.get("MillisBehindLatest")
        if until is None:
            break  # what is there now; the next trigger reads on
    return ShardRead(records, reached_end=iterator is None, next_iterator=iterator, millis_behind=millis_behind)
