"""Chaining an S3 export with the live table's stream: is every change since the export replayable?

An export is the table as of one instant (its summary's `exportTime`). After importing it,
replicating the stream of the table it was taken from (`source.streamSource`) keeps the
target in sync only if that stream still holds every change made since that instant.
DynamoDB Streams keep a record 24 hours, and a stream holds only changes made after it was
created, so both must hold:

1. the table's current stream was created before the export's instant: a stream enabled
   later never saw the changes in between, and enabling one now cannot bring them back;
2. the export's instant is less than 18 hours ago: records older than 24 hours have been trimmed,
   and replication needs the other 6 hours to read the changes since the export before the
   stream trims them (the margin a checkpoint is given, `migrator.replicate.checkpoint`).

Then replication starts from the stream's oldest record (TRIM_HORIZON, what a fresh
checkpoint does), which is at or before the export's instant. Replaying changes older than
the export over the imported items is harmless: each key is put or deleted as its changes
say, in stream order, so it ends at the state of its newest change, which is the live
table's (a key the stream never mentions was not changed since before the export, so the
import already holds its live state).

When a rule does not hold, the run stops before anything is written with `StreamGap`,
naming the gap and the ways out, unless `source.acceptStreamGap: true` accepts losing the
changes of that gap (a warning is logged). The 18-hour rule is checked again once the
import is done, when replication is about to start from the stream's oldest record: a long
import can push the export's instant past the retention.

The instant is `exportTime` (for an incremental export, the end of its window,
`exportToTime`); a full export's summary without it (old exports) falls back to `startTime`,
with a warning. A rerun whose checkpoint exists resumes from the checkpoint instead: the
rules above no longer matter, the checkpoint's own checks (migrator.replicate.checkpoint) do.

In Kinesis mode (`target.streamChanges: {type: kinesis}`) the stream is the Kinesis data
stream the live table streams to, read by default from the export's instant (AT_TIMESTAMP,
`open_kinesis_stream`) rather than from the oldest record: the rule is then only that the
stream's retention (up to a year) still holds that start, less 6 h to catch up
(`check_kinesis_gap`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from migrator import aws
from migrator.replicate.checkpoint import MAX_AGE_SECONDS, Checkpoint
from migrator.config import MigratorConfig
from migrator.errors import STOPPED_RATHER_THAN_SKIP, CheckpointError, ConfigError, StreamGap
from migrator.export.manifest import ExportSummary
from migrator.source.s3export import ExportManifests
from migrator.source.stream_source import describe_stream_source
from migrator.replicate.kinesis_start import open_kinesis
from migrator.source.dynamodb_streams import StreamInfo, ensure_stream
from migrator.source.kinesis import KinesisStream, check_start_is_retained
from migrator.target import tables

log = logging.getLogger(__name__)

STREAM_RETENTION = timedelta(hours=24)
CATCH_UP_LIMIT = timedelta(seconds=MAX_AGE_SECONDS)  # an export older than this leaves too little time to read its changes

# What to do when the checkpoint of a chained run cannot be honoured: the migrator cannot
# take a new export, and re-importing this one cannot cover what the stream dropped.
CHAINED_WAYS_OUT = (
    "The source is an S3 export, which cannot be copied again to cover the changes the stream dropped. "
    "Two ways out: take a new export of the live table (its stream enabled), delete the checkpoint "
    "directory and the savepoint, point source.manifestKey at the new export and run again; or copy "
    "the live table instead (source type: dynamodb with target.streamChanges: true)"
)


@dataclass(frozen=True)
class LiveStream:
    """The live table's stream, as found before anything is written."""

    table: str
    stream: StreamInfo | None  # None: the table has no stream
    created_at: datetime | None  # when the stream was created; None when unknown (or no stream)
    key_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExportInstant:
    """The instant the export's data is as of, and the summary field it came from."""

    time: datetime | None
    field: str  # exportTime, exportToTime or startTime (the fallback)


# ---- before anything is written: read only ----


def find_live_stream(config: MigratorConfig, manifests: ExportManifests) -> LiveStream:
    """Describe the live table and its stream; check it is the table the export was taken from."""
    live = config.live_source
    described, client = describe_stream_source(live, manifests.summary)
    _check_same_table(config, manifests.summary, described)
    description = described.description
    enabled = (description.get("StreamSpecification") or {}).get("StreamEnabled")
    if config.kinesis is not None or not (enabled and description.get("LatestStreamArn")):
        return LiveStream(live.table, None, None, described.key_names)  # Kinesis mode reads no DynamoDB stream
    stream = ensure_stream(client, live.table, may_enable=False)  # the stream as replication uses it
    streams = aws.client(live.client_spec("source").for_control_plane(), "dynamodbstreams")
    return LiveStream(live.table, stream, stream_created_at(streams, stream.arn), described.key_names)


def _check_same_table(config: MigratorConfig, summary: ExportSummary, live: tables.TableInfo) -> None:
    """The stream replicated must be the exported table's, with the keys the target is made with."""
    exported = summary.table_arn.rpartition("/")[2]
    if exported and exported != live.name:
        raise ConfigError(
            "source.streamSource.table",
            f"the export is of table {exported!r} ({summary.table_arn}) but streamSource names {live.name!r}: "
            f"replicating {live.name!r}'s changes over {exported!r}'s items would mix two tables; "
            f"point streamSource.table at {exported!r}",
        )
    described = config.source.table_description
    if described is not None:
        given = tuple((k.name, k.type) for k in described.key_schema)
        if given != live.key_schema:
            raise ConfigError(
                "source.tableDescription.keySchema",
                f"gives the keys {_keys(given)}, but streamSource table {live.name!r}, whose changes are "
                f"replicated, has {_keys(live.key_schema)}: make them the same, or remove tableDescription "
                "(the keys are then read from streamSource)",
            )


def _keys(schema: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{name} ({kind})" for name, kind in schema)


def stream_created_at(streams: Any, arn: str) -> datetime | None:
    """When the stream was created: DescribeStream's CreationRequestDateTime, else its label.

    A stream's label (the end of its ARN) is the ISO 8601 time of its creation, in UTC.
    """
    with aws.translated("describing", f"stream {arn}"):
        description = streams.describe_stream(StreamArn=arn, Limit=1)["StreamDescription"]
    created = description.get("CreationRequestDateTime")
    if isinstance(created, datetime):
        return created if created.tzinfo else created.replace(tzinfo=timezone.utc)
    label = description.get("StreamLabel") or arn.rpartition("/stream/")[2]
    try:
        parsed = datetime.fromisoformat(label)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def export_instant(summary: ExportSummary, warn: bool = True) -> ExportInstant:
    """The instant the export is as of, warning (when `warn`) that the summary gives only startTime."""
    if summary.is_incremental:
        return ExportInstant(summary.export_to_time, "exportToTime")
    if summary.export_time is not None:
        return ExportInstant(summary.export_time, "exportTime")
    if summary.start_time is not None:
        if warn:
            log.warning(
                "the export's summary has no exportTime (an old export format): the stream is checked against "
                "its startTime %s, the moment the export began, instead", _iso(summary.start_time),
            )  # fmt: skip
        return ExportInstant(summary.start_time, "startTime")
    return ExportInstant(None, "exportTime")


def gap(live: LiveStream, instant: ExportInstant, now: datetime) -> str | None:
    """Why the live table's stream cannot replay every change since the export, or None when it can."""
    table = live.table
    if instant.time is None:
        return (
            f"the export's summary has neither exportTime nor startTime, so whether the stream of table "
            f"{table!r} holds every change made since the export cannot be checked"
        )
    since = f"the export's {instant.field} {_iso(instant.time)}"
    if live.stream is None:
        return (
            f"table {table!r} has no stream: the changes made since {since} were recorded in no stream, and "
            "a stream enabled now would hold only the changes made from now on"
        )
    if live.created_at is None:
        return f"the creation time of the stream of table {table!r} could not be read, so it cannot be compared with {since}"
    if live.created_at >= instant.time:
        return (
            f"the stream of table {table!r} was created at {_iso(live.created_at)}, after {since}: "
            "the changes made in between were recorded in no stream"
        )
    age = now - instant.time
    if age >= STREAM_RETENTION:
        return (
            f"{since} is {age.total_seconds() / 3600:.1f} h ago, and DynamoDB Streams keep records 24 h: "
            f"the changes made between it and {_iso(now - STREAM_RETENTION)} have been trimmed from the stream "
            f"of table {table!r}"
        )
    if age >= CATCH_UP_LIMIT:
        return (
            f"{since} is {age.total_seconds() / 3600:.1f} h ago, and DynamoDB Streams keep records 24 h: the "
            f"stream of table {table!r} trims the changes made since the export from {_iso(instant.time + STREAM_RETENTION)}, "
            f"leaving replication less than the 6 h it is given to read them (the limit is "
            f"{CATCH_UP_LIMIT.total_seconds() / 3600:.0f} h)"
        )
    return None


def check_gap(
    config: MigratorConfig, live: LiveStream, summary: ExportSummary, *, imported: bool = False,
    now: datetime | None = None,
) -> None:  # fmt: skip
    """Raise StreamGap when the stream cannot replay every change since the export, unless accepted.

    `imported`: the export is already in the target (the check again before replication starts).
    """
    instant = export_instant(summary, warn=not imported)  # the first check warned already
    now = now or datetime.now(timezone.utc)
    reason = gap(live, instant, now)
    if reason is None:
        if not imported:
            log.info(
                "the stream of %r holds every change since the export's %s %s: replication must start before "
                "%s (18 h after it); it starts from the stream's oldest record once the import is done",
                live.table, instant.field, _iso(instant.time), _iso(instant.time + CATCH_UP_LIMIT),
            )  # fmt: skip
        return
    if config.source.accept_stream_gap:
        log.warning(
            "source.acceptStreamGap is true, so the run goes on although %s; the changes made in that gap are "
            "not replicated, and the items they touched may differ from the live table's until changed again",
            reason,
        )  # fmt: skip
        return
    if imported:
        error = StreamGap(
            f"the import took too long: {reason}",
            "The export is imported (the savepoint records it, so a rerun does not import it again); "
            "nothing was replicated",
        )
        error.exit_code = 1  # something was written: not the "bad input" code
        raise error
    raise StreamGap(reason)


def check_resumable(
    config: MigratorConfig, live: LiveStream, manifests: ExportManifests, saved: Checkpoint, done: frozenset[str]
) -> None:
    """Before anything is written: either the checkpoint is resumed, or the gap rules must hold.

    A checkpoint exists only once this export was imported (replication starts after the
    import), so one found while the import is unfinished belongs to another run (another
    export of the live table, or a copy of it): resuming it over this export's items could
    skip the changes made between this export's instant and the checkpoint's position.
    """
    if not saved.exists():
        if config.kinesis is None:  # Kinesis: the start's age is checked in open_kinesis_stream
            check_gap(config, live, manifests.summary)
        return
    pending = {f.data_file_s3_key for f in manifests.files} - done
    if pending:
        raise CheckpointError(
            f"it exists, but {len(pending)} of the {len(manifests.files)} data files of export "
            f"{manifests.summary.export_arn} are not imported yet, so it belongs to another run (another export "
            "or a copy of the same live table); give this run its own appName or checkpointLocation, or delete "
            "the checkpoint directory",
            saved.where,
            ways_out="Nothing was written",
        )
    if config.kinesis is not None:
        return  # the Kinesis stream's retention decides: checked once it is described (open_kinesis_stream)
    if live.stream is None:
        raise chained_checkpoint_error(
            CheckpointError(f"table {live.table!r} has no stream any more: the stream the checkpoint reads is gone"),
            saved.where,
        )
    try:
        saved.check_age()
    except CheckpointError as exc:
        raise chained_checkpoint_error(exc, saved.where) from None


def open_stream(config: MigratorConfig, live: LiveStream) -> StreamInfo:
    """The stream to replicate: the live table's, or, when it has none and the gap is accepted, a new one.

    Only called once the checks passed: enabling a stream is a change to the live table.
    """
    if live.stream is not None:
        return live.stream
    source = config.live_source
    client = aws.client(source.client_spec("source").for_control_plane())
    return ensure_stream(client, source.table, may_enable=source.enable_stream)


def open_kinesis_stream(config: MigratorConfig, live: LiveStream, summary: ExportSummary, saved: Checkpoint) -> KinesisStream:
    """Kinesis: replay from the export's instant (by default), if the stream still holds it.

    The Kinesis stream keeps records its retention period (up to a year): a replay start
    older than that, less 6 h to catch up, is a gap (StreamGap, unless source.acceptStreamGap);
    a checkpoint older than that is refused with the chained ways out.
    """
    resuming = saved.exists()
    instant = export_instant(summary)
    stream = open_kinesis(
        config, live.key_names, saved, export_instant=instant.time, export_field=instant.field,
        check_start=lambda start, hours: check_kinesis_gap(config, start, hours),
    )  # fmt: skip
    if resuming:
        try:
            saved.check_age(retention_hours=stream.retention_hours)
        except CheckpointError as exc:
            raise chained_checkpoint_error(exc, saved.where) from None
    return stream


def check_kinesis_gap(config: MigratorConfig, start: str, hours: int, *, imported: bool = False) -> None:
    """StreamGap when the Kinesis stream no longer holds the replay start, unless source.acceptStreamGap.

    `imported`: checked again once the import is done (a long import ages the start).
    """
    try:
        check_start_is_retained(start, hours)
    except CheckpointError as exc:
        if config.source.accept_stream_gap:
            log.warning("source.acceptStreamGap is true, so the run goes on although %s", exc.reason)
            return
        reason = f"the Kinesis stream cannot replay every change since the export: {exc.reason}"
        if not imported:
            raise StreamGap(reason) from None
        error = StreamGap(
            f"the import took too long: {reason}",
            "The export is imported (the savepoint records it, so a rerun does not import it again); nothing was replicated",
        )
        error.exit_code = 1  # something was written: not the "bad input" code
        raise error from None


def chained_checkpoint_error(error: CheckpointError, where: str) -> CheckpointError:
    """The same finding, with the ways out that fit a chained run (invalidCheckpointBehavior restart does not)."""
    reason = getattr(error, "reason", None)
    if reason is None:  # rebuilt from a Spark traceback's text: "checkpoint: <reason>; stopped rather than ..."
        reason = str(error).partition(f"; {STOPPED_RATHER_THAN_SKIP}")[0].removeprefix("checkpoint: ")
    return CheckpointError(reason, getattr(error, "location", None) or where, ways_out=CHAINED_WAYS_OUT)


def _iso(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
