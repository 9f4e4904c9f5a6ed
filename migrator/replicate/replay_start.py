"""The replay start: fixed once before the snapshot, recorded in the checkpoint, checked on every run.

Replication must replay every change made since the snapshot began, so where it starts is
fixed before the first segment is copied and recorded at once (`checkpoint.ReplayStart`):
a rerun of an interrupted snapshot, or of a run whose first trigger failed, starts there
too, never from its own later clock. Kinesis's start is opened in `migrator.replicate.kinesis_start`;
this module opens DynamoDB Streams' and holds the checks both share.

DynamoDB Streams start at TRIM_HORIZON, which silently begins at whatever the stream still
holds (24 hours). So what is recorded is the stream's ARN and when the start was fixed, and
each run refuses (CheckpointError, then invalidCheckpointBehavior decides) when

- the table's stream is another one now (disabled and enabled again: the changes in between
  are in no stream), or it has none;
- no batch was committed yet and the start was fixed longer ago than the stream keeps records,
  less 6 hours to catch up: checked before the snapshot (a stop between runs) and again when
  replication starts (a long snapshot).

Segments a savepoint records as copied with no replay start recorded for them are refused
as well: nothing says from when their changes must be replayed.

Once a batch is committed, Spark's offsets hold the positions, and the checkpoint's own age
(`Checkpoint.check_age`) decides instead.
"""

from __future__ import annotations

import logging
import time

from migrator import aws
from migrator.replicate.checkpoint import MAX_AGE_SECONDS, Checkpoint, ReplayStart
from migrator.config import MigratorConfig
from migrator.errors import CheckpointError, StreamNotEnabled
from migrator.source.dynamodb_streams import StreamInfo, ensure_stream
from migrator.source.kinesis import KinesisStream, check_start_is_retained

log = logging.getLogger(__name__)


def open_dynamodb_stream(config: MigratorConfig, saved: Checkpoint, *, fresh_start: bool = False) -> StreamInfo:
    """The source table's stream, checked against the recorded start, or enabled and recorded as the start.

    `fresh_start`: a re-initialization (invalidCheckpointBehavior: restart), whose checkpoint
    was just dropped.
    """
    source = config.source
    client = aws.client(source.client_spec("source").for_control_plane())
    recorded = None if fresh_start else saved.replay_start()
    if recorded is None:
        stream = ensure_stream(client, source.table, source.enable_stream)
        if not saved.exists():  # a checkpoint of an earlier version resumes from its offsets as before
            saved.record_replay_start(ReplayStart(stream.arn, time.time()))
        return stream
    try:
        stream = ensure_stream(client, source.table, may_enable=False)  # a new stream would not help
    except StreamNotEnabled:
        raise CheckpointError(
            f"replication reads stream {recorded.stream_arn}, but table {source.table!r} has no stream any more: "
            "the changes made since it was disabled are in no stream",
            saved.where,
        ) from None
    check_same_stream(recorded, stream.arn, saved.where)
    if not saved.exists():
        check_streams_start(recorded, saved.where)
        log.info("replication will start from the stream's oldest record, as fixed at %s (%s)", _iso(recorded.fixed_at), saved.where)
    return stream


def check_copies_have_a_start(config: MigratorConfig, saved: Checkpoint, copied: frozenset[int], savepoint: str) -> None:
    """CheckpointError when the savepoint records copied segments but no replay start covers them.

    Those segments were copied after a start this run cannot know (the checkpoint directory
    was deleted, or the copy ran without streamChanges): a new start from now would miss the
    changes made to their items since. Not when the start is the config's own
    (initialTimestamp), nor without a snapshot (skipInitialSnapshotTransfer).
    """
    if not copied or config.target.skip_initial_snapshot_transfer or saved.exists() or saved.replay_start() is not None:
        return
    if config.kinesis is not None and config.kinesis.initial_timestamp is not None:
        return
    raise CheckpointError(
        f"the savepoint {savepoint} records {len(copied)} segments as copied, but no replay start was recorded "
        "for them (the checkpoint directory was deleted, or they were copied without target.streamChanges): "
        "replicating from a new start would miss the changes made to their items since they were copied",
        saved.where,
    )


def check_same_stream(recorded: ReplayStart, current_arn: str, where: str) -> None:
    """CheckpointError when the stream to read is not the one the replay start was fixed on."""
    if recorded.stream_arn != current_arn:
        raise CheckpointError(
            f"its replay start was fixed on stream {recorded.stream_arn}, but the stream to read is now {current_arn} "
            "(a table's stream disabled and enabled again, whose changes in between are in no stream; or a "
            "checkpoint of another table or Kinesis stream)",
            where,
        )


def check_streams_start(recorded: ReplayStart, where: str, now: float | None = None) -> None:
    """CheckpointError when a DynamoDB stream may have trimmed changes made since the start was fixed."""
    age = (now if now is not None else time.time()) - recorded.fixed_at
    if age > MAX_AGE_SECONDS:
        raise CheckpointError(
            f"its replay start was fixed {age / 3600:.1f} h ago ({_iso(recorded.fixed_at)}) and nothing has been "
            f"replicated since, but DynamoDB Streams keep records 24 h (the limit, leaving 6 h to catch up, is "
            f"{MAX_AGE_SECONDS // 3600} h): changes made after it may be gone. A snapshot that takes this long "
            "needs Kinesis Data Streams (target.streamChanges: {type: kinesis})",
            where,
        )


def check_before_replication(saved: Checkpoint, stream: StreamInfo | KinesisStream) -> None:
    """Before the first batch: does the stream still hold every change since the start? The
    snapshot may have outlasted it. CheckpointError (exit 1: the snapshot is written) if not."""
    if saved.exists():
        return
    try:
        if isinstance(stream, KinesisStream):
            check_start_is_retained(stream.start_at, stream.retention_hours)
        else:
            recorded = saved.replay_start()
            if recorded is not None:
                check_streams_start(recorded, saved.where)
    except CheckpointError as exc:
        refused = CheckpointError(f"after the snapshot: {exc.reason}", saved.where)
        refused.exit_code = 1  # the snapshot was written: not the "bad input" code
        raise refused from None


def _iso(epoch_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_seconds))
