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

A replay start the stream no longer holds (older than its retention, less 6 h to catch up)
raises CheckpointError, handled by invalidCheckpointBehavior like a stale checkpoint. When a
checkpoint exists, its own start (kept in its offsets) is used and this one is ignored.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Callable

from migrator import aws
from migrator.config import MigratorConfig
from migrator.stream import kinesis
from migrator.stream.kinesis import KinesisStream

log = logging.getLogger(__name__)

CLOCK_SKEW_WARNING = (
    "Kinesis replay starts at this driver's clock, %s (no initialTimestamp%s): if this clock is ahead of AWS's "
    "by some seconds, the changes of those seconds are silently lost; run the driver with NTP (chrony, "
    "systemd-timesyncd), or set target.streamChanges.initialTimestamp a little earlier than the migration start"
)


def open_kinesis(
    config: MigratorConfig,
    key_names: tuple[str, ...],
    *,
    export_instant: datetime | None = None,
    export_field: str = "exportTime",
    resuming: bool = False,
    fresh_start: bool = False,
    check_start: Callable[[str, int], None] | None = None,
) -> KinesisStream:
    """Check the stream, enable the table's destination to it, and fix the replay start.

    `resuming`: a checkpoint exists, and the start kept in it holds. `fresh_start`: a
    re-initialization (invalidCheckpointBehavior: restart) starts from now, whatever
    initialTimestamp says (that start may be the one found too old). `check_start(start,
    retention_hours)` runs before the destination is enabled (chaining refuses a gap there).
    """
    block, live = config.kinesis, config.live_source
    spec = live.client_spec("source").for_control_plane()
    hours = kinesis.retention_hours(aws.client(spec, "kinesis"), block.stream_arn)
    if resuming:
        start = kinesis.iso_instant(time.time())  # not used: the checkpoint's own start replaces it
        log.info("a checkpoint exists: Kinesis replay resumes where it left off (its start holds, not initialTimestamp)")
    else:
        start = replay_start(config, export_instant, export_field, fresh_start)
        if check_start is not None:
            check_start(start, hours)
    kinesis.ensure_destination(aws.client(spec), live.table, block.stream_arn)
    return KinesisStream(block.stream_arn, key_names, start, hours)


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
