"""Replicate the source's changes into the target: start the Structured Streaming query, run it, stop it.

`replicate` reads the `dynamodb_changes` source (`migrator.replicate.datasource`: DynamoDB
Streams, or the Kinesis data stream the table streams to) and applies each micro-batch in
`foreachBatch` (`migrator.replicate.apply`). It runs on the driver until Ctrl+C, SIGTERM or
`should_stop`; a failed batch is not committed, so the next run applies it again. Around it:
the Kinesis key state kept with the checkpoint (`_KeyStateKeeper`), the metrics and the summary
of each batch, and one clear error out of whatever Spark raised.

Kept apart from the reader and the apply step: this is the driver's side, the only one that
waits, handles signals and reports.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from py4j.protocol import Py4JJavaError
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from migrator.config import MigratorConfig
from migrator.errors import CheckpointError, MigratorError, rebuild_error
from migrator.hadoop_files import java_reason
from migrator.metrics import ReplicationMetrics
from migrator.replicate.apply import (
    ApplyOutcome,
    ApplyTask,
    apply_partition,
    may_look_up,
    lookup_rates,
    newest_orders,
    partition_share,
    replication_rates,
)
from migrator.replicate.checkpoint import Checkpoint
from migrator.replicate.delta_apply import DeltaApplier, delta_applier
from migrator.replicate.datasource import SOURCE_NAME, changes_source, feed_of
from migrator.source.dynamodb_streams import StreamInfo
from migrator.source.kinesis import KinesisStream, epoch_of
from migrator.spark import Silencer, leave_ctrl_c_to_the_driver, wait_for_running_tasks
from migrator.stream import key_state
from migrator.stream.offsets import StreamOffset

log = logging.getLogger(__name__)

# Lambda polls a DynamoDB stream's shards four times a second; twice keeps well within
# GetRecords' five calls per second per shard and DescribeStream's ten per second.
TRIGGER_INTERVAL = "500 milliseconds"
# A batch's shards are packed into this many partitions per core: a task per shard would cost a
# Python worker round trip per shard, and two per core keep every core busy when sizes differ.
PARTITIONS_PER_CORE = 2


@dataclass
class ReplicationSummary:
    batches: int = 0
    records: int = 0
    puts: int = 0
    deletes: int = 0
    lag_seconds: float | None = None
    reinitializations: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> stream records not applied
    unfit_values: int = 0  # a Delta target: target.columns values left null (`_item` holds them)
    started: float = field(default_factory=time.monotonic)

    def render(self) -> str:
        lag = f"{self.lag_seconds:.1f}s" if self.lag_seconds is not None else "n/a"
        dropped = ", ".join(f"{count:,} {reason}" for reason, count in sorted(self.dropped.items())) or "none"
        return "\n".join(
            [
                "replication stopped",
                f"  batches:         {self.batches:,}",
                f"  stream records:  {self.records:,}",
                f"  items put:       {self.puts:,}",
                f"  items deleted:   {self.deletes:,}",
                f"  records dropped: {dropped}",
                *([f"  unfit values:    {self.unfit_values:,} (target.columns values left null: _item holds them exactly)"]
                  if self.unfit_values else []),
                f"  last lag:        {lag}",
                f"  re-initialized:  {self.reinitializations} times (invalidCheckpointBehavior: restart)",
                f"  seconds:         {time.monotonic() - self.started:,.1f}",
                "  the source's stream (or Kinesis streaming destination) was left enabled: disable it yourself when done",
            ]
        )


def replicate(
    spark: SparkSession,
    config: MigratorConfig,
    stream: StreamInfo | KinesisStream,
    checkpoint: str,
    should_stop: Callable[[ReplicationSummary], bool] | None = None,
    metrics: ReplicationMetrics | None = None,
) -> ReplicationSummary:
    """Replay the stream into the target until Ctrl+C (or `should_stop`, for notebooks and tests).

    A checkpoint that cannot be honoured raises CheckpointError (see migrator.replicate.checkpoint).
    The stream is the live table's (`config.live_source`): the source table of a table copy,
    or the `streamSource` of an S3 export import; changes are read, and looked up, there.
    It is its DynamoDB stream, or the Kinesis stream it streams to (then each key's last
    applied change is kept, to drop duplicates and stale records: `_KeyStateKeeper`).
    """
    live = config.live_source
    source = live.client_spec("source")
    partitions = PARTITIONS_PER_CORE * spark.sparkContext.defaultParallelism
    spark.dataSource.register(changes_source(feed_of(stream, source, live.table), partitions))
    # Chosen once: a DynamoDB target is written by the executors; a Delta table gets each batch's
    # rows gathered by the driver and merged, one commit per batch (`migrator.replicate.delta_apply`).
    delta = delta_applier(config, spark) if config.writes_delta else None
    task = _apply_task(config, delta)
    rates = replication_rates(config, looks_up=may_look_up(stream)) if delta is None else lookup_rates(config, stream)
    if delta is None:
        log.info(
            "replication paced to %s WCU/s of writes (target.writeThroughput × throughputWritePercent) and %s RCU/s "
            "of source lookups for changes without their new image (readThroughput × throughputReadPercent)",
            f"{rates[0]:,.0f}", f"{rates[1]:,.0f}",
        )
    summary = ReplicationSummary()
    metrics = metrics or ReplicationMetrics(config.ready_lag, config.metrics_port, config.metrics_host)
    alive = Checkpoint(spark, checkpoint)
    changes = spark.readStream.format(SOURCE_NAME).load()
    keeper = _KeyStateKeeper(alive, stream) if isinstance(stream, KinesisStream) else None
    failures: list[MigratorError] = []
    stop = _StopOnCtrlC(failures)
    quiet = Silencer(spark, *_INTERRUPTED_BATCH_REPORTERS)

    def apply_batch(batch: DataFrame, batch_id: int) -> None:
        try:
            spark.sparkContext.setJobDescription(f"replicate {live.table} → {config.target.table}: batch {batch_id}")
            orders = batch.rdd.mapPartitions(newest_orders).collect() if keeper is not None else []
            newest = key_state.newest_per_key((key, order) for key, order, _ in orders)
            batch_task = partition_share(task, rates, batch.rdd.getNumPartitions(), spark.sparkContext.defaultParallelism)
            if keeper is not None:
                batch_task = replace(batch_task, stale_keys=keeper.stale_keys(batch_id, newest))
            if delta is not None:
                batch_task = delta.batch_task(batch_task, batch_id, batch.rdd.getNumPartitions())
            # Each partition applied where it was read: no shuffle. All the changes of one key
            # in a batch are in one shard, and a shard's range in one partition: siblings of a
            # split hold disjoint keys, and a child is read only in a batch after the one that
            # finished its parent.
            outcomes = batch.rdd.mapPartitions(lambda rows: apply_partition(batch_task, rows)).collect()
            failed = [o.error for o in outcomes if o.error is not None]
            if failed:
                raise failed[0]
            if delta is not None and not delta.commit(batch_id, outcomes):
                # The table holds this batch already (merged before a stop): its changes were counted
                # by the run that merged them. It was committed before Spark committed the batch, so its
                # version in the table marks it applied.
                outcomes = _read_only(outcomes)
            if keeper is not None:  # before Spark commits the batch: a crash now replays it
                keeper.applied(batch_id, {k: o for k, o in newest.items() if k not in batch_task.stale_keys}, orders)
            _record(summary, metrics, batch_id, outcomes)
        except Exception as exc:
            log.debug("batch %d failed", batch_id, exc_info=True)  # the whole trace, for a bug report
            failures.append(exc if isinstance(exc, MigratorError) else query_error(exc))
            if stop.requested:  # the stop's own doing (see _StopOnCtrlC), reported below in one line
                quiet.silence()
            # Raising fails the batch, so Spark does not commit it. The text stays short on
            # purpose: Spark matches a failed foreachBatch's text against a regex that
            # overflows the stack on a long one (a Java stack trace) and kills the query's
            # thread, losing the cause. The cause is kept in `failures` and reported below.
            raise RuntimeError(f"batch {batch_id} was not applied: {str(failures[-1])[:300]}") from None

    leave_ctrl_c_to_the_driver(spark)
    # Streaming turns adaptive execution off anyway, with a warning at every start; the apply
    # step works on RDDs, which it never touched.
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    query = (
        changes.writeStream.foreachBatch(apply_batch)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=TRIGGER_INTERVAL)
        .queryName(f"replicate {live.table}")
        .start()
    )
    log.info("replicating changes of %r into %r (checkpoint %s); Ctrl+C stops", live.table, config.target.table, checkpoint)
    stop_requested = False
    timed_batch = -1
    with stop as ctrl_c, quiet:
        while query.isActive and not ctrl_c.requested:
            try:
                query.awaitTermination(1)
            except StreamingQueryException:  # the query failed: reported below as our error
                break
            progress = query.lastProgress
            if progress is not None:  # running and reading: the checkpoint is fresh
                if not _beat(alive, ctrl_c):
                    break
                timed_batch = _log_timing(progress, timed_batch)
            # Caught up: the last trigger's reader found nothing new. (isDataAvailable alone is
            # also false while a trigger is still reading, however far behind it is.)
            if caught_up(query.status):
                metrics.caught_up()
                summary.lag_seconds = 0.0
            if should_stop is not None and should_stop(summary):
                stop_requested = True
                break
        stop_requested = stop_requested or ctrl_c.requested
        failed_before_stop = ctrl_c.failed_before if ctrl_c.requested else len(failures)
        # A signal sent to the job's process group (as YARN stops a container) also ends the Python
        # processes the driver's JVM runs for the stream's reader, and with them the query: the
        # stop was asked for all the same, and nothing uncommitted is lost.
        stopped_running = stop_requested and (query.isActive or ctrl_c.requested)
        if query.isActive:
            log.info("stopping: the checkpoint keeps the last applied batch")
            quiet.silence()
            query.stop()
        if stopped_running:
            # The interrupted batch's tasks end after the query does (Spark kills their Python
            # workers a moment later); they are waited for while their reports are silenced.
            quiet.silence()
            if not wait_for_running_tasks(spark, _KILLED_TASKS_SECONDS):
                log.debug("stopping: a task of the interrupted batch still runs after %.0f s", _KILLED_TASKS_SECONDS)
    if failures[:failed_before_stop]:
        raise failures[failed_before_stop - 1]
    if stopped_running:
        # Stopping interrupts the batch in progress, if any: its Spark job fails with an
        # InterruptedException and the query ends with that error. The batch was not
        # committed, so the next run applies it again; nothing to report.
        if failures or query.exception() is not None:
            log.info("the batch in progress when stopping was not committed; the next run applies it again")
        return summary
    if query.exception() is not None:
        raise query_error(query.exception())
    if not stop_requested:
        raise MigratorError(
            "replicating changes failed: the streaming query stopped without an error (see the Spark log above); "
            "run the job again: it resumes from the checkpoint"
        )
    return summary


def _apply_task(config: MigratorConfig, delta: DeltaApplier | None) -> ApplyTask:
    """What each executor needs to apply its changes: the target to write, or the Delta rows' layout."""
    live, target = config.live_source, config.target
    common = dict(
        source=live.client_spec("source"),
        target=target.client_spec("target"),
        source_table=live.table,
        target_table=target.table,
        renames=tuple(config.rename_map.items()),
        source_reports_capacity=not live.strips_consumed_capacity,
    )
    if delta is not None:
        return ApplyTask(**common, batch_size=0, target_reports_capacity=False, delta_layout=delta.layout)
    return ApplyTask(
        **common,
        batch_size=target.batch_size,
        target_reports_capacity=not target.strips_consumed_capacity,
        skip_ttl_deletions=target.skip_ttl_deletions,
        skip_replicated_writes=target.skip_replicated_writes,
    )


_NOTHING_NEW = "Waiting for data to arrive"  # Spark's status after a trigger that found no new offsets
_BETWEEN_TRIGGERS = "Waiting for next trigger"


def caught_up(status: dict) -> bool:
    """The last trigger's reader found nothing new: Spark says so, or, between two triggers, the
    last one had no data (the message alone shows only for part of a trigger's interval)."""
    if status["message"] == _NOTHING_NEW:
        return True
    return status["message"] == _BETWEEN_TRIGGERS and not status["isDataAvailable"] and not status["isTriggerActive"]


# A batch the stop interrupts (stopping the query, or a signal to the job's group) fails, so that
# Spark does not commit it. py4j (in this process) and Spark's streaming engine (its package in 4.0
# and 4.1+) log that failure with their traces, as an error; it is not one: the next run applies
# the batch again, which the stop says in one line. The batch's killed tasks may also find its
# broadcast already removed when they complete, which TaskContextImpl logs as an error with a trace.
_INTERRUPTED_BATCH_REPORTERS = (
    ("org.apache.spark.sql.execution.streaming", "org.apache.spark.TaskContextImpl"),
    ("py4j.clientserver",),
)
_KILLED_TASKS_SECONDS = 30.0  # a bound: a task that never ends does not hold the stop up


def _beat(alive: Checkpoint, ctrl_c: "_StopOnCtrlC") -> bool:
    """Write the heartbeat; False when its write failed because the job is being stopped.

    Hadoop writes a local file with the help of a `chmod` process, a child of the driver's JVM:
    a signal sent to the job's process group (Ctrl+C at a terminal, a scheduler's kill) ends
    that process too, and the write fails. The stop was asked for all the same; the heartbeat
    is written again by the next run. A failure with no stop asked for is still an error.
    """
    try:
        alive.beat()
    except Py4JJavaError as exc:
        if not ctrl_c.requested:
            raise
        log.info("the heartbeat was not written while stopping (%s)", java_reason(exc))
        return False
    return True


class _StopOnCtrlC:
    """While the query runs, Ctrl+C or SIGTERM only sets a flag; the loop then stops the query.

    The handler must not call into the JVM: the main thread may be inside a py4j call, and
    PySpark's own handler (cancelAllJobs) would re-enter it. A second Ctrl+C interrupts; a
    second SIGTERM does not, as one SIGTERM may arrive twice (see migrator.stopping).

    `failed_before` counts the batch failures before the signal: a signal sent to the job's
    process group also ends the `chmod` a checkpoint write of the batch in progress may be
    running (see `_beat`), and that batch's failure, which follows the signal, is the stop's.
    """

    def __init__(self, failures: list[MigratorError]) -> None:
        self.requested = False
        self.failed_before = 0
        self._failures = failures
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "_StopOnCtrlC":
        if threading.current_thread() is threading.main_thread():
            self._previous[signal.SIGINT] = signal.signal(signal.SIGINT, self._handle)
            self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt()
        if not self.requested:
            self.failed_before = len(self._failures)
            log.info("%s received: stopping; a batch in progress is not committed, the next run applies it", signal.Signals(signum).name)
        self.requested = True

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


class _KeyStateKeeper:
    """Kinesis: each key's last applied change (`migrator.stream.key_state`), kept with the checkpoint.

    Loaded on the first batch of a run from the files of the batches before it, so a batch
    replayed after a crash sees the state it saw the first time. Which shards are still behind
    the stream's tip comes from the batch's end offset, as Spark logged it in the checkpoint.
    """

    def __init__(self, checkpoint: Checkpoint, stream: KinesisStream):
        self._checkpoint = checkpoint
        self._stream = stream
        self._state: key_state.KeyState | None = None
        self._end: StreamOffset | None = None  # the end offset of the batch being applied

    def stale_keys(self, batch_id: int, newest: dict[str, tuple]) -> frozenset[str]:
        """Before the batch is applied: also reads its end offset, so little is left to do after the writes."""
        if self._state is None:
            self._state = key_state.KeyState()
            for batch, text in self._checkpoint.load_key_state(before_batch=batch_id):
                self._state.load(batch, text)
        self._end = self._end_offset(batch_id)
        return frozenset(self._state.stale_keys(newest.items()))

    def applied(self, batch_id: int, applied: dict[str, tuple], orders: list[tuple[str, tuple, str]]) -> None:
        shards_read: dict[str, int] = {}
        for _, order, shard in orders:
            shards_read[shard] = max(order[0], shards_read.get(shard, 0))
        if applied or shards_read:
            self._checkpoint.save_key_state(batch_id, key_state.to_json(applied, shards_read))
        floor = int(epoch_of(self._end.start_at or self._stream.start_at) * 1_000_000)
        self._checkpoint.forget_key_state(self._state.record(batch_id, applied, shards_read, self._end.behind, floor))
        self._state.forget_shards_except(self._end.shards)

    def _end_offset(self, batch_id: int) -> StreamOffset:
        """The batch's end offset from Spark's offset log (written before the batch runs)."""
        text = self._checkpoint.logged_offset(batch_id, self._stream.arn)
        if text is None:
            raise MigratorError(f"replicating changes failed: batch {batch_id} is missing from Spark's offset log in {self._checkpoint.where}")
        return StreamOffset.from_json(text, self._stream.arn)


def _read_only(outcomes: list[ApplyOutcome]) -> list[ApplyOutcome]:
    """The batch's outcomes with nothing applied: its records were read, its rows not written."""
    return [replace(outcome, puts=0, deletes=0, unfit_values=0) for outcome in outcomes]


def _record(summary: ReplicationSummary, metrics: ReplicationMetrics, batch_id: int, outcomes: list[ApplyOutcome]) -> None:
    records = sum(o.records for o in outcomes)
    puts, deletes = sum(o.puts for o in outcomes), sum(o.deletes for o in outcomes)
    now = time.time()
    newest = max((o.newest_created_at for o in outcomes), default=0.0)
    lag = max(0.0, now - newest) if newest else None
    oldest = min((o.oldest_created_at for o in outcomes if o.oldest_created_at), default=0.0)
    oldest_lag = max(0.0, now - oldest) if oldest else 0.0  # the batch's longest wait, source to target
    summary.batches += 1
    summary.records += records
    summary.puts += puts
    summary.deletes += deletes
    summary.lag_seconds = lag if lag is not None else summary.lag_seconds
    dropped = Counter()
    for outcome in outcomes:
        dropped.update(dict(outcome.dropped))
    summary.dropped.update(dropped)
    unfit = sum(o.unfit_values for o in outcomes)
    summary.unfit_values += unfit
    metrics.observe(
        records=records, puts=puts, deletes=deletes, retries=sum(o.retries for o in outcomes),
        shards=len(frozenset().union(*(o.shards for o in outcomes))), lag_seconds=lag,
        iterator_age_seconds=iterator_age(outcomes), dropped=dropped,
    )  # fmt: skip
    if records:
        log.info(
            "replicate: batch %d: %d records, %d puts, %d deletes, lag %.1fs (its oldest record %.1fs)",
            batch_id, records, puts, deletes, lag or 0, oldest_lag,
        )  # fmt: skip
    if dropped:
        log.info("replicate: batch %d: records not applied: %s", batch_id, dict(dropped))
    if unfit:
        log.warning("replicate: batch %d: %d values do not fit their target.columns type: left null there, kept in _item", batch_id, unfit)
    skipped = next((o.first_skipped for o in outcomes if o.first_skipped), None)
    if skipped:
        log.warning("replicate: batch %d: skipped stream records that are no change of the source, e.g. %s", batch_id, skipped)


def _log_timing(progress: dict, last_logged: int) -> int:
    """Where a batch's time went, once per batch with records (Spark's durationMs, debug level)."""
    batch_id = progress.get("batchId", -1)
    if batch_id != last_logged and progress.get("numInputRows") and log.isEnabledFor(logging.DEBUG):
        durations = progress.get("durationMs", {})
        parts = ", ".join(f"{name} {durations[name]}" for name in _TIMED_STEPS if name in durations)
        log.debug("replicate: batch %d took %s ms: %s", batch_id, durations.get("triggerExecution", "?"), parts)
    return batch_id


# Spark's steps of a micro-batch: latestOffset reads the stream, addBatch applies it.
_TIMED_STEPS = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch", "commitOffsets")


def iterator_age(outcomes: list[ApplyOutcome]) -> float | None:
    """How far behind the stream's head reading is: now minus the newest record read, in the
    shard furthest behind (AWS's IteratorAgeMilliseconds, over the shards of this batch)."""
    newest: dict[str, float] = {}
    for outcome in outcomes:
        for shard, created_at in outcome.newest_by_shard:
            newest[shard] = max(created_at, newest.get(shard, 0.0))
    if not newest:
        return None
    return max(0.0, time.time() - min(newest.values()))


def query_error(exc: Any) -> MigratorError:
    """One line from a failed query or Spark job: the migrator's own error when a Python traceback holds one.

    A CheckpointError raised by the reader comes back as its class, for invalidCheckpointBehavior.
    """
    text = str(exc.desc if hasattr(exc, "desc") else exc)
    ours = _OUR_ERROR_LINE.findall(text)
    if ours:
        name, message = ours[-1]
        if name == CheckpointError.__name__:
            return rebuild_error(CheckpointError, message.strip())
        return MigratorError(f"replicating changes failed: {message.strip()[:500]}")
    for line in text.splitlines():
        if "Error:" in line or "error:" in line:
            return MigratorError(f"replicating changes failed: {line.strip()[:500]}")
    return MigratorError(f"replicating changes failed: {text.strip().splitlines()[0][:500] if text.strip() else exc}")


# The last line of a Python traceback that ended in one of our errors, e.g.
# "migrator.errors.AwsRequestFailed: reading stream shard ...": the message after the class.
_OUR_ERROR_LINE = re.compile(r"^migrator\.errors\.(\w+): (.+)$", re.MULTILINE)
