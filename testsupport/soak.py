"""The randomized convergence soak: one round is a random table, mode, writer, faults and
interruptions of a spark-submit job, then the target compared with the source key by key.

``plan_round(seed)`` draws everything a round does from ``random.Random(seed)``, so a failing
round replays with its seed (the same table, mode, faults and schedule; the threads' timing
is the machine's). ``run_round(plan, endpoint_url, workdir)`` runs it against the emulator:

1. the source table (or, for an export import, the live table and its S3 export) is created
   and seeded; the job reaches the emulator through one ``FaultProxy`` for the whole round
   (a savepoint belongs to one endpoint), which injects the planned faults;
2. in the modes that replicate, a ``SourceWriter`` changes the source from the first run's
   start until the end, and makes a burst of changes between runs (without a change stream a
   change after the copy started could not reach the target, so the snapshot-only modes get
   none);
3. each planned interruption waits for its moment (a condition: the target table exists, a
   Scan is in flight, the savepoint gained a segment, replication started, a batch was
   committed, a write of a batch is in flight), sends its signal to the job's process group
   and checks the exit code; the next run is the same command;
4. the last run finishes the snapshot, or replicates until the target equals the source
   with the writer stopped and is then stopped by Ctrl+C;
5. ``convergence.compare_tables`` classifies every key: lost, resurrected, altered.

``plan_round(seed, target="delta")`` draws the same round into a Delta table (``target.type:
delta`` at ``<workdir>/table``) and, between runs, loses the savepoint or also leaves the segment
count to the job (``BETWEEN_RUNS``): the table itself must keep a rerun from copying a key again,
so the verdict also counts keys held twice (``convergence.compare_with_delta``).

docs/soak.md describes how to run it and what a long run found.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from testsupport.convergence import Verdict, compare_tables, compare_with_delta
from testsupport.endpoint import aws_client, dynamodb_client, reaching, side, table_exists
from testsupport.faultproxy import FAULTS, FaultProxy
from testsupport.jobs import drain, start_job, write_config
from testsupport.kinesis_runs import create_stream
from testsupport.replication import list_commits
from testsupport.resume import copied_segments
from testsupport.s3_exports import export_live_table
from testsupport.sample_data import seed as write_items
from testsupport.soak_data import TTL_ATTRIBUTE, KeySchema, SourceWriter, draw_key_schema, make_source_items

MODES = ("snapshot", "streams", "kinesis", "export", "skip_snapshot")
TARGETS = ("dynamodb", "delta")
# What a Delta round does to its runs' state between two runs: nothing; the savepoint deleted (as the
# refusal of a changed segment count tells the user); the savepoint deleted and scanSegments left out, so
# the job chooses the count itself (another than the first run's). Either way the table's own record of
# the copy must keep every key once.
BETWEEN_RUNS = ("keep", "lose_savepoint", "segments_left_to_the_job")
SIGNALS = ("SIGINT", "SIGTERM", "SIGKILL")
# Moments a job can be interrupted at, in the order a run passes them.
SNAPSHOT_MOMENTS = ("early", "mid_segment", "segment_done")
REPLICATION_MOMENTS = ("replicating", "committed", "mid_batch")
# The requests the proxy may fault: the data plane of both sides and the streams' reads.
FAULTED_OPERATIONS = {"Scan", "BatchWriteItem", "GetItem", "GetRecords", "GetShardIterator", "DescribeStream", "ListShards"}
STREAM_READY = "replicating changes of"
# How each signal may end a run: Ctrl+C and SIGTERM exit 130 / 143 before the snapshot is done and
# 0 while replicating; a run that finished before the signal came exits 0.
EXIT_CODES = {"SIGINT": {0, 130}, "SIGTERM": {0, 143}, "SIGKILL": {0, -9}}
MOMENT_SECONDS = 240  # the longest wait for a moment; the busy machine's spark-submit start included
CONVERGE_SECONDS = 240  # the longest wait for the target to equal the source once the writer stopped


@dataclass(frozen=True)
class Interruption:
    moment: str
    signal: str


@dataclass(frozen=True)
class RoundPlan:
    """Everything a round does, drawn from its seed."""

    seed: int
    mode: str
    chained: bool  # an export import followed by the live table's stream
    schema: KeySchema
    items: int
    large_items: int
    segments: int
    read_throughput: int
    fault_rate: float
    faults: tuple[str, ...]
    throttle: tuple[str, float] | None  # a burst: every request of the operation throttled for seconds
    interruptions: tuple[Interruption, ...]
    writer_interval_seconds: float
    changes_between_runs: int
    kinesis_shards: int
    reshard: bool  # Kinesis: double or halve the shards while replicating
    target: str = "dynamodb"  # or "delta"
    between_runs: str = "keep"  # a Delta round's: BETWEEN_RUNS

    @property
    def replicates(self) -> bool:
        return self.mode in ("streams", "kinesis", "skip_snapshot") or (self.mode == "export" and self.chained)

    def describe(self) -> str:
        key = f"{self.schema.hash_type}" + (f"+{self.schema.range_type}" if self.schema.range_type else "")
        mode = f"{self.mode}{'+stream' if self.chained else ''}"
        if self.target == "delta":
            mode += f" into delta ({self.between_runs.replace('_', ' ')} between runs)"
        stops = ", ".join(f"{i.signal}@{i.moment}" for i in self.interruptions) or "none"
        faults = f"{self.fault_rate:.2f} of {'/'.join(self.faults)}" + (
            f", {self.throttle[0]} throttled {self.throttle[1]:.0f} s" if self.throttle else ""
        )
        return (
            f"seed {self.seed}: {mode}, key {key}, {self.items} items ({self.large_items} near 400 KB), "
            f"{self.segments} segments, interruptions: {stops}; faults: {faults}"
        )


def plan_round(seed: int, short: bool = False, target: str = "dynamodb") -> RoundPlan:
    """Draw a round; `short` keeps it small (the test suite's rounds): one interruption, few items and
    segments, reads paced loosely. A Delta `target` gets the same round, with a write of a batch (which a
    Delta target has not) for a moment taken as a committed batch, and what it does between runs."""
    plan = _plan_round(seed, short)
    if target == "dynamodb":
        return plan
    interruptions = tuple(
        Interruption("committed", i.signal) if i.moment == "mid_batch" else i for i in plan.interruptions
    )
    between_runs = random.Random(f"delta-{seed}").choice(BETWEEN_RUNS)
    return replace(plan, target=target, interruptions=interruptions, between_runs=between_runs)


def _plan_round(seed: int, short: bool) -> RoundPlan:
    rng = random.Random(seed)
    mode = rng.choice(MODES)
    chained = mode == "export" and rng.random() < 0.7
    replicates = mode in ("streams", "kinesis", "skip_snapshot") or chained
    scans = mode in ("snapshot", "streams", "kinesis")  # an export import and a skipped snapshot scan nothing
    moments = [*(SNAPSHOT_MOMENTS if scans else ("early",)), *(REPLICATION_MOMENTS if replicates else ())]
    count = 1 if short else rng.randint(0, 3)
    interruptions = tuple(Interruption(rng.choice(moments), rng.choice(SIGNALS)) for _ in range(count))
    fault_rate = rng.choice((0.0, 0.02, 0.05, 0.1))
    extra = ["latency"] + (["expired_iterator", "limit_exceeded"] if replicates else [])
    drawn = rng.sample(FAULTS, rng.randint(1, len(FAULTS))) + rng.sample(extra, rng.randint(0, len(extra)))
    faults = tuple(sorted(set(drawn)))
    throttled = rng.choice(("Scan", "BatchWriteItem", "GetRecords")) if rng.random() < 0.5 else None
    return RoundPlan(
        seed=seed, mode=mode, chained=chained, schema=draw_key_schema(rng),
        items=rng.randint(30, 120) if short else rng.randint(50, 1500),
        large_items=rng.randint(0, 1 if short else 3),
        segments=rng.randint(1, 3 if short else 8),
        read_throughput=rng.choice((200, 4000) if short else (20, 40, 200, 4000)),
        fault_rate=fault_rate, faults=faults,
        throttle=(throttled, rng.uniform(1, 5)) if throttled else None,
        interruptions=interruptions,
        writer_interval_seconds=rng.choice((0.1, 0.3) if short else (0.02, 0.1, 0.3)),
        changes_between_runs=rng.randint(0, 10 if short else 60),
        kinesis_shards=rng.randint(1, 3), reshard=mode == "kinesis" and rng.random() < 0.5,
    )  # fmt: skip


@dataclass
class RoundResult:
    plan: RoundPlan
    verdict: Verdict | None = None
    problems: list[str] = field(default_factory=list)  # unexpected exits, no convergence: each fails the round
    events: list[str] = field(default_factory=list)  # the schedule as it happened, with seconds since the start
    kills: Counter = field(default_factory=Counter)  # "SIGKILL@mid_batch": 1
    faults: dict[str, int] = field(default_factory=dict)
    changes: int = 0
    runs: int = 0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.verdict is not None and self.verdict.converged and not self.problems

    def report(self) -> str:
        verdict = self.verdict.describe() if self.verdict else "not compared"
        lines = [f"{'converged' if self.passed else 'FAILED'}: {self.plan.describe()}", f"  {verdict}"]
        lines += [f"  problem: {p}" for p in self.problems]
        if not self.passed:
            lines += ["  schedule:", *(f"    {e}" for e in self.events)]
        return "\n".join(lines)


def signals_sent(results: list[RoundResult]) -> Counter:
    """The interruptions of all rounds by signal (a round counts them by signal and moment)."""
    sent: Counter = Counter()
    for result in results:
        for kind, count in result.kills.items():
            sent[kind.partition("@")[0]] += count
    return sent


class Job:
    """One spark-submit run of the round's config; its output collected as it comes."""

    def __init__(self, config: Path):
        self.process = start_job(config)
        self.lines: list[str] = []
        self.reader = drain(self.process, self.lines)

    def printed(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def running(self) -> bool:
        return self.process.poll() is None

    def signal(self, name: str) -> bool:
        """Send the signal to the job's process group; False when the job had already ended."""
        if not self.running():
            return False
        os.killpg(self.process.pid, getattr(signal, name))
        return True

    def wait(self, timeout: float = 180) -> int:
        code = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code

    def tail(self, lines: int = 40) -> str:
        return "".join(self.lines[-lines:])


class Round:
    """The running round: its tables, proxy, writer, folders and the log of what happened."""

    def __init__(self, plan: RoundPlan, endpoint_url: str, workdir: Path, echo: Callable[[str], None] | None = None):
        self.plan, self.endpoint_url, self.workdir, self.echo = plan, endpoint_url, workdir, echo
        self.rng = random.Random(plan.seed + 1)  # the writer's draws: apart from the plan's
        self.dynamodb = dynamodb_client(endpoint_url)
        suffix = f"{plan.seed}-{os.urandom(3).hex()}"
        self.source, self.target = f"soak-{suffix}", f"soak-{suffix}-copy"
        self.checkpoint, self.savepoints = workdir / "checkpoint", workdir / "savepoints"
        self.delta_path = workdir / "table"  # a Delta round's target
        self.result = RoundResult(plan)
        self.started = time.monotonic()
        self.writer: SourceWriter | None = None
        self.proxy: FaultProxy | None = None
        self.jobs: list[Job] = []
        self.stream_name: str | None = None  # Kinesis mode's stream

    def log(self, event: str) -> None:
        self.result.events.append(f"{time.monotonic() - self.started:7.1f} s  {event}")
        if self.echo is not None:
            self.echo(self.result.events[-1])

    # ---- the source and the config ----

    def create_source(self) -> None:
        plan = self.plan
        stream = plan.mode in ("export", "skip_snapshot")  # the stream must hold every write from the first
        extra = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}} if stream else {}
        self.dynamodb.create_table(
            TableName=self.source, KeySchema=plan.schema.key_schema(),
            AttributeDefinitions=plan.schema.attribute_definitions(), BillingMode="PAY_PER_REQUEST", **extra,
        )  # fmt: skip
        self.dynamodb.update_time_to_live(
            TableName=self.source, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )
        items = make_source_items(self.rng, plan.schema, plan.items, plan.large_items)
        write_items(self.dynamodb, self.source, items, threads=4)
        self.log(f"source {self.source}: {len(items)} items")
        if plan.replicates:
            self.writer = SourceWriter(self.dynamodb, self.source, plan.schema, self.rng, key_space=plan.items * 6 // 5)

    def write_config(self, proxy_url: str) -> Path:
        plan = self.plan
        pacing = {"scanSegments": plan.segments, "maxMapTasks": 1, "readThroughput": plan.read_throughput}
        target = side(proxy_url, self.target) if plan.target == "dynamodb" else {"type": "delta", "path": str(self.delta_path)}
        if plan.mode in ("streams", "skip_snapshot") or plan.chained:
            target["streamChanges"] = True
        if plan.mode == "kinesis":
            arn = create_stream(aws_client("kinesis", self.endpoint_url), shards=plan.kinesis_shards)
            target["streamChanges"] = {"type": "kinesis", "streamArn": arn}
            self.stream_name = arn.rpartition("/")[2]
        if plan.mode == "skip_snapshot":
            target["skipInitialSnapshotTransfer"] = True
        if plan.mode == "export":
            source = self.export_source(proxy_url)
        else:
            source = side(proxy_url, self.source, **pacing)
        document = {"source": source, "target": target, "savepoints": {"path": str(self.savepoints)}}
        if plan.replicates:
            document["checkpointLocation"] = str(self.checkpoint)
        self.document = document
        return write_config(self.workdir, document)

    def between_runs(self, config: Path) -> None:
        """A Delta round's loss of state between runs (`BETWEEN_RUNS`); the config is rewritten in place."""
        if self.plan.between_runs == "keep":
            return
        shutil.rmtree(self.savepoints, ignore_errors=True)
        if self.plan.between_runs == "segments_left_to_the_job":
            self.document["source"].pop("scanSegments", None)
            write_config(config.parent, self.document, config.name)
        self.log(self.plan.between_runs.replace("_", " "))

    def export_source(self, proxy_url: str) -> dict:
        s3 = aws_client("s3", self.endpoint_url)
        export = export_live_table(s3, self.dynamodb, self.source, files=self.plan.segments)
        self.log(f"exported {self.source} in {self.plan.segments} data files")
        block = {"type": "dynamodb-s3-export", "bucket": export.bucket, "manifestKey": export.summary_key}
        block.update(reaching(proxy_url))
        if self.plan.chained:
            block["streamSource"] = side(proxy_url, self.source)
        else:
            block["tableDescription"] = self.plan.schema.table_description()
        return block

    # ---- the runs ----

    def run(self) -> RoundResult:
        plan = self.plan
        self.create_source()
        with FaultProxy(self.endpoint_url, fault_rate=plan.fault_rate, faults=plan.faults,
                        operations=FAULTED_OPERATIONS, seed=plan.seed) as proxy:  # fmt: skip
            self.proxy = proxy
            if plan.throttle:
                proxy.throttle(*plan.throttle)
            config = self.write_config(proxy.endpoint_url)
            try:
                for interruption in plan.interruptions:
                    self.interrupted_run(config, interruption)
                self.last_run(config)
            except Exception as exc:  # noqa: BLE001 - the round fails with its seed and schedule, the soak goes on
                self.result.problems.append(f"the round stopped: {type(exc).__name__}: {exc}")
            finally:
                self.kill_leftovers()
                self.stop_writer()
                self.result.faults = {k: v for k, v in proxy.counts.items() if k != "forwarded" and v}
        self.result.verdict = self.compare()
        self.result.seconds = time.monotonic() - self.started
        return self.result

    def compare(self) -> Verdict:
        names = self.plan.schema.names
        if self.plan.target == "delta":
            return compare_with_delta(self.dynamodb, self.source, self.delta_path, names, TTL_ATTRIBUTE)
        return compare_tables(self.dynamodb, self.source, self.target, names, TTL_ATTRIBUTE)

    def start(self, config: Path) -> Job:
        self.result.runs += 1
        self.log(f"run {self.result.runs}: spark-submit")
        if self.writer is not None and self.result.runs == 1:
            self.writer.start(self.plan.writer_interval_seconds)
        self.jobs.append(Job(config))
        return self.jobs[-1]

    def kill_leftovers(self) -> None:
        """A round that failed half-way leaves no job behind."""
        for job in self.jobs:
            if job.signal("SIGKILL"):
                job.wait()

    def interrupted_run(self, config: Path, interruption: Interruption) -> None:
        job = self.start(config)
        moment = self.wait_for_moment(job, interruption.moment)
        sent = job.signal(interruption.signal)
        if sent:
            self.result.kills[f"{interruption.signal}@{moment}"] += 1
        self.proxy.release_held()
        code = job.wait()
        self.proxy.cancel_hold()
        self.log(f"{interruption.signal} at {moment} (planned {interruption.moment}): exit {code}"
                 + ("" if sent else ", the job had ended before the signal"))
        if not sent and job.printed(STREAM_READY):  # replication runs until stopped: never ends by itself
            self.result.problems.append(f"run {self.result.runs}: replication ended by itself, exit {code}:\n{job.tail()}")
        if code not in EXIT_CODES[interruption.signal]:
            where = f"run {self.result.runs}: {interruption.signal} at {moment}"
            self.result.problems.append(f"{where}: exit {code}:\n{job.tail()}")
        if self.writer is not None:
            self.writer.write(self.plan.changes_between_runs)
            self.log(f"{self.plan.changes_between_runs} changes between runs")
        self.between_runs(config)

    def last_run(self, config: Path) -> None:
        job = self.start(config)
        if not self.plan.replicates:
            code = job.wait(timeout=900)
            self.log(f"finished: exit {code}")
            if code != 0:
                self.result.problems.append(f"the last run exited {code}:\n{job.tail()}")
            return
        try:
            self.replicate_until_converged(job)
        finally:
            job.signal("SIGINT")
            code = job.wait()
            self.log(f"SIGINT to stop replicating: exit {code}")
            if code != 0:
                self.result.problems.append(f"the last run, stopped by Ctrl+C, exited {code}:\n{job.tail()}")

    def replicate_until_converged(self, job: Job) -> None:
        commits = len(list_commits(self.checkpoint))
        if not self.wait(job, lambda: job.printed(STREAM_READY) and len(list_commits(self.checkpoint)) > commits):
            self.result.problems.append(f"replication never committed a batch:\n{job.tail()}")
            return
        if self.plan.reshard:
            self.reshard()
        self.stop_writer()
        self.log(f"writer stopped after {self.writer.counts.total} changes")
        converged = self.wait(job, lambda: self.compare().converged, seconds=CONVERGE_SECONDS, poll_seconds=1.0)
        self.log("target equals source" if converged else f"not converged in {CONVERGE_SECONDS} s")

    def stop_writer(self) -> None:
        if self.writer is None:
            return
        try:
            self.writer.stop()
        except Exception as exc:  # noqa: BLE001 - a failed write is the round's problem, not the soak's
            self.result.problems.append(f"the source writer stopped: {type(exc).__name__}: {exc}")
        self.result.changes = self.writer.counts.total

    def reshard(self) -> None:
        kinesis = aws_client("kinesis", self.endpoint_url)
        target = self.plan.kinesis_shards * 2 if self.plan.kinesis_shards == 1 or self.rng.random() < 0.5 else 1
        kinesis.update_shard_count(StreamName=self.stream_name, TargetShardCount=target, ScalingType="UNIFORM_SCALING")
        self.log(f"Kinesis stream resharded from {self.plan.kinesis_shards} to {target} shards")

    # ---- moments ----

    def wait_for_moment(self, job: Job, moment: str) -> str:
        """Wait until the moment comes (its name), or a later phase does (the job finished the snapshot
        before a snapshot moment: "replicating"; the job ended: "ended")."""
        later_phase = lambda: job.printed(STREAM_READY)  # noqa: E731 - a condition beside the others
        conditions: dict[str, Callable[[], bool]] = {
            "early": self.target_exists,
            "segment_done": self.segment_done_condition(),
            "replicating": later_phase,
        }
        if moment == "mid_segment":
            conditions["mid_segment"] = self.proxy.hold_next("Scan").is_set
        if moment == "committed":
            commits = len(list_commits(self.checkpoint))
            conditions["committed"] = lambda: later_phase() and len(list_commits(self.checkpoint)) > commits
        if moment == "mid_batch":
            conditions["mid_batch"] = self.hold_a_batch_once_replicating(job)
        reached = conditions[moment]
        fallback = later_phase if moment in SNAPSHOT_MOMENTS else (lambda: False)
        if not self.wait(job, lambda: reached() or fallback()):
            return "ended" if not job.running() else "timeout"
        return moment if reached() else "replicating"

    def target_exists(self) -> bool:
        if self.plan.target == "delta":
            return (self.delta_path / "_delta_log").is_dir()
        return table_exists(self.dynamodb, self.target)

    def segment_done_condition(self) -> Callable[[], bool]:
        before = len(copied_segments(self.savepoints))
        return lambda: len(copied_segments(self.savepoints)) > before

    def hold_a_batch_once_replicating(self, job: Job) -> Callable[[], bool]:
        """A condition: replication started, then a BatchWriteItem of a batch is parked in the proxy."""
        held = []

        def condition() -> bool:
            if not held and job.printed(STREAM_READY):
                held.append(self.proxy.hold_next("BatchWriteItem"))
            return bool(held) and held[0].is_set()

        return condition

    def wait(
        self, job: Job, condition: Callable[[], bool], seconds: float = MOMENT_SECONDS, poll_seconds: float = 0.05
    ) -> bool:
        """Poll until the condition holds (True), or the job ended or the time ran out (False)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():
                return True
            if not job.running():
                return condition()
            time.sleep(poll_seconds)
        return False


def run_round(plan: RoundPlan, endpoint_url: str, workdir: Path, echo: Callable[[str], None] | None = None) -> RoundResult:
    """Run the round in `workdir`; `echo` gets each event as it happens (the script prints them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    return Round(plan, endpoint_url, workdir, echo).run()
