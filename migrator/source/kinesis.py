"""Kinesis Data Streams for DynamoDB over boto3: the table's streaming destination, the stream's shards, reading them.

The user creates the Kinesis stream (shards, retention, encryption); the migrator enables the
table's streaming destination to it, asking for microsecond creation times, and leaves it
enabled when it stops. Replay starts AT_TIMESTAMP: every shard not read yet starts at the
instant captured before the snapshot (`start_at`), and a shard in the checkpoint resumes
AFTER_SEQUENCE_NUMBER. The rest is as for DynamoDB Streams (`migrator.stream.reading`):
children after parents, closed shards read to their end, expired iterators (5 minutes)
replaced. Kinesis allows 5 GetRecords calls per second per shard: calls of one read are
spaced 200 ms apart and ProvisionedThroughputExceededException backs off.

Kinesis keeps records for its retention period (24 hours to 365 days) and, unlike DynamoDB
Streams, does not say when a position has been trimmed: an iterator after a trimmed record
starts at the oldest record kept. So the age of the replay start and of the checkpoint is
checked against the retention (`start_is_retained`, `migrator.replicate.checkpoint`), and a shard read
behind the stream's tip is checked against its trim horizon (`check_retained`) when a run
resumes it and, while running, once the last record read from it nears the retention's age
(`needs_trim_check`).
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import botocore.exceptions as bx

from migrator import errors
from migrator.aws import translate_error, translated
from migrator.stream.listing import all_pages
from migrator.stream.reading import Expired, ShardRead, read_pages
from migrator.stream.shards import Shard

log = logging.getLogger(__name__)

DESTINATION_ACTIVE_TIMEOUT_SECONDS = 300
THROTTLE_BACKOFF_SECONDS = (0.2, 0.5, 1.0, 2.0, 4.0)
SECONDS_BETWEEN_CALLS = 0.2  # 5 GetRecords calls per second per shard
MAX_RECORDS_PER_CALL = 10_000
# A replay start or a checkpoint older than the retention less this margin is refused, as the
# DynamoDB Streams path refuses one older than 18 of 24 hours: catching up after a long stop
# takes time too, and Kinesis goes on trimming meanwhile.
RETENTION_MARGIN_SECONDS = 6 * 3600  # as migrator.replicate.checkpoint's
# Records are trimmed once older than the retention, never sooner; the guard covers the skew
# between the driver's clock and the arrival times Kinesis stamps.
TRIM_GUARD_SECONDS = 600


@dataclass(frozen=True)
class KinesisStream:
    """The Kinesis stream the source table's changes go to, and where replay starts."""

    arn: str
    key_names: tuple[str, ...]
    start_at: str  # ISO-8601 UTC: AT_TIMESTAMP for shards with nothing read yet
    retention_hours: int


def iso_instant(epoch_seconds: float) -> str:
    """An instant as ISO-8601 UTC with microseconds, the form offsets and logs carry."""
    return datetime.fromtimestamp(epoch_seconds, tz=timezone.utc).isoformat(timespec="microseconds")


def epoch_of(instant: str) -> float:
    return datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp()


def ensure_destination(dynamodb: Any, table: str, stream_arn: str) -> bool:
    """Make the table stream its changes to `stream_arn`; True when this call enabled it.

    An ACTIVE destination to this stream is used as is. One still ENABLING is waited for.
    A table streaming to another Kinesis stream is refused: DynamoDB would not take a second
    destination (or would split the changes between the two), so the user chooses.
    """
    mine = check_destination(dynamodb, table, stream_arn)
    status = mine.get("DestinationStatus") if mine else None
    if status == "ACTIVE":
        _warn_on_millisecond_precision(table, mine)
        log.info("source %r already streams its changes to %s: using it", table, stream_arn)
        return False
    if status != "ENABLING":
        with translated("enabling the Kinesis streaming destination of", f"source table {table!r}"):
            dynamodb.enable_kinesis_streaming_destination(
                TableName=table, StreamArn=stream_arn,
                EnableKinesisStreamingConfiguration={"ApproximateCreationDateTimePrecision": "MICROSECOND"},
            )  # fmt: skip
    _wait_until_active(dynamodb, table, stream_arn)
    log.info(
        "enabled the Kinesis streaming destination of %r to %s (microsecond creation times); it stays "
        "enabled when the migrator stops", table, stream_arn,
    )  # fmt: skip
    return True


def check_destination(dynamodb: Any, table: str, stream_arn: str) -> dict[str, Any] | None:
    """The table's destination to `stream_arn` (None when it has none); SourceError when it streams to
    another stream. DescribeKinesisStreamingDestination only."""
    destinations = _destinations(dynamodb, table)
    mine = next((d for d in destinations if d.get("StreamArn") == stream_arn), None)
    if mine is not None and mine.get("DestinationStatus") == "ACTIVE":
        return mine
    others = [d["StreamArn"] for d in destinations if d.get("DestinationStatus") in ("ACTIVE", "ENABLING") and d.get("StreamArn") != stream_arn]
    if others:
        raise errors.SourceError(
            f"source table {table!r} already streams its changes to {others[0]}, not to the configured "
            f"{stream_arn}: set target.streamChanges.streamArn to that stream, or disable that destination first"
        )
    return mine


def _destinations(dynamodb: Any, table: str) -> list[dict[str, Any]]:
    with translated("describing the Kinesis streaming destinations of", f"source table {table!r}"):
        response = dynamodb.describe_kinesis_streaming_destination(TableName=table)
    return list(response.get("KinesisDataStreamDestinations") or [])


def _wait_until_active(dynamodb: Any, table: str, stream_arn: str) -> None:
    deadline = time.monotonic() + DESTINATION_ACTIVE_TIMEOUT_SECONDS
    while True:
        mine = next((d for d in _destinations(dynamodb, table) if d.get("StreamArn") == stream_arn), {})
        status = mine.get("DestinationStatus")
        if status == "ACTIVE":
            return
        if status in ("ENABLE_FAILED", "DISABLED", "DISABLING"):
            reason = mine.get("DestinationStatusDescription") or "no reason given"
            raise errors.SourceError(
                f"enabling the Kinesis streaming destination of {table!r} to {stream_arn} failed ({status}: "
                f"{reason}): check that the stream exists, is ACTIVE, and that DynamoDB may write to it (KMS key policy)"
            )
        if time.monotonic() > deadline:
            raise errors.SourceError(
                f"the Kinesis streaming destination of {table!r} to {stream_arn} was not ACTIVE after "
                f"{DESTINATION_ACTIVE_TIMEOUT_SECONDS} s (status {status}): run the job again once it is"
            )
        time.sleep(1)


def _warn_on_millisecond_precision(table: str, destination: dict[str, Any]) -> None:
    if destination.get("ApproximateCreationDateTimePrecision", "MILLISECOND") == "MILLISECOND":
        log.warning(
            "the Kinesis streaming destination of %r records creation times in milliseconds: two changes of "
            "one item within a millisecond are ordered by shard position only; UpdateKinesisStreamingDestination "
            "can switch it to MICROSECOND", table,
        )  # fmt: skip


def retention_hours(kinesis: Any, stream_arn: str) -> int:
    """The stream's retention; a missing stream is an error that says the user creates it."""
    try:
        summary = kinesis.describe_stream_summary(StreamARN=stream_arn)["StreamDescriptionSummary"]
    except bx.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            raise errors.SourceError(
                f"Kinesis stream {stream_arn} does not exist: create it first (the migrator does not create "
                "streams), or fix target.streamChanges.streamArn"
            ) from exc
        raise translate_error(exc, "describing", f"Kinesis stream {stream_arn}") from exc
    except bx.BotoCoreError as exc:
        raise translate_error(exc, "describing", f"Kinesis stream {stream_arn}") from exc
    return int(summary.get("RetentionPeriodHours", 24))


def check_start_is_retained(start_at: str, hours: int, now: float | None = None) -> None:
    """Refuse a replay start older than the stream keeps records (less a margin for catching up)."""
    age = (now if now is not None else time.time()) - epoch_of(start_at)
    limit = hours * 3600 - RETENTION_MARGIN_SECONDS
    if age > limit:
        raise errors.CheckpointError(
            f"the replay start {start_at} is {age / 3600:.1f} h old, but the Kinesis stream keeps records "
            f"{hours} h (the limit, leaving 6 h to catch up, is {limit / 3600:.0f} h): changes made after "
            "that instant may be gone"
        )


def needs_trim_check(at_tip: bool, last_arrival: float | None, hours: int, now: float | None = None) -> bool:
    """Whether records after a shard's position may have been trimmed, so its horizon must be checked.

    A shard last read at the stream's tip receives only records that arrive later, inside the
    retention. Behind the tip, what follows the last record read arrived after it: nothing is
    trimmed while that record is younger than the retention. Its arrival is unknown when a run
    resumes the shard (None): check then.
    """
    if at_tip:
        return False
    if last_arrival is None:
        return True
    now = now if now is not None else time.time()
    return now - last_arrival > hours * 3600 - TRIM_GUARD_SECONDS


def check_retained(kinesis: Any, stream_arn: str, shard_id: str, after: str, hours: int) -> None:
    """Raise CheckpointError when the shard's oldest kept record is past `after` (or none is kept).

    Reading on after `after` would silently start at that record: the ones in between, unread,
    may have been trimmed.
    """
    oldest = oldest_kept(kinesis, stream_arn, shard_id)
    if oldest is None or int(oldest) > int(after):
        kept = f"its oldest record is now {oldest}" if oldest else "it holds no record any more"
        raise errors.CheckpointError(
            f"records of Kinesis shard {shard_id} after sequence number {after}, not read yet, may have been "
            f"trimmed: {kept} (the stream keeps records {hours} h and reading fell that far behind)"
        )


def oldest_kept(kinesis: Any, stream_arn: str, shard_id: str) -> str | None:
    """The sequence number of the shard's oldest kept record; None when it keeps none.

    A TRIM_HORIZON iterator may return empty pages before the first record ("GetRecords might return
    an empty result ... multiple calls might be needed", Kinesis API Reference), so the pages are
    followed until a record, the tip (MillisBehindLatest 0) or the end of a closed shard.
    """
    request = {"StreamARN": stream_arn, "ShardId": shard_id, "ShardIteratorType": "TRIM_HORIZON"}
    with translated("getting the trim horizon of", f"Kinesis shard {shard_id}"):
        iterator = kinesis.get_shard_iterator(**request).get("ShardIterator")
        while iterator:
            page = kinesis.get_records(ShardIterator=iterator, Limit=1, StreamARN=stream_arn)
            if page.get("Records"):
                return page["Records"][0]["SequenceNumber"]
            if not page.get("MillisBehindLatest"):
                return None
            iterator = page.get("NextShardIterator")
    return None


def arrival_of(record: dict[str, Any]) -> float | None:
    """When Kinesis received the record (epoch seconds), as GetRecords stamps it."""
    arrival = record.get("ApproximateArrivalTimestamp")
    return arrival.timestamp() if isinstance(arrival, datetime) else None


def list_shards(kinesis: Any, stream_arn: str) -> list[Shard]:
    """Every shard ListShards returns (open and closed ones still retained), following NextToken."""
    return all_pages(functools.partial(list_page, kinesis, stream_arn))


def list_page(kinesis: Any, stream_arn: str, token: str | None) -> tuple[list[Shard], str | None]:
    """One ListShards page (1,000 shards by default) and the token of the next (None: none)."""
    request = {"NextToken": token} if token else {"StreamARN": stream_arn}  # ListShards takes the token alone
    with translated("listing the shards of", f"Kinesis stream {stream_arn}"):
        response = kinesis.list_shards(**request)
    return [Shard.from_description(s) for s in response.get("Shards", [])], response.get("NextToken") or None


def sequence_of(record: dict[str, Any]) -> str:
    return record["SequenceNumber"]


def read_shard(
    kinesis: Any,
    stream_arn: str,
    shard_id: str,
    after: str | None,
    start_at: str,
    *,
    max_records: int = 1000,
    max_calls: int = 4,
    until: str | None = None,
    iterator: str | None = None,
) -> ShardRead:
    """Records of a shard after sequence number `after` (AT_TIMESTAMP `start_at` when None)."""
    return read_pages(
        _KinesisApi(kinesis, stream_arn, start_at), sequence_of, shard_id, after,
        max_records=max_records, max_calls=max_calls, until=until, iterator=iterator,
        page_limit=MAX_RECORDS_PER_CALL, pause=lambda: time.sleep(SECONDS_BETWEEN_CALLS),
    )  # fmt: skip


@dataclass(frozen=True)
class _KinesisApi:
    kinesis: Any
    arn: str
    start_at: str

    def iterator(self, shard_id: str, after: str | None) -> str | None:
        request: dict[str, Any] = {"StreamARN": self.arn, "ShardId": shard_id}
        if after is None:
            request.update(ShardIteratorType="AT_TIMESTAMP", Timestamp=datetime.fromisoformat(self.start_at))
        else:
            request.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=after)
        try:
            return self.kinesis.get_shard_iterator(**request).get("ShardIterator")
        except bx.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                raise errors.CheckpointError(f"shard {shard_id} of the checkpoint no longer exists in the Kinesis stream") from exc
            raise translate_error(exc, "getting an iterator for", f"Kinesis shard {shard_id}") from exc

    def page(self, shard_id: str, iterator: str, limit: int) -> dict[str, Any]:
        for pause in (*THROTTLE_BACKOFF_SECONDS, None):
            try:
                return self.kinesis.get_records(ShardIterator=iterator, Limit=limit, StreamARN=self.arn)
            except bx.ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code == "ExpiredIteratorException":
                    raise Expired() from exc
                if code in ("ProvisionedThroughputExceededException", "LimitExceededException") and pause is not None:
                    time.sleep(pause)
                    continue
                raise translate_error(exc, "reading", f"Kinesis shard {shard_id}") from exc
        raise AssertionError("unreachable")
