"""The replication checkpoint: where it lives, whether it can still be honoured, and dropping it.

Spark's streaming checkpoint (offsets/, commits/, metadata) holds every shard's position.
It is only worth resuming from while the stream still holds the records after those
positions: DynamoDB Streams keeps records 24 hours, a Kinesis data stream its retention
period. A checkpoint whose job was last alive longer ago than that less 6 hours (18 hours for
DynamoDB Streams; the margin covers the catching up still to do) is refused, as are the
reader's own findings (trimmed records, shards gone), all as CheckpointError.

"Last alive" is the newer of the last commit and a heartbeat file the running job rewrites
every minute: an idle source makes Spark commit nothing for hours while the job still
reads everything, and that must not make a short stop look like a long one.

The replay start (`ReplayStart`, in `migrator-replay-start.json`) is written here the moment
it is fixed, before the first segment is copied: the stream it reads and, in Kinesis mode, the
AT_TIMESTAMP instant. Spark's offsets only hold it once the first batch is planned, after the
snapshot, so without this record a rerun of an interrupted snapshot would pick a new start and
miss the changes made in between to the items already copied (`migrator.replicate.replay_start`).

A checkpoint "exists", for resuming, once Spark committed a batch (a file in commits/): Spark
creates its empty folders as the query starts, before its first trigger, which may fail.

Paths go through Hadoop's FileSystem in the driver JVM, so S3 and HDFS locations work like
local ones; only the writability check before Spark starts is local-path only.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlparse

from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from migrator import hadoop_files
from migrator.config import MigratorConfig
from migrator.errors import CheckpointError, ConfigError, MigratorError

log = logging.getLogger(__name__)

RETENTION_MARGIN_SECONDS = 6 * 3600  # time left to catch up before the stream trims what is still unread
MAX_AGE_SECONDS = 24 * 3600 - RETENTION_MARGIN_SECONDS  # DynamoDB Streams keep records 24 h
HEARTBEAT_SECONDS = 60
HEARTBEAT_FILE = "migrator-heartbeat.json"
KEY_STATE_FOLDER = "migrator-key-state"  # Kinesis: one file per micro-batch (migrator.stream.key_state)
REPLAY_START_FILE = "migrator-replay-start.json"
REPLAY_START_FORMAT = 1


@dataclass(frozen=True)
class ReplayStart:
    """Where replication starts, fixed once before the snapshot: every rerun uses it.

    `fixed_at` (epoch seconds) is when it was fixed, right after the stream was found ACTIVE:
    the changes made since must still be in the stream when replication starts. `start_at`
    is Kinesis's AT_TIMESTAMP (ISO-8601 UTC); DynamoDB Streams start at TRIM_HORIZON (None).
    """

    stream_arn: str
    fixed_at: float
    start_at: str | None = None

    def to_json(self) -> str:
        document = {"format": REPLAY_START_FORMAT, "streamArn": self.stream_arn, "fixedAt": _iso(self.fixed_at)}
        if self.start_at is not None:
            document["startAt"] = self.start_at
        return json.dumps(document, indent=2)

    @classmethod
    def from_json(cls, text: str, where: str) -> "ReplayStart":
        """Parse `to_json`'s output; anything else is a CheckpointError (never guess a start)."""
        try:
            document = json.loads(text)
            if document["format"] != REPLAY_START_FORMAT:
                raise CheckpointError(
                    f"{REPLAY_START_FILE} has format {document['format']!r}; this version of dynamodb-migrator "
                    f"reads format {REPLAY_START_FORMAT}",
                    where,
                )
            start_at = document.get("startAt")
            if start_at is not None:
                _epoch(start_at)
            return cls(str(document["streamArn"]), _epoch(document["fixedAt"]), start_at)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CheckpointError(
                f"{REPLAY_START_FILE} is damaged (not the stream ARN and times a run wrote), so where "
                "replication must start is unknown",
                where,
            ) from None


def _iso(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=timezone.utc).isoformat(timespec="microseconds")


def _epoch(instant: str) -> float:
    parsed = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"{instant!r} has no time zone")
    return parsed.timestamp()


def app_name(config: MigratorConfig) -> str:
    """`appName`, else migrator_<the table whose stream is read>: the source table, or an export's streamSource.

    In Kinesis mode: streamChanges.appName, appName, else migrator_<table>_<ARN hash>
    (`MigratorConfig.kinesis_app_name`), so two migrators on two streams never share a checkpoint.
    """
    if config.kinesis is not None:
        return config.kinesis_app_name
    live = config.live_source
    return config.app_name or f"migrator_{live.table if live is not None else config.source.table}"


def location(config: MigratorConfig) -> str:
    """`checkpointLocation`, else ./checkpoints/<appName>: deterministic, so a rerun resumes.

    A relative local path is made absolute here, against this process's working directory:
    Spark would resolve it against the JVM's, which a notebook may have elsewhere.
    """
    where = config.checkpoint_location or f"./checkpoints/{app_name(config)}"
    return os.path.abspath(where) if urlparse(where).scheme == "" else where


def check_writable(where: str) -> None:
    """Refuse a local checkpoint location the job could not write, before anything starts."""
    if not _is_local(where):
        return
    problem = local_write_problem(_local_path(where))
    if problem is not None:
        raise ConfigError("checkpointLocation", f"{where!r} {problem}")


def local_write_problem(path: Path) -> str | None:
    """Why this user could not create or write the local folder `path`, or None; nothing is written to find out."""
    existing = path.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"is not a directory ({existing} is a file): choose a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"is not writable ({existing} does not let this user write): fix its permissions or choose another directory"
    return None


def committed_without_spark(where: str) -> bool | None:
    """Whether a local checkpoint holds committed batches, read with plain file access; None: not local, not read."""
    if not _is_local(where):
        return None
    commits = _local_path(where) / "commits"
    return commits.is_dir() and any(p.name.isdigit() for p in commits.iterdir())


def describe_without_spark(where: str) -> str:
    """What a local checkpoint holds, read with plain file access (a dry run starts no Spark); others are not read."""
    committed = committed_without_spark(where)
    if committed is None:
        return "not read in a dry run (a Hadoop location is read through Spark)"
    if committed:
        return "holds committed batches: replication would resume from its offsets"
    root = _local_path(where)
    recorded = root / REPLAY_START_FILE
    if recorded.is_file():
        start = ReplayStart.from_json(recorded.read_text(encoding="utf-8"), where)
        at = f", Kinesis AT_TIMESTAMP {start.start_at}" if start.start_at else ""
        return f"holds a replay start fixed at {_iso(start.fixed_at)} on {start.stream_arn}{at}: the run would keep it"
    return "none yet: the run would fix the replay start before the snapshot"


class Checkpoint:
    """The checkpoint directory, seen through Hadoop's FileSystem of the running session."""

    def __init__(self, spark: SparkSession, where: str):
        self.where = where
        jvm = spark.sparkContext._jvm
        self._jvm = jvm
        self._root = jvm.org.apache.hadoop.fs.Path(where)
        self._fs = self._root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self._last_beat = 0.0

    def exists(self) -> bool:
        """Whether Spark committed a batch here, so replication resumes from its positions.

        Not whether offsets/ exists: Spark creates it as the query starts, and a first
        trigger that fails (a missing permission, throttling) commits nothing.
        """
        return self._newest_commit() is not None

    def replay_start(self) -> ReplayStart | None:
        """The replay start an earlier run fixed, or None when none was recorded here."""
        path = hadoop_files.readable(self._fs, self._child(REPLAY_START_FILE))
        if path is None:
            return None
        return ReplayStart.from_json(self._read(path), self.where)

    def record_replay_start(self, start: ReplayStart) -> None:
        """Write the replay start durably: a crash leaves either no record or a whole one."""
        self._write(self._child(REPLAY_START_FILE), start.to_json())
        log.info("replay start recorded in %s: %s", self.where, REPLAY_START_FILE)

    def last_alive(self) -> float | None:
        """Epoch seconds the job last provably read the stream: last commit or heartbeat."""
        times = [t for t in (self._newest_commit(), self._heartbeat()) if t is not None]
        return max(times) if times else None

    def check_age(self, now: float | None = None, retention_hours: int | None = None) -> None:
        """Raise CheckpointError when the stream may have dropped records the checkpoint still needs.

        DynamoDB Streams keep records 24 h (limit 18 h); a Kinesis stream keeps them
        `retention_hours` (limit: that less 6 h, as for DynamoDB Streams).
        """
        alive = self.last_alive()
        if alive is None:
            return
        age = (now if now is not None else time.time()) - alive
        kept = f"the Kinesis stream keeps records {retention_hours} h" if retention_hours else "DynamoDB Streams keep records 24 h"
        limit = retention_hours * 3600 - RETENTION_MARGIN_SECONDS if retention_hours else MAX_AGE_SECONDS
        if age > limit:
            raise CheckpointError(
                f"it was last advanced {age / 3600:.1f} h ago (the limit is {limit // 3600} h): "
                f"{kept}, so changes made while the job was stopped may be gone",
                self.where,
            )

    def beat(self, now: float | None = None) -> None:
        """Record that the job is alive and reading; at most once a minute."""
        now = now if now is not None else time.time()
        if now - self._last_beat < HEARTBEAT_SECONDS:
            return
        self._last_beat = now
        self._write(self._child(HEARTBEAT_FILE), json.dumps({"aliveAt": now}))

    def save_key_state(self, batch_id: int, text: str) -> None:
        self._write(self._child(f"{KEY_STATE_FOLDER}/{batch_id}.json"), text)

    def load_key_state(self, before_batch: int) -> list[tuple[int, str]]:
        """The key state files of batches before `before_batch`, oldest first.

        A file of `before_batch` or later belongs to a batch Spark did not commit (it is
        being replayed): it is not read.
        """
        folder = self._child(KEY_STATE_FOLDER)
        if not self._fs.exists(folder):
            return []
        batches = []
        for status in self._fs.listStatus(folder):
            name = status.getPath().getName()
            if name.endswith(".json") and name[:-5].isdigit() and int(name[:-5]) < before_batch:
                batches.append(int(name[:-5]))
        return [(batch, self._read(self._child(f"{KEY_STATE_FOLDER}/{batch}.json"))) for batch in sorted(batches)]

    def logged_offset(self, batch_id: int, stream_arn: str) -> str | None:
        """The stream's end offset of a batch, as JSON, from Spark's offset log (`offsets/<batch>`).

        Spark writes it before the batch runs (a version line, the batch's metadata, then one
        line per source), so `foreachBatch` can read it, on a replay too.
        """
        path = self._child(f"offsets/{batch_id}")
        if not self._fs.exists(path):
            return None
        try:
            text = self._read(path)
        except Py4JJavaError as exc:  # the JVM's reason, not py4j's "an error occurred while calling"
            raise MigratorError(f"reading Spark's offset log {path.toString()} failed: {exc.java_exception.toString()[:300]}") from None
        for line in text.splitlines()[2:]:
            try:
                document = json.loads(line)
            except ValueError:
                continue
            if isinstance(document, dict) and document.get("stream_arn") == stream_arn:
                return line
        return None

    def forget_key_state(self, batch_ids: list[int]) -> None:
        for batch in batch_ids:
            self._fs.delete(self._child(f"{KEY_STATE_FOLDER}/{batch}.json"), False)

    def _write(self, path, text: str) -> None:
        """Whole or not at all, on any Hadoop filesystem: a crash never leaves half a file to read."""
        hadoop_files.write_atomically(self._fs, path, text)

    def _read(self, path) -> str:
        stream = self._fs.open(path)
        try:
            return self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    def drop(self) -> None:
        if self._fs.exists(self._root):
            self._fs.delete(self._root, True)
        self._last_beat = 0.0
        log.warning("dropped the checkpoint at %s", self.where)

    def _child(self, name: str):
        return self._jvm.org.apache.hadoop.fs.Path(self._root, name)

    def _newest_commit(self) -> float | None:
        folder = self._child("commits")
        if not self._fs.exists(folder):
            return None
        times = [s.getModificationTime() / 1000 for s in self._fs.listStatus(folder) if s.getPath().getName().isdigit()]
        return max(times) if times else None

    def _heartbeat(self) -> float | None:
        path = hadoop_files.readable(self._fs, self._child(HEARTBEAT_FILE))
        if path is None:
            return None
        try:
            return float(json.loads(self._read(path))["aliveAt"])
        except (Py4JJavaError, ValueError, KeyError, TypeError):  # damaged: the commits still tell
            log.warning("ignoring an unreadable heartbeat file in %s", self.where)
            return None


def _local_path(where: str) -> Path:
    return Path(urlparse(where).path if where.startswith("file:") else where)


def _is_local(where: str) -> bool:
    scheme = urlparse(where).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter is no scheme
