"""Opening Kinesis Data Streams mode: the stream exists, the table streams to it, and where replay starts.

Called before the snapshot (or, chained with an S3 export, before the import), so that every
change made during the copy is in the stream and replayed afterwards. The replay start is,
in this order ("Kinesis Data Streams mode", the seed's specification):

1. `target.streamChanges.initialTimestamp`, when given;
2. chained with an S3 export: the export's instant (`exportTime`, else `startTime`), an AWS
   server's clock;
3. otherwise this driver's clock right after the destination is ACTIVE, with a warning:
   Kinesis compares the start with the arrival times AWS stamps, so a driver clock ahead of
   AWS's by Δ silently loses the first Δ of changes (one behind replays Δ, harmlessly).

The start is recorded in the checkpoint (`checkpoint.ReplayStart`) before the snapshot, so
every rerun until a batch is committed starts there too (after a kill mid-snapshot, or a
first trigger that failed), never at its own clock. Once a batch is committed, the start
kept in Spark's offsets is used. A replay start the stream no longer holds (older than its
retention, less 6 h to catch up) raises CheckpointError, handled by invalidCheckpointBehavior
like a stale checkpoint.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Callable

from migrator import aws
from migrator.replicate.checkpoint import Checkpoint, ReplayStart
from migrator.config import MigratorConfig
from migrator.replicate.replay_start import check_same_stream
from migrator.source import kinesis
from migrator.source.kinesis import KinesisStream

log = logging.getLogger(__name__)

CLOCK_SKEW_WARNING = (
    "Kinesis replay starts at this driver's clock, %s (no initialTimestamp%s): if this clock is ahead of AWS's "
    "by some seconds, the changes of those seconds are silently lost; run the driver with NTP (chrony, "
    "systemd-timesyncd), or set target.streamChanges.initialTimestamp a little earlier than the migration start"
)


def open_kinesis(
    config: MigratorConfig,
    key_names: tuple[str, ...],
    saved: Checkpoint,
    *,
    export_instant: datetime | None = None,
    export_field: str = "exportTime",
    fresh_start: bool = False,
    check_start: Callable[[str, int], None] | None = None,
) -> KinesisStream:
    """Check the stream, enable the table's destination to it, and fix the replay start (or reuse the recorded one).

    `saved`: the checkpoint, which records the start. `fresh_start`: a re-initialization
    (invalidCheckpointBehavior: restart; the checkpoint was just dropped) starts from now,
    whatever initialTimestamp says (that start may be the one found too old).
    `check_start(start, retention_hours)` runs before the destination is enabled (chaining
    refuses a gap there).
    """
    block, live = config.kinesis, config.live_source
    spec = live.client_spec("source").for_control_plane()
    hours = kinesis.retention_hours(aws.client(spec, "kinesis"), block.stream_arn)
    recorded = None if fresh_start else saved.replay_start()
    if recorded is not None:
        check_same_stream(recorded, block.stream_arn, saved.where)
    if saved.exists():
        start = kinesis.iso_instant(time.time())  # not used: the start kept in Spark's offsets replaces it
        log.info("a checkpoint exists: Kinesis replay resumes where it left off (its start holds, not initialTimestamp)")
    else:
        start = _recorded_start(config, recorded, saved.where) or replay_start(config, export_instant, export_field, fresh_start)
        if check_start is not None:
            check_start(start, hours)
    kinesis.ensure_destination(aws.client(spec), live.table, block.stream_arn)
    if recorded is None and not saved.exists():  # before the first segment is copied
        saved.record_replay_start(ReplayStart(block.stream_arn, time.time(), start))
    return KinesisStream(block.stream_arn, key_names, start, hours)


def _recorded_start(config: MigratorConfig, recorded: ReplayStart | None, where: str) -> str | None:
    """The start an earlier run fixed (and copied segments after), which this run keeps."""
    if recorded is None or recorded.start_at is None:
        return None
    configured = config.kinesis.initial_timestamp
    if configured is not None and kinesis.iso_instant(configured.timestamp()) != recorded.start_at:
        log.warning(
            "target.streamChanges.initialTimestamp is %s, but an earlier run of this migration fixed the replay "
            "start at %s and copied segments after it (recorded in %s): that start is kept; to start over from "
            "initialTimestamp, delete the checkpoint directory and the savepoint",
            kinesis.iso_instant(configured.timestamp()), recorded.start_at, where,
        )  # fmt: skip
    log.info("Kinesis replay starts at %s, the start an earlier run of this migration fixed (%s)", recorded.start_at, where)
    return recorded.start_at


def replay_start(
    config: MigratorConfig, export_instant: datetime | None, export_field: str = "exportTime", fresh_start: bool = False
) -> str:
    """The AT_TIMESTAMP instant, as ISO-8601 UTC, with the log line that says where it came from."""
    configured = config.kinesis.initial_timestamp
    if configured is not None and not fresh_start:
        start = kinesis.iso_instant(configured.timestamp())
        log.info("Kinesis replay starts at target.streamChanges.initialTimestamp %s", start)
        return start
    if export_instant is not None and not fresh_start:
        start = kinesis.iso_instant(export_instant.timestamp())
        log.info("Kinesis replay starts at the export's %s %s (an AWS clock, not this driver's)", export_field, start)
        return start
    start = kinesis.iso_instant(time.time())
    chained = (
        ", and the export's summary has neither exportTime nor startTime: the changes made between the export "
        "and now are not replayed" if config.imports_export else ""
    )
    log.warning(CLOCK_SKEW_WARNING, start, chained)
    return start
