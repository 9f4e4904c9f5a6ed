#!/usr/bin/env python
"""Benchmark change replication on the moto emulator: end-to-end lag and throughput at fixed write rates, in
DynamoDB Streams mode and Kinesis Data Streams mode side by side.

    .venv/bin/python scripts/bench_stream.py [--modes streams,kinesis,delta] [--rates 100,500,max] [--seconds 60]
        [--keys 2000] [--payload-bytes 207]

Modes (`--modes`, run one after the other in that order, each with its own job over its own fresh tables
bench_<mode>_source and bench_<mode>_target, at the same rates, measured the same way):
  streams  `target.streamChanges: true`: the source has a NEW_AND_OLD_IMAGES DynamoDB stream; the job reads it
           (DescribeStream, GetShardIterator, GetRecords of dynamodbstreams).
  kinesis  `target.streamChanges: {type: kinesis, streamArn: ...}`: the benchmark creates a Kinesis data stream
           of 1 shard, bench_kinesis_changes, as a user would; the source has NO DynamoDB stream (so the emulator
           does not do that work too). The job enables the table's Kinesis streaming destination itself,
           snapshots, then replays from AT_TIMESTAMP. Each write's record (both images) is put into the stream
           by the emulator's destination extension (testsupport/moto_kinesis_destination.py) inside the write's own
           request, under moto_table_lock, the way a DynamoDB stream record is made in the other mode.
  delta    `target.type: delta` with `streamChanges: true`: the streams mode's source and stream, replicated into a
           local Delta table (one MERGE per micro-batch, delta-rs) instead of a DynamoDB target table. No target
           request goes to the emulator, so a write's visibility is read from the table itself (below).

One emulator (testsupport/emulator.py, its own process) serves everything. In order:
  1. The emulator's limit, measured once for every mode: `--writer-threads` threads write PutItem as fast as
     they can for `--limit-seconds` into a scratch table with a NEW_AND_OLD_IMAGES stream (a stream record per
     write, as on the Streams mode's source), nothing else running, with the items of step 3. "max" offers that
     rate, to every mode; it is "the emulator's limit" of the goals. (In kinesis mode the emulator's work per
     write is a Kinesis record instead of a stream record: "max" is the same offered rate, not that mode's own limit.)
  Then per mode:
  2. The source: `--keys`/2 `sample_data.make_item` items, then (streams) a NEW_AND_OLD_IMAGES stream or
     (kinesis) the empty Kinesis stream; the job is `spark-submit --master local[2] jobs/migrate.py` with the
     mode's `target.streamChanges` and `metricsPort`. Either way the seeded items reach the target through the
     snapshot only. It is replicating once it logged "replicating changes of" and a probe write reached the target.
  3. Per rate, for `--seconds`: an open-loop writer. Write i is due at start + i/rate whatever became of the
     writes before it (`--writer-threads` threads take the next due write; a late one goes at once), so a slow
     emulator shows as lag and as an achieved rate below the nominal one, never as a quietly lighter load. Writes
     still unsent when the seconds are over are not sent (and are counted): a phase lasts its time.
     Each write changes one key drawn uniformly from `--keys` (half exist at the start): 60% PutItem of a whole
     item, 30% UpdateItem (SET v, payload), 10% DeleteItem. An update goes only to a key that exists (moto
     streams an update that creates an item as two records, DynamoDB as one), a delete only to a key that exists
     and has no change still on its way to the target (so what the target receives always tells which write it
     carries, below); otherwise the write is a put. So each write is one stream (or Kinesis) record. Writes to one
     key never overlap and each carries `v`, a number that grows with every write: a key's order in the source is
     its v's. Then the benchmark waits (up to `--drain-seconds`) until every write of the rate is in the target.
  4. The target is scanned and compared with the source (every key and its v); SIGINT stops the job, which must
     exit 0. The mode's tables (and Kinesis stream) are deleted, so the next mode's emulator holds none of them.
  A job that fails ends its mode (the failure and the end of its log are printed); the next mode still runs.

Lag of a write: from the moment boto3 returned its acknowledgement to the moment its value was in the target. The
target is not polled: the job's endpoints (source and target) are relaying proxies in this process
(testsupport/faultproxy.py, no faults injected) that time each of its calls to the emulator, and the target's one notes
when the emulator answered each BatchWriteItem; moto applies a batch before it answers, so that instant is when
the items became readable (late by at most that request's own duration). A put with v confirms the key's pending
writes up to v (the migrator collapses a key's changes within a batch to the last one, so a write overwritten
before it was replicated counts as visible when its successor is); a delete confirms the key's pending delete. Why
not poll: one BatchGetItem of 100 keys costs moto about 70 ms, and at 100 changes/s with a second of lag 100-200
keys are pending, so polling them every 50 ms would take more of the emulator than the writes under test. What the
measurement costs instead: a loopback hop (about a millisecond) on each of the job's requests, parsing its
BatchWriteItem bodies (on another thread, after the answer is relayed), and a scrape of the job's Prometheus
endpoint every 0.25 s. The same in both modes: in kinesis mode the job reaches Kinesis at the source's endpoint,
so its ListShards, GetShardIterator and GetRecords go through the source's proxy too (and are in the emulator's
time per operation below), as its dynamodbstreams calls do in streams mode.

Per mode and rate: the offered rate achieved; lag p50/p95/p99/max; applied changes/s (stream records in the batches
the job applied: its migrator_stream_records_consumed_total) and its ratio to the achieved offered rate; target writes/s
(puts and deletes after the per-key collapse); batches/s; the time the job's calls to the emulator took, per
operation (concurrent calls add up: it is the emulator's part of a batch, the rest is the job's own); records the
job dropped (migrator_stream_records_dropped_total: duplicates or stale changes in kinesis mode); writes never
seen in the target. The job's counters are read over a window as long as the writer's, shifted by the median lag,
so that in a steady state it covers the changes offered; the job applies about a batch a second, so the window may
hold a batch more or less (±10% in 10 s, ±2% in 60 s). At the end, one table compares the modes rate by rate
(mode, rate, achieved offered rate, lag p50/p95/p99/max, applied changes/s and its ratio to offered). Exit code 1
when, in any mode, a write never reached the target, a source write failed, the target differs from the source,
or the job failed or did not exit 0 on SIGINT. The goals are reported per mode, not enforced.

The machine is shared and small: the writer (boto3, about 1.7 ms of CPU per request), this process's proxies, the
emulator (about one core at its limit: it is GIL-bound), the driver JVM and the Python workers all compete for the
cores, so lags include waiting for a CPU, more so at high rates; load averages are printed (per rate: the modes
run at different times, and other work on the machine may differ between them). The rates describe the
emulator, not DynamoDB. Ctrl+C or SIGTERM stops the writer, the job, the proxies and the emulator (exit 130).

Delta mode's visibility: a thread of this process polls the Delta table's log every DELTA_POLL_SECONDS; when a
new version appears it reads the table's `_item` column (the --keys keys at most) and, with the instant it saw the
version, confirms each key's pending writes up to the key's v and each pending delete of a key no longer there,
by the same rules as the proxy's. So a lag there is late by up to one poll plus that read (tens of ms on a local
disk), and costs the emulator nothing. The final check reads the table's keys and v the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import itertools
import json
import math
import os
import platform
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# BENCH_JOB_ARGS="--log-level DEBUG" shows where each batch's time goes, in the --job-log.
JOB_EXTRA_ARGS = os.environ.get("BENCH_JOB_ARGS", "").split()
sys.path.insert(0, str(REPO))  # testsupport: the emulator, the fault proxy, sample data

import boto3  # noqa: E402
import yaml  # noqa: E402
from botocore.config import Config  # noqa: E402
from deltalake import DeltaTable  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from migrator.spark import LOCAL_DRIVER_JAVA_OPTIONS  # noqa: E402
from testsupport.emulator import EmulatorProcess, free_port  # noqa: E402
from testsupport.faultproxy import FaultProxy  # noqa: E402
from testsupport.sample_data import create_sample_table, make_item, seed  # noqa: E402

REGION, ACCESS_KEY, SECRET_KEY = "us-east-1", "bench-access-key", "bench-secret-key"
MASTER = "local[2]"
ACCOUNT = "123456789012"  # moto's default account, in the Kinesis stream's ARN
MODES = ("streams", "kinesis", "delta")
DELTA_POLL_SECONDS = 0.05  # how often delta mode looks for a new version of the table
PUT, UPDATE, DELETE = "put", "update", "delete"
MIX = ((PUT, 0.6), (UPDATE, 0.3), (DELETE, 0.1))  # share of each kind of write
STARTUP_TIMEOUT = 600  # spark-submit until replicating; the snapshot of --keys/2 items included
PROBE_TIMEOUT = 180
STOP_TIMEOUT = 120  # SIGINT until the job has exited
SCRAPE_SECONDS = 0.25
METRICS = {  # what the benchmark reads from the job's Prometheus endpoint
    "records": "migrator_stream_records_consumed_total",
    "applied": "migrator_changes_applied_total",  # summed over its operation label
    "batches": "migrator_batches_total",
    "dropped": "migrator_stream_records_dropped_total",  # summed over its reason label; kinesis mode
}


@dataclass(frozen=True)
class Mode:
    """A way of replicating, with its own tables: "streams" (the source's DynamoDB stream) or "kinesis" (a Kinesis
    data stream the source table streams to through its Kinesis streaming destination)."""

    name: str

    @property
    def source(self) -> str:
        return f"bench_{self.name}_source"

    @property
    def target(self) -> str:
        return f"bench_{self.name}_target"

    @property
    def kinesis(self) -> bool:
        return self.name == "kinesis"

    @property
    def delta(self) -> bool:
        return self.name == "delta"

    @property
    def stream_arn(self) -> str:
        return f"arn:aws:kinesis:{REGION}:{ACCOUNT}:stream/bench_{self.name}_changes"

    def stream_changes(self) -> bool | dict:
        """target.streamChanges of the job's configuration."""
        return {"type": "kinesis", "streamArn": self.stream_arn} if self.kinesis else True


# --- DynamoDB helpers -----------------------------------------------------------------------------------
def dynamodb(endpoint_url: str):
    """A boto3 client shared by the writer threads; few retries, so Ctrl+C ends quickly."""
    config = Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=64, read_timeout=120)
    return boto3.client("dynamodb", endpoint_url=endpoint_url, region_name=REGION, config=config,
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)


def kinesis_client(endpoint_url: str):
    return boto3.client("kinesis", endpoint_url=endpoint_url, region_name=REGION,
                        config=Config(retries={"mode": "standard", "max_attempts": 3}),
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)


def create_kinesis_stream(kinesis, stream_arn: str) -> None:
    """What a user does before a Kinesis-mode migration: a stream of one shard, ACTIVE."""
    name = stream_arn.rpartition("/")[2]
    kinesis.create_stream(StreamName=name, ShardCount=1)
    deadline = time.monotonic() + 30
    while kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
        if time.monotonic() > deadline:
            raise TimeoutError(f"Kinesis stream {name} not ACTIVE after 30 s")
        time.sleep(0.2)


def drop_mode(client, kinesis, mode: Mode) -> None:
    """A mode's tables and stream, once it is done: moto keeps items and records in memory."""
    for table in (mode.source, mode.target):
        with contextlib.suppress(client.exceptions.ResourceNotFoundException):
            client.delete_table(TableName=table)
    if mode.kinesis:
        with contextlib.suppress(kinesis.exceptions.ResourceNotFoundException):
            kinesis.delete_stream(StreamName=mode.stream_arn.rpartition("/")[2], EnforceConsumerDeletion=True)


def enable_stream(client, table: str) -> None:
    """A NEW_AND_OLD_IMAGES stream, as the migrator enables when a source has none."""
    client.update_table(TableName=table, StreamSpecification={"StreamEnabled": True,
                                                              "StreamViewType": "NEW_AND_OLD_IMAGES"})


def versions_of(client, table: str) -> dict[tuple[str, str], int | None]:
    """Every key of the table and its v (None for items no benchmark write touched)."""
    versions = {}
    for page in client.get_paginator("scan").paginate(TableName=table, ProjectionExpression="pk, sk, v"):
        for item in page["Items"]:
            versions[(item["pk"]["S"], item["sk"]["N"])] = int(Decimal(item["v"]["N"])) if "v" in item else None
    return versions


@dataclass
class KeySpace:
    """The keys the writer changes: key number n is make_item(n)'s key; a lock per key keeps writes serial."""

    count: int
    payload_bytes: int
    keys: list[tuple[str, str]] = field(init=False)
    exists: list[bool] = field(init=False)  # in the source, as the writer last left it
    locks: list[threading.Lock] = field(init=False)

    def __post_init__(self):
        self.keys = [(item["pk"]["S"], item["sk"]["N"]) for item in (make_item(n, 0) for n in range(self.count))]
        self.exists = [False] * self.count
        self.locks = [threading.Lock() for _ in range(self.count)]

    def item(self, n: int, version: int) -> dict:
        return {**make_item(n, self.payload_bytes), "v": {"N": str(version)}}

    def key(self, n: int) -> dict:
        pk, sk = self.keys[n]
        return {"pk": {"S": pk}, "sk": {"N": sk}}


# --- The writes and when each reached the target --------------------------------------------------------
@dataclass
class Write:
    version: int
    key: tuple[str, str]
    op: str
    due: float
    sent: float
    acked: float | None = None
    visible: float | None = None
    failed: bool = False

    @property
    def lag(self) -> float | None:
        """Acknowledged → in the target; 0 when the target had it before boto3 returned (it can happen)."""
        if self.visible is None or self.acked is None:
            return None
        return max(0.0, self.visible - self.acked)


class Tracker:
    """Per key, the writes not yet seen in the target, in the order of their versions (the source's order)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._versions = itertools.count(1)
        self._pending: dict[tuple[str, str], list[Write]] = {}

    def register(self, key: tuple[str, str], op: str, due: float) -> Write:
        """Called with the key's lock held, right before the request: so versions grow in the source's order."""
        with self._lock:
            write = Write(next(self._versions), key, op, due, time.monotonic())
            self._pending.setdefault(key, []).append(write)
            return write

    def has_pending(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return bool(self._pending.get(key))

    def forget(self, write: Write) -> None:
        """A write that failed: whether the source has it is unknown, so it is not waited for."""
        with self._lock:
            write.failed = True
            self._pending[write.key].remove(write)

    def seen_put(self, key: tuple[str, str], version: int, at: float) -> None:
        """The target received the key's item with this v: it and every earlier write of the key are there."""
        with self._lock:
            pending = self._pending.get(key, [])
            while pending and pending[0].version <= version:
                pending.pop(0).visible = at

    def seen_delete(self, key: tuple[str, str], at: float) -> None:
        """The target deleted the key: that is the key's pending delete (never more than one, always first)."""
        with self._lock:
            pending = self._pending.get(key, [])
            if pending and pending[0].op == DELETE:
                pending.pop(0).visible = at


class JobEndpoint(FaultProxy):
    """One of the job's endpoints: relays every request to the emulator and notes how long the emulator took.
    Given a tracker (the target's endpoint), it also queues each BatchWriteItem's body with the instant its
    answer came back, and a thread turns them into visibility times (see the docstring)."""

    def __init__(self, emulator_url: str, tracker: Tracker | None = None, table: str | None = None):
        super().__init__(emulator_url, fault_rate=0.0, record=True, clock=time.monotonic)
        self.calls: list[tuple[str, float, float]] = []  # (operation, arrived, answered)
        self._tracker, self._table, self._bodies = tracker, table, queue.SimpleQueue()
        if tracker is not None:
            threading.Thread(target=self._check, name="target-watch", daemon=True).start()

    def remember(self, target: str | None, body: bytes, arrived: float | None) -> None:
        if not target:
            return
        operation, answered = target.rpartition(".")[2], self.now()
        self.calls.append((operation, arrived, answered))  # nothing else kept: the bodies add up
        if self._tracker is not None and operation == "BatchWriteItem":
            self._bodies.put((body, answered))  # parsed later, so the job's request is not held up

    def _check(self) -> None:
        while True:
            body, answered = self._bodies.get()
            for request in json.loads(body)["RequestItems"].get(self._table, []):
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    if "v" in item:  # items without v come from the snapshot
                        key = (item["pk"]["S"], item["sk"]["N"])
                        self._tracker.seen_put(key, int(Decimal(item["v"]["N"])), answered)
                else:
                    key = request["DeleteRequest"]["Key"]
                    self._tracker.seen_delete((key["pk"]["S"], key["sk"]["N"]), answered)


def delta_versions(path: Path) -> dict[tuple[str, str], int | None]:
    """Every key of the Delta table and its v (None for items no benchmark write touched), from `_item`: the key
    as the writer spells it (the sk column is a decimal once the snapshot types the number keys)."""
    versions = {}
    for row in DeltaTable(str(path)).to_pyarrow_table(columns=["_item"]).to_pylist():
        item = json.loads(row["_item"])
        versions[(item["pk"]["S"], item["sk"]["N"])] = int(Decimal(item["v"]["N"])) if "v" in item else None
    return versions


class DeltaWatcher:
    """Delta mode's target: confirms writes from each new version of the table (see the docstring)."""

    def __init__(self, path: Path, tracker: Tracker, keys: "KeySpace"):
        self.path, self._tracker, self._keys, self._stop = path, tracker, keys, threading.Event()
        self.calls: list[tuple[str, float, float]] = []  # no emulator calls: the table is on the local disk
        threading.Thread(target=self._run, name="delta-watch", daemon=True).start()

    def _run(self) -> None:
        seen = -1
        while not self._stop.wait(DELTA_POLL_SECONDS):
            if not (self.path / "_delta_log").is_dir():
                continue  # the job has not created the table yet
            at = time.monotonic()
            try:
                table = DeltaTable(str(self.path))
                if table.version() == seen:
                    continue
                seen = table.version()
                versions = delta_versions(self.path)
            except Exception:  # a commit being written: look again at the next poll
                continue
            for key, version in versions.items():
                if version is not None:
                    self._tracker.seen_put(key, version, at)
            for key in self._keys.keys:
                if key not in versions:
                    self._tracker.seen_delete(key, at)

    def __enter__(self) -> "DeltaWatcher":
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()


# --- The writer -----------------------------------------------------------------------------------------
def choose_op(rng: random.Random) -> str:
    draw = rng.random()
    for op, share in MIX:
        if draw < share:
            return op
        draw -= share
    return MIX[-1][0]


def write_once(client, table: str, keys: KeySpace, tracker: Tracker, rng: random.Random, due: float) -> Write:
    """One change to a random key; the key's lock keeps a second change of it from overlapping this one."""
    n = rng.randrange(keys.count)
    with keys.locks[n]:
        op = choose_op(rng)
        if op == UPDATE and not keys.exists[n]:
            op = PUT  # moto streams an update that creates an item as two records; DynamoDB as one
        if op == DELETE and (not keys.exists[n] or tracker.has_pending(keys.keys[n])):
            op = PUT  # a delete of a missing key leaves no stream record; see the docstring for the other case
        write = tracker.register(keys.keys[n], op, due)
        try:
            if op == PUT:
                client.put_item(TableName=table, Item=keys.item(n, write.version))
            elif op == UPDATE:
                client.update_item(TableName=table, Key=keys.key(n), UpdateExpression="SET v = :v, payload = :p",
                                   ExpressionAttributeValues={":v": {"N": str(write.version)},
                                                              ":p": {"S": f"update {write.version}"}})
            else:
                client.delete_item(TableName=table, Key=keys.key(n))
        except Exception as error:  # counted and reported; the benchmark goes on
            tracker.forget(write)
            print(f"    source write failed: {op} {keys.keys[n]}: {type(error).__name__}: {str(error)[:200]}")
            return write
        write.acked = time.monotonic()
        keys.exists[n] = op != DELETE
        return write


def offer(phase: "Phase", client, table: str, keys: KeySpace, tracker: Tracker, threads: int, seed_: int) -> None:
    """Open loop: write i is due at start + i/rate, for `phase.seconds`. A write still unsent when the window
    closes (the writer fell that far behind) is not sent: the phase lasts its time, whatever the rate."""
    counter, writes, stop = itertools.count(), [], threading.Event()
    phase.planned = round(phase.nominal * phase.seconds)
    phase.start = start = time.monotonic() + 0.2  # every thread is waiting by then
    end = start + phase.seconds

    def worker(number: int) -> None:
        rng = random.Random(seed_ * 1000 + number)
        while not stop.is_set() and (i := next(counter)) < phase.planned:
            due = start + i / phase.nominal
            if stop.wait(max(0.0, due - time.monotonic())) or time.monotonic() >= end:
                return
            writes.append(write_once(client, table, keys, tracker, rng, due))

    run_threads(worker, threads, stop)
    phase.writes = sorted(writes, key=lambda w: w.version)


def run_threads(worker, threads: int, stop: threading.Event) -> None:
    """worker(0..threads-1) on threads; joined with a timeout so Ctrl+C reaches the main thread."""
    pool = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(threads)]
    try:
        for thread in pool:
            thread.start()
        for thread in pool:
            while thread.is_alive():
                thread.join(0.5)
    finally:
        stop.set()


def emulator_limit(client, keys: KeySpace, seconds: float, threads: int) -> float:
    """PutItem as fast as `threads` threads can, into a scratch table with a stream: writes/s."""
    table, counts, stop = "bench_stream_limit", [0] * threads, threading.Event()
    create_sample_table(client, table)
    enable_stream(client, table)
    deadline = time.monotonic() + seconds

    def worker(number: int) -> None:
        rng = random.Random(number)
        while not stop.is_set() and time.monotonic() < deadline:
            client.put_item(TableName=table, Item=keys.item(rng.randrange(keys.count), counts[number]))
            counts[number] += 1

    started = time.monotonic()
    run_threads(worker, threads, stop)
    rate = sum(counts) / (time.monotonic() - started)
    client.delete_table(TableName=table)  # moto keeps its items and stream records in memory
    return rate


# --- The job --------------------------------------------------------------------------------------------
class Job:
    """spark-submit in a session of its own, its output in a file; stopped with SIGINT as Ctrl+C would."""

    def __init__(self, log_path: Path):
        self.log_path, self.proc = log_path, None

    def start(self, config: Path) -> list[str]:
        log4j = f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}"  # Spark's own logging at WARN
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", MASTER, "--driver-java-options",
                   f"{log4j} {LOCAL_DRIVER_JAVA_OPTIONS}", str(REPO / "jobs" / "migrate.py"), "--config", str(config),
                   *JOB_EXTRA_ARGS]
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return command

    def log(self) -> list[str]:
        return self.log_path.read_text(errors="replace").splitlines()

    def failure(self, reason: str) -> "JobFailed":
        return JobFailed(f"{reason}; the job's log ends:\n    " + "\n    ".join(self.log()[-40:]))

    def check_running(self) -> None:
        if self.proc.poll() is not None:
            raise self.failure(f"the job exited with code {self.proc.returncode}")

    def wait_for_line(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.log()):
            self.check_running()
            if time.monotonic() > deadline:
                raise self.failure(f"no {text!r} in the job's log after {timeout:.0f} s")
            time.sleep(0.5)

    def interrupt(self) -> int | None:
        """SIGINT to the job's process group, as a terminal's Ctrl+C; its exit code, None if it did not exit."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGINT)
        try:
            return self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Whatever is left of the job's process group (pyspark's daemon may outlive spark-submit)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


class JobFailed(Exception):
    pass


def write_config(workdir: Path, mode: Mode, source_url: str, target_url: str, metrics_port: int) -> Path:
    """Both tables behind the benchmark's proxies; replication in the mode's way, and metrics, on.
    Delta mode: the target is a local Delta table, `workdir/delta`."""

    def side(table: str, url: str) -> dict:
        host, _, port = url.rpartition(":")
        return {"type": "dynamodb", "table": table, "region": REGION, "endpoint": {"host": host, "port": int(port)},
                "credentials": {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}}

    target = {"type": "delta", "path": str(workdir / "delta")} if mode.delta else side(mode.target, target_url)
    config = {"source": side(mode.source, source_url),
              "target": {**target, "streamChanges": mode.stream_changes()},
              "savepoints": {"path": str(workdir / "savepoints")},
              "checkpointLocation": str(workdir / "checkpoint"), "metricsPort": metrics_port}
    path = workdir / "bench-stream.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


class MetricsSampler:
    """The job's counters (METRICS), scraped every SCRAPE_SECONDS, readable at any past instant."""

    def __init__(self, port: int):
        self.url, self.samples, self._stop = f"http://127.0.0.1:{port}/metrics", [], threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_SECONDS):
            try:
                text = urllib.request.urlopen(self.url, timeout=2).read().decode()
            except OSError:
                continue  # not serving yet, or busy
            totals = dict.fromkeys(METRICS, 0.0)
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    for name, metric in METRICS.items():
                        if sample.name == metric:
                            totals[name] += sample.value
            self.samples.append((time.monotonic(), totals))

    def at(self, name: str, instant: float) -> float:
        """The counter at `instant`, interpolated between the scrapes around it."""
        before = [(t, s[name]) for t, s in self.samples if t <= instant][-1:] or [(instant, 0.0)]
        after = [(t, s[name]) for t, s in self.samples if t > instant][:1] or before
        (t0, v0), (t1, v1) = before[0], after[0]
        return v0 if t1 == t0 else v0 + (v1 - v0) * (instant - t0) / (t1 - t0)

    def stop(self) -> None:
        self._stop.set()


# --- One rate -------------------------------------------------------------------------------------------
@dataclass
class Phase:
    name: str
    nominal: float
    seconds: float
    start: float = 0.0  # when the first write was due
    planned: int = 0  # nominal rate × seconds
    writes: list[Write] = field(default_factory=list)  # those sent
    never_seen: int = 0  # writes not in the target --drain-seconds after the window
    counters: dict[str, float] = field(default_factory=dict)  # per second over the shifted window
    emulator_calls: dict[str, list[float]] = field(default_factory=dict)  # the job's, in the window: seconds each
    load: str = ""

    @property
    def done(self) -> list[Write]:
        return [w for w in self.writes if not w.failed]

    @property
    def achieved(self) -> float:
        """Writes acknowledged per second, from the first due time to the last acknowledgement."""
        last = max((w.acked for w in self.done), default=self.start)
        return len(self.done) / max(last - self.start, 1e-9)

    @property
    def lags(self) -> list[float]:
        return sorted(w.lag for w in self.done if w.lag is not None)

    @property
    def unseen(self) -> list[Write]:
        return [w for w in self.done if w.visible is None]

    @property
    def failed(self) -> int:
        return len(self.writes) - len(self.done)

    def lag(self, percent: float) -> float:
        return percentile(self.lags, percent)


def percentile(ordered: list[float], percent: float) -> float:
    """Nearest-rank percentile of sorted values; NaN when there are none."""
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)] if ordered else math.nan


def run_phase(phase: Phase, number: int, mode: Mode, client, keys: KeySpace, tracker: Tracker,
              endpoints: list[JobEndpoint], sampler: MetricsSampler, job: Job, args: argparse.Namespace) -> Phase:
    """Offer the rate, wait until the target has every write, read the job's counters over the window."""
    print(f"\n{mode.name} {phase.name}: offering {phase.nominal:,.0f} writes/s for {phase.seconds:g} s ...")
    offer(phase, client, mode.source, keys, tracker, args.writer_threads, seed_=number)
    job.check_running()
    wait_until_seen(phase, job, args.drain_seconds)
    phase.never_seen = len(phase.unseen)  # what arrives later is still a failure
    shifted = phase.start + (phase.lag(50) if phase.lags else 0.0)
    window = phase.seconds
    time.sleep(max(0.0, shifted + window + 2 * SCRAPE_SECONDS - time.monotonic()))  # a scrape after the window
    phase.counters = {name: (sampler.at(name, shifted + window) - sampler.at(name, shifted)) / window
                      for name in METRICS}
    for endpoint in endpoints:
        for operation, arrived, answered in endpoint.calls:
            if shifted <= arrived < shifted + window:
                phase.emulator_calls.setdefault(operation, []).append(answered - arrived)
    phase.load = "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    print_phase(phase)
    return phase


def wait_until_seen(phase: Phase, job: Job, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while phase.unseen and time.monotonic() < deadline:
        job.check_running()
        time.sleep(0.1)


def probe(client, table: str, keys: KeySpace, tracker: Tracker, job: Job) -> float:
    """One put, waited for in the target: proves the whole path works; returns its lag."""
    write = write_once(client, table, keys, tracker, random.Random(0), time.monotonic())
    deadline = time.monotonic() + PROBE_TIMEOUT
    while write.visible is None:
        job.check_running()
        if write.failed or time.monotonic() > deadline:
            raise job.failure(f"a probe write was not in the target after {PROBE_TIMEOUT} s")
        time.sleep(0.05)
    return write.lag


# --- Report ---------------------------------------------------------------------------------------------
def print_phase(phase: Phase) -> None:
    ops = {op: sum(1 for w in phase.done if w.op == op) for op, _ in MIX}
    slip = sorted(max(0.0, w.sent - w.due) for w in phase.done)
    c = phase.counters
    print(f"    offered: {phase.achieved:,.1f} writes/s achieved of {phase.nominal:,.0f} "
          f"({len(phase.done):,} writes: {', '.join(f'{n:,} {op}s' for op, n in ops.items())}); sent after due: p99 "
          f"{percentile(slip, 99):.3f} s, max {percentile(slip, 100):.3f} s; "
          f"{phase.planned - len(phase.writes):,} planned writes not sent (still behind when the window closed)")
    print(f"    lag (acknowledged → in target): p50 {phase.lag(50):.3f} s, p95 {phase.lag(95):.3f} s, "
          f"p99 {phase.lag(99):.3f} s, max {phase.lag(100):.3f} s")
    print(f"    applied: {c['records']:,.1f} changes/s (ratio to offered {ratio(phase):.3f}), "
          f"{c['applied']:,.1f} target writes/s after the per-key collapse, {c['batches']:.2f} batches/s "
          f"({c['records'] / c['batches'] if c['batches'] else 0:,.0f} changes per batch); "
          f"{c['dropped']:,.1f} records/s dropped")
    calls = sorted(phase.emulator_calls.items(), key=lambda call: -sum(call[1]))
    busy = sum(sum(seconds) for _, seconds in calls)
    print(f"    the job's calls to the emulator in that window took {busy / phase.seconds:.2f} s per second: "
          + ", ".join(f"{operation} {len(seconds):,} × {sum(seconds) / len(seconds) * 1000:,.0f} ms"
                      for operation, seconds in calls))
    print(f"    never seen in the target: {phase.never_seen:,}; source writes failed: {phase.failed:,}; "
          f"load average {phase.load}")


def ratio(phase: Phase) -> float:
    return phase.counters["records"] / phase.achieved if phase.achieved else math.nan


def print_header(args: argparse.Namespace) -> dict[str, str]:
    """Machine, versions, load and how to reproduce: what a reader needs to weigh the numbers."""

    def run(*command: str) -> str:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        return (done.stdout + done.stderr).strip()

    memory_kib = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    dirty = " + uncommitted changes in migrator/" if run("git", "status", "--porcelain", "--", "migrator") else ""
    packages = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("pyspark", "moto", "boto3"))
    facts = {
        "machine": f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {memory_kib / 2**20:.1f} GiB, "
        f"Linux {platform.release()}",
        "versions": f"migrator {run('git', 'rev-parse', '--short', 'HEAD')}{dirty}, "
        f"python {platform.python_version()}, {packages}, {run('java', '-version').splitlines()[0]}",
        "load": "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()),
    }
    print(f"# dynamodb-migrator replication benchmark\nreproduce: {reproduce_command(args)}")
    print(f"machine:   {facts['machine']}\nversions:  {facts['versions']}")
    print(f"load average at start (1/5/15 min): {facts['load']} (other work may share the machine)")
    return facts


def reproduce_command(args: argparse.Namespace) -> str:
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(f"{REPO}/") else sys.executable
    return (f"cd {REPO} && {python} scripts/bench_stream.py --modes {args.modes} --rates {args.rates} "
            f"--seconds {args.seconds:g} "
            f"--keys {args.keys} --payload-bytes {args.payload_bytes} --writer-threads {args.writer_threads} "
            f"--limit-seconds {args.limit_seconds:g}")


@dataclass
class ModeRun:
    """What one mode's job did: its rates, the final check, its exit code, or why it failed."""

    mode: Mode
    phases: list[Phase] = field(default_factory=list)
    equal: bool | None = None  # the target equal to the source at the end; None: not checked
    code: int | None = None  # the job's exit code on SIGINT
    failure: str | None = None  # the job failed (JobFailed's first line)

    @property
    def ok(self) -> bool:
        return (self.failure is None and self.equal is True and self.code == 0
                and not any(p.never_seen or p.failed for p in self.phases))

    def problems(self) -> str:
        if self.failure is not None:
            return f"job failed: {self.failure}"
        failed = [p.name for p in self.phases if p.never_seen or p.failed]
        return (f"writes never seen or failed in {failed or 'no rate'}; target equal to source: {self.equal}; "
                f"job exit code {self.code}")


def report(args: argparse.Namespace, facts: dict[str, str], limit: float, runs: list[ModeRun]) -> None:
    """The goals per mode, then one Markdown table comparing the modes rate by rate, for docs/benchmarks.md."""
    print("\n## Results")
    for run in runs:
        phases = run.phases
        print(f"{run.mode.name}:" + (f" FAILED ({run.failure})" if run.failure else ""))
        at_100 = next((p for p in phases if p.name == "100/s"), None)
        if at_100 is None:
            print("    goal: lag at 100 changes/s: not measured (100 is not in --rates, or the job failed first)")
        elif run.mode.delta:  # issue 13's goal: a MERGE per batch, so a looser bound than a DynamoDB target's
            met = at_100.lag(50) < 2
            print(f"    goal: at 100 changes/s into Delta, lag p50 < 2 s: {'MET' if met else 'NOT MET'} "
                  f"(p50 {at_100.lag(50):.3f} s, p99 {at_100.lag(99):.3f} s)")
        else:
            met = at_100.lag(50) < 1 and at_100.lag(99) < 3
            print(f"    goal: at 100 changes/s, lag p50 < 1 s and p99 < 3 s: {'MET' if met else 'NOT MET'} "
                  f"(p50 {at_100.lag(50):.3f} s, p99 {at_100.lag(99):.3f} s)")
        within = [p for p in phases if p.nominal <= limit * 1.001]
        met = all(abs(ratio(p) - 1) <= 0.1 for p in within)
        print(f"    goal: applied within 10% of offered up to the emulator's limit ({limit:,.0f} writes/s): "
              f"{'MET' if met and within else 'NOT MET' if within else 'not measured'} "
              f"({', '.join(f'{p.name}: {ratio(p):.3f}' for p in within)})")
        for phase in phases:
            if phase not in within:
                print(f"    {phase.name} is above the emulator's limit: ratio {ratio(phase):.3f}, not part of the goal")
    print(f"load average at end (1/5/15 min): {'{:.2f} {:.2f} {:.2f}'.format(*os.getloadavg())}")
    modes = " and ".join(f"{run.mode.name} ({describe_mode(run.mode)})" for run in runs)
    print(f"\n## Markdown\n\nReplication on the moto emulator, {modes}: each mode its own job and tables, one "
          f"after the other, {args.seconds:g} s per rate, {args.keys:,} keys; "
          f"{facts['machine']}; {facts['versions']}; load average {facts['load'].split()[0]} at start. "
          f"Emulator limit (PutItem with a stream, {args.writer_threads} threads): {limit:,.0f} writes/s. "
          f"Reproduce: `{reproduce_command(args)}`\n")
    print("| mode | rate | offered/s | lag p50 s | p95 s | p99 s | max s | applied/s | applied/offered | batches/s "
          "| dropped/s | never seen | load 1 min |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for number, rate in enumerate(args.rate_list):  # the modes side by side, rate by rate
        for run in runs:
            if number >= len(run.phases):
                name = "max" if rate == "max" else f"{rate:g}/s"
                print(f"| {run.mode.name} | {name} | not measured: the job failed |" + " |" * 10)
                continue
            p = run.phases[number]
            print(f"| {run.mode.name} | {p.name} | {p.achieved:,.1f} | {p.lag(50):.2f} | {p.lag(95):.2f} | "
                  f"{p.lag(99):.2f} | {p.lag(100):.2f} | {p.counters['records']:,.1f} | {ratio(p):.3f} | "
                  f"{p.counters['batches']:.2f} | {p.counters['dropped']:,.1f} | {p.never_seen} | "
                  f"{p.load.split()[0]} |")
    for run in runs:
        if not run.ok:
            print(f"\n{run.mode.name}: FAILED: {run.problems()}")


def describe_mode(mode: Mode) -> str:
    if mode.delta:
        return "DynamoDB Streams into a local Delta table, `target.type: delta`, a MERGE per batch"
    return ("Kinesis Data Streams, `streamChanges: {type: kinesis}`, 1 shard" if mode.kinesis
            else "DynamoDB Streams, `streamChanges: true`")


# --- Main -----------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"replication modes, comma-separated, run in this order: {', '.join(MODES)}")
    parser.add_argument("--rates", default="100,500,max", help="writes/s, comma-separated; max: the emulator's limit")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds per rate (default 60)")
    parser.add_argument("--keys", type=int, default=2000, help="keys the writes change; half exist at the start")
    parser.add_argument("--payload-bytes", type=int, default=207, help="make_item's payload (about 500-byte items)")
    parser.add_argument("--writer-threads", type=int, default=16, help="threads of the writer and of the limit")
    parser.add_argument("--limit-seconds", type=float, default=15.0, help="how long the emulator's limit is measured")
    parser.add_argument("--drain-seconds", type=float, default=300.0,
                        help="after a rate, how long every write has to reach the target")
    parser.add_argument("--job-log", type=Path, help="copy the job's log (driver and Spark output) here at the end; "
                        "with several modes, each to this path with the mode before its suffix (job.kinesis.log)")
    args = parser.parse_args(argv)
    args.mode_list = [Mode(m.strip()) for m in args.modes.split(",")]
    if any(m.name not in MODES for m in args.mode_list) or len(set(args.mode_list)) < len(args.mode_list):
        parser.error(f"--modes: some of {', '.join(MODES)}, comma-separated, each once (got {args.modes!r})")
    try:
        args.rate_list = [r.strip() if r.strip() == "max" else float(r) for r in args.rates.split(",")]
    except ValueError:
        parser.error(f"--rates: numbers or max, comma-separated (got {args.rates!r})")
    if any(r != "max" and r <= 0 for r in args.rate_list) or min(args.seconds, args.limit_seconds) <= 0:
        parser.error("rates and seconds must be positive")
    if args.keys < 2 or args.writer_threads < 1 or args.payload_bytes < 0:
        parser.error("--keys must be at least 2, --writer-threads positive, --payload-bytes not negative")
    return args


def interrupt(signum, frame) -> None:
    """Ctrl+C or SIGTERM: unwind through every cleanup; a second signal must not cut them short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def start_job(stack: contextlib.ExitStack, mode: Mode, client, kinesis, emulator: EmulatorProcess, keys: KeySpace,
              tracker: Tracker, workdir: Path) -> tuple[Job, list[JobEndpoint], MetricsSampler]:
    """Seed the mode's source, start its job behind the proxies, wait until a probe write is replicated."""
    create_sample_table(client, mode.source)
    seed(client, mode.source, (make_item(n, keys.payload_bytes) for n in range(keys.count // 2)))
    keys.exists[: keys.count // 2] = [True] * (keys.count // 2)
    if mode.kinesis:  # no DynamoDB stream: the job enables the table's Kinesis streaming destination itself
        create_kinesis_stream(kinesis, mode.stream_arn)
        changes = f"no DynamoDB stream; Kinesis stream {mode.stream_arn} (1 shard), the job enables the destination"
    else:
        enable_stream(client, mode.source)  # after seeding: the job replays only the benchmark's writes
        changes = "stream enabled"
    source = stack.enter_context(JobEndpoint(emulator.endpoint_url))
    if mode.delta:
        target = stack.enter_context(DeltaWatcher(workdir / "delta", tracker, keys))
        target_url = source.endpoint_url  # unused: a Delta target has no DynamoDB endpoint
    else:
        target = stack.enter_context(JobEndpoint(emulator.endpoint_url, tracker, mode.target))
        target_url = target.endpoint_url
    port = free_port()
    job = Job(workdir / "job.log")
    stack.callback(job.kill)
    command = job.start(write_config(workdir, mode, source.endpoint_url, target_url, port))
    print(f"source:    {mode.source}: {keys.count // 2:,} items, {changes}\njob:       {' '.join(command)}")
    sampler = MetricsSampler(port)
    stack.callback(sampler.stop)
    launched = time.monotonic()
    job.wait_for_line("replicating changes of", STARTUP_TIMEOUT)
    print(f"    replicating {time.monotonic() - launched:.1f} s after launch; a probe write reached the target "
          f"{probe(client, mode.source, keys, tracker, job):.2f} s after its acknowledgement")
    return job, [source, target], sampler


def run_mode(mode: Mode, args: argparse.Namespace, emulator: EmulatorProcess, client, kinesis, limit: float,
             workdir: Path) -> ModeRun:
    """One mode end to end over fresh tables: its job, every rate, the check, SIGINT; then its tables go."""
    print(f"\n# mode {mode.name}: {describe_mode(mode)}")
    workdir.mkdir(parents=True)
    run, keys, tracker = ModeRun(mode), KeySpace(args.keys, args.payload_bytes), Tracker()
    with contextlib.ExitStack() as stack:  # the job, its proxies and its scraper: this mode's only
        try:
            job, endpoints, sampler = start_job(stack, mode, client, kinesis, emulator, keys, tracker, workdir)
            for number, rate in enumerate(args.rate_list, 1):
                name = "max" if rate == "max" else f"{rate:g}/s"
                run.phases.append(run_phase(Phase(name, limit if rate == "max" else rate, args.seconds), number,
                                            mode, client, keys, tracker, endpoints, sampler, job, args))
        except JobFailed as failure:  # the next mode still runs; the exit code will be 1
            print(f"\nFAILED ({mode.name}): {failure}")
            run.failure = str(failure).splitlines()[0]
        else:
            run.equal = check_target(client, mode, workdir)
            run.code = stop_job(job)
    drop_mode(client, kinesis, mode)  # the job is gone by now (stopped, or killed with its process group)
    return run


def benchmark(args: argparse.Namespace, workdir: Path) -> int:
    facts = print_header(args)
    with EmulatorProcess() as emulator:
        print(f"emulator:  {emulator.endpoint_url} (pid {emulator.pid})")
        client, kinesis = dynamodb(emulator.endpoint_url), kinesis_client(emulator.endpoint_url)
        limit = emulator_limit(client, KeySpace(args.keys, args.payload_bytes), args.limit_seconds,
                               args.writer_threads)
        print(f"emulator limit: {limit:,.0f} PutItem/s ({args.writer_threads} threads, {args.limit_seconds:g} s, "
              "a table with a stream, nothing else running); the same rates for every mode")
        runs = [run_mode(mode, args, emulator, client, kinesis, limit, workdir / mode.name) for mode in args.mode_list]
        report(args, facts, limit, runs)
        return 0 if all(run.ok for run in runs) else 1


def stop_job(job: Job) -> int | None:
    """Ctrl+C, as a user stops it; print the summary the job printed; return its exit code."""
    code = job.interrupt()
    print(f"job: SIGINT → exit code {code}" + (f" (still running after {STOP_TIMEOUT} s)" if code is None else ""))
    log = job.log()
    summary = max((i for i, line in enumerate(log) if line.startswith("replication stopped")), default=len(log))
    print("\n".join(f"    | {line}" for line in log[summary:]))
    return code


def check_target(client, mode: Mode, workdir: Path) -> bool:
    """After the last rate: the target holds exactly the source's keys, each with the source's v."""
    source = versions_of(client, mode.source)
    target = delta_versions(workdir / "delta") if mode.delta else versions_of(client, mode.target)
    equal = source == target
    differ = sorted(k for k in source.keys() | target.keys() if source.get(k, -1) != target.get(k, -1))
    print(f"\ncheck: target {len(target):,} items, source {len(source):,}: "
          + ("equal (keys and v)" if equal else f"MISMATCH in {len(differ):,} keys, e.g. {differ[:5]}"))
    return equal


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress shows as it happens, also in a file
    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell's `&` would have it ignored
        signal.signal(signum, interrupt)
    workdir = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    try:
        return benchmark(args, workdir)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping what the benchmark started", file=sys.stderr)
        return 130
    finally:
        for mode in args.mode_list if args.job_log else ():
            log = workdir / mode.name / "job.log"
            if log.exists():
                several = len(args.mode_list) > 1
                shutil.copyfile(log, args.job_log.with_suffix(f".{mode.name}{args.job_log.suffix}")
                                if several else args.job_log)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
