"""The Spark Python data source `dynamodb_changes`: the shard records of the stream, as rows.

This is what Spark calls to read the source's changes, from DynamoDB Streams or from the
Kinesis data stream the table streams to (a `migrator.source.stream_feeds` feed, either way).
Its offset is the position of every shard (`migrator.stream.offsets.StreamOffset`), held by
Spark's checkpoint. The reader's methods run in a Python process under the driver JVM:
`latestOffset` discovers shards (a page at a time, within the listing API's quota:
`migrator.stream.listing`), reads the readable ones, several at once (children only after their
parent is fully read) and caches the records for `partitions`, which hands them to the executors
packed into a few partitions (about two per core), each shard's range whole in one.
After a restart nothing is cached and executors re-read the planned range by sequence
number. After a restart the reader learns where it stands from Spark: 4.1 and later pass
the start to `latestOffset`; 4.0 calls `partitions(offset, offset)` with the last offset of
its log.

Each stream record becomes a `ChangeRecord` once, here, by its feed; the row carries that
record as it is (`ROW_SCHEMA`), so the apply step gets the same ChangeRecord back without
decoding the record again, whichever stream it came from.

Kept apart from the apply step and the query: this module is all Spark asks of a source,
and the row schema here is the one contract between the reader and `migrator.replicate.apply`.
"""

from __future__ import annotations

import pickle
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from migrator.connection import ClientSpec
from migrator.errors import CheckpointError
from migrator.source.dynamodb_streams import StreamInfo
from migrator.source.kinesis import KinesisStream
from migrator.source.stream_feeds import DynamoDBStreamsFeed, KinesisFeed
from migrator.stream.kinesis_records import SkippedRecord
from migrator.stream.listing import ShardListing
from migrator.stream.offsets import ShardPosition, StreamOffset
from migrator.stream.packing import pack, partition_count
from migrator.stream.reading import ShardRead
from migrator.stream.records import ChangeRecord
from migrator.stream.shards import Shard, depth, readable_shards

SOURCE_NAME = "dynamodb_changes"
# A row is one stream record: `change`, the feed's ChangeRecord pickled (its items in wire
# form, untouched: no number, binary or set is converted on the way), or, for a record that is
# no change of the source, `skipped`, why.
ROW_SCHEMA = "change BINARY, skipped STRING"
RECORDS_PER_SHARD_PER_BATCH = 1000
# At most about this many records a partition: 1,000 stream records of small items pickle to about
# 0.4 MB, under the 1 MB above which Spark warns that a task is large.
RECORDS_PER_PARTITION = 1000
# Shards the driver reads at once in a trigger: read one after the other, 2,000 shards would make
# a trigger wait out 2,000 round trips (the client factory's pool holds 32 connections).
SHARD_READERS = 16

Feed = DynamoDBStreamsFeed | KinesisFeed


@dataclass(frozen=True)
class ShardRange:
    """Records of one shard after `after` up to `until` (inclusive), maybe already read."""

    feed: Feed
    shard_id: str
    after: str | None
    until: str
    depth: int
    records: list[dict[str, Any]] | None = field(default=None, compare=False)
    first: str | None = None  # the first record the range held when it was planned


def changes_source(feed: Feed, partitions: int) -> type[DataSource]:
    """The data source class of one replication: `spark.readStream.format("dynamodb_changes")`, reading `feed`
    in batches of at most `partitions` input partitions.

    The reader needs the live table's client spec, credentials included. Options cannot carry
    them: they are strings, shown in the query plan, the Spark UI and the event log. Nor can the
    reader load the config again: it runs in Python processes the driver's JVM starts, with no
    SparkContext to reach an `hdfs://` config, and a config the Python API parsed from text is no
    file at all. The class made here holds the feed, and Spark pickles a registered class (by
    value, since this one cannot be imported by name) into the processes that plan and read the
    stream. The feed is what the driver resolved (the region it pinned too), credentials only as
    `Secret` values, as in the partitions that carry it on to executors.
    """

    class ChangesDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return SOURCE_NAME

        def schema(self) -> str:
            return ROW_SCHEMA

        def streamReader(self, schema) -> "ChangesReader":
            return ChangesReader(feed, partitions)

    return ChangesDataSource


def feed_of(stream: StreamInfo | KinesisStream, source: ClientSpec, table: str) -> Feed:
    """The feed that reads `stream` with `source`'s client spec; `table` is the live table (a Kinesis
    stream may carry the records of several tables)."""
    if isinstance(stream, KinesisStream):
        return KinesisFeed(source, stream.arn, table, tuple(stream.key_names), stream.start_at, stream.retention_hours)
    return DynamoDBStreamsFeed(source, stream.arn, stream.view_type, tuple(stream.key_names))


class ChangesReader(DataSourceStreamReader):
    """Offsets are per-shard positions; the driver packs the shards with new records into at most
    `partitions` input partitions, each shard's range whole in one (`migrator.stream.packing`)."""

    def __init__(self, feed: Feed, partitions: int):
        self._feed = feed
        self._partitions = partitions
        self._arn = self._feed.arn
        self._position: StreamOffset | None = None
        self._listing = ShardListing()  # paced to the listing API's quota (DescribeStream: 10 calls/s)
        self._listed: list | None = None  # the shards latestOffset saw, for partitions' depths
        self._cache: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
        # shard -> (last sequence number read, the iterator to read on from): one
        # GetShardIterator call less per shard and trigger.
        self._iterators: dict[str, tuple[str | None, str]] = {}
        self._arrivals: dict[str, float | None] = {}  # shard -> arrival time of the last record read

    def _offset(self, document: dict) -> StreamOffset:
        """An offset of the checkpoint; its Kinesis start (fixed on the first run) is the one read from."""
        offset = StreamOffset.from_dict(document, self._arn)
        if offset.start_at is not None and offset.start_at != self._feed.start_at:
            self._feed = replace(self._feed, start_at=offset.start_at)
        return offset

    def _shards(self) -> list[Shard]:
        return self._listing.shards(self._feed.list_page)

    def initialOffset(self) -> dict:
        shards = self._shards()
        return StreamOffset.empty(self._arn, self._feed.start_at).with_shards(shards).to_dict()

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """Read what is new in every readable shard; the offset after it ends the next batch.

        Spark 4.1 and later pass the batch's start (the end of the last one, from the
        checkpoint after a restart); 4.0 passes nothing and tells the reader through
        `partitions(offset, offset)` instead, which sets `_position`.
        """
        if start is not None:
            current = self._offset(start)
        else:
            current = self._position or self._offset(self.initialOffset())
        listed = self._listed = self._shards()
        lost = current.lost_shards(listed)
        if lost:
            raise CheckpointError(f"shards {', '.join(lost)} of the checkpoint are gone from the stream before being read to their end")
        current = current.without_trimmed(listed).with_shards(listed).without_spent_positions()
        starts = []
        for shard in readable_shards(listed, current.finished):
            position = current.shards[shard.shard_id]
            starts.append((shard, position, self._iterator_after(shard.shard_id, position.sequence_number)))
        with ThreadPoolExecutor(SHARD_READERS, thread_name_prefix="shard-read") as pool:
            reads = list(pool.map(lambda start: self._read_new(*start), starts))
        moved = {
            shard.shard_id: self._moved(shard, position, read) for (shard, position, _), read in zip(starts, reads)
        }
        self._look_up_children([shard.shard_id for (shard, _, _), read in zip(starts, reads) if read.reached_end])
        current = self._position = current.with_positions(moved)
        return current.to_dict()

    def _look_up_children(self, parents: list[str]) -> None:
        """The children of parents read to their end, found now rather than by a later listing pass,
        so the next trigger reads them (DynamoDB Streams; Kinesis' ListShards has no such filter)."""
        if not isinstance(self._feed, DynamoDBStreamsFeed):
            return
        for parent_id in parents:
            if not self._listing.children_of(parent_id, self._feed.children_of):
                return  # no token left: the listing finds the others

    def _read_new(self, shard: Shard, position: ShardPosition, iterator: str | None) -> ShardRead:
        """What is new in one shard (on a reader thread: touches no state of the reader)."""
        after = position.sequence_number
        if after is not None:
            self._feed.check_retained(shard.shard_id, after, position.at_tip, self._arrivals.get(shard.shard_id))
        return self._feed.read_new(shard.shard_id, after, RECORDS_PER_SHARD_PER_BATCH, iterator)

    def _moved(self, shard: Shard, position: ShardPosition, read: ShardRead) -> ShardPosition:
        """The shard's position after `read`; its records are cached for `partitions`."""
        after = position.sequence_number
        if read.next_iterator is not None:
            last = self._feed.sequence_of(read.records[-1]) if read.records else after
            self._iterators[shard.shard_id] = (last, read.next_iterator)
        if read.records:
            self._cache[(shard.shard_id, after)] = read.records
            self._arrivals[shard.shard_id] = self._feed.arrival_of(read.records[-1])
            first, last = (self._feed.sequence_of(read.records[i]) for i in (0, -1))
            position = position.advanced(shard.shard_id, last, range_first=first)
        if read.millis_behind is not None:  # Kinesis: the key state's watermark needs it
            position = replace(position, at_tip=read.millis_behind == 0)
        # No next iterator: "the shard has been closed and the requested iterator will not return any
        # more data" (GetRecords, both APIs), even while the paced listing still shows it open.
        if read.reached_end:
            position = replace(position, finished=True)
        return position

    def _iterator_after(self, shard_id: str, after: str | None) -> str | None:
        """The iterator the last read of this shard left, if it ended where this one starts."""
        cached = self._iterators.pop(shard_id, None)
        return cached[1] if cached is not None and cached[0] == after else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        first, last = self._offset(start), self._offset(end)
        if self._position is None:  # a restart: Spark tells us where its log ends
            self._position = last
        if first == last:
            return []
        # The shards latestOffset just listed (no second listing), or, for a batch
        # replayed after a restart, a fresh listing.
        depths = depth(self._listed if self._listed is not None else self._shards())
        ranges = []
        for shard_id, position in last.shards.items():
            after = first.shards.get(shard_id, ShardPosition()).sequence_number
            if position.sequence_number is None or position.sequence_number == after:
                continue
            cached = self._cache.pop((shard_id, after), None)
            if cached and self._feed.sequence_of(cached[-1]) != position.sequence_number:
                cached = None
            planned = ShardRange(
                self._feed, shard_id, after, position.sequence_number, depths.get(shard_id, 0), cached, position.range_first
            )
            ranges.append(planned)
        # A range read again after a restart counts as full: its size is unknown until read.
        weights = [len(r.records) if r.records is not None else RECORDS_PER_SHARD_PER_BATCH for r in ranges]
        bins = partition_count(sum(weights), self._partitions, RECORDS_PER_PARTITION)
        return [InputPartition([ranges[i] for i in group]) for group in pack(weights, bins)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        for planned in partition.value:
            yield from _rows(planned)

    def commit(self, end: dict) -> None:
        """Nothing to do: Spark's checkpoint holds the offsets."""


def _rows(planned: ShardRange) -> Iterator[tuple]:
    """The rows of one shard's range, in the shard's order."""
    records = planned.records
    if records is None:  # nothing cached (a restart): read the same range again by sequence number
        records = planned.feed.read_range(planned.shard_id, planned.after, planned.until).records
        _check_nothing_trimmed(planned, records)
    for record in records:
        try:
            change = planned.feed.to_change(record, planned.shard_id, planned.depth)
        except SkippedRecord as skipped:  # counted and logged by the driver, never fatal
            yield skipped_row(skipped)
            continue
        yield change_row(change)


def _check_nothing_trimmed(planned: ShardRange, records: list[dict[str, Any]]) -> None:
    """A range read again must start with the record it started with when planned.

    Records trimmed since are not always an error of the API: TRIM_HORIZON (a shard's first range)
    and Kinesis start silently at the oldest record kept.
    """
    found = planned.feed.sequence_of(records[0]) if records else None
    if planned.first is not None and found != planned.first:
        where = f"after sequence number {planned.after}" if planned.after else "from its start"
        raise CheckpointError(
            f"records of shard {planned.shard_id} {where} were trimmed before the batch that read them was "
            f"applied (the range began at {planned.first}; the stream now starts it at {found or 'nothing'})"
        )


def change_row(change: ChangeRecord) -> tuple:
    return (pickle.dumps(change), None)


def skipped_row(skipped: SkippedRecord) -> tuple:
    return (None, f"{skipped.kind}: {skipped}")


def change_of(row: Any) -> ChangeRecord | None:
    """The change a row carries, as the feed made it; None for a record that is no change (see `skipped_of`)."""
    return pickle.loads(row["change"]) if row["change"] is not None else None


def skipped_of(row: Any) -> str:
    """Why a row's record is no change of the source: "<kind>: <message>" (`SkippedRecord`)."""
    return row["skipped"]
