#!/usr/bin/env python
"""Benchmark the replication's driver at many stream shards: planning time, offsets, API calls, child waits.

    .venv/bin/python scripts/bench_shards.py [--shards 10,100,500,2000] [--seconds 30] [--rate 1000]
        [--split-every 3]

Per shard count, in turn:
  1. A scripted DynamoDB Streams server (testsupport/streamserver.py) runs in its own process with that many
     open shards. A writer puts `--rate` changes per second (INSERTs with NEW_AND_OLD_IMAGES, every 10 ms a
     tick's share) on shards drawn at random among the open ones; every `--split-every` seconds a random open
     shard splits: it is closed and two children name it as their parent, as DynamoDB does when a partition
     splits. Each record's ApproximateCreationDateTime is the instant it was put (to the millisecond).
  2. This process drives the migrator's own Spark data source reader (migrator.replicate.datasource.ChangesReader,
     the code the streaming query's driver runs) the way Spark's micro-batch loop does: initialOffset, then per
     trigger latestOffset(start) and partitions(start, end), a trigger every 500 ms (query.TRIGGER_INTERVAL) or
     at once when the last one took longer. No Spark session: what is measured is the driver's planning, not
     the executors' apply.
  3. Measured per trigger: wall time and this process's CPU time (its reader threads included) of
     latestOffset + partitions (the driver's time
     to discover shards and plan a batch), the offset's JSON size (what Spark writes to the checkpoint's
     offsets/ file per batch), input partitions planned, and each record's read lag (from its creation to the
     end of the trigger that planned it: the part of the end-to-end lag the driver adds; applying a batch
     comes after it). The server counts DescribeStream calls per second and GetRecords calls per shard per
     second (against DynamoDB Streams' quotas: 10/s and 5/s per shard), and times, for each child shard,
     the wait from its parent's close to the reader's first request on the child.
  4. The driver's resident memory growth over the run (ru_maxrss).

With `--apply`, step 2 runs the real replication instead (migrator.replicate.query.replicate, in a local[2]
Spark session of this process) into a table on dynalite (a fast DynamoDB emulator, testsupport/dynalite.py),
and measures, per micro-batch with records, the end-to-end lag: from a change's creation to the end of the
batch that wrote it to the target, for the batch's newest and its oldest record (the job's own log line),
over `--seconds` after a `--warmup` (the query's start and the backlog it finds are not the steady state).

Prints one line per shard count, then a table (the one in docs/benchmarks.md). The machine is small and
shared (2 cores, with other work running): the server, its writer and the reader share them, so times include
waiting for a CPU. Exit code 1 when the reader failed; goals are reported, not enforced.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import multiprocessing
import os
import random
import re
import resource
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import boto3

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # testsupport

from migrator.config import load_config  # noqa: E402
from migrator.replicate.datasource import ChangesReader, feed_of  # noqa: E402
from migrator.replicate.query import PARTITIONS_PER_CORE, TRIGGER_INTERVAL, replicate  # noqa: E402
from migrator.source.dynamodb_streams import StreamInfo  # noqa: E402
from migrator.spark import create_session  # noqa: E402
from testsupport.dynalite import DynaliteProcess  # noqa: E402
from testsupport.streamserver import ScriptedStreamServer, make_shard_id  # noqa: E402

TABLE, VIEW, KEY_NAMES = "bench", "NEW_AND_OLD_IMAGES", ("pk",)
TRIGGER_SECONDS = float(TRIGGER_INTERVAL.split()[0]) / 1000  # "500 milliseconds"
TICK_SECONDS = 0.01
SPARK_CORES = 2  # the partitions planned are those of a local[2] job
DESCRIBE_STREAM_PER_SECOND, GET_RECORDS_PER_SHARD_PER_SECOND = 10, 5  # DynamoDB Streams' quotas


# ---- the stream, in its own process ----


class ServedCalls:
    """What the server saw: DescribeStream calls per second, GetRecords per shard per second, first reads."""

    def __init__(self, server: ScriptedStreamServer):
        self.server = server
        self.describe_per_second: collections.Counter[int] = collections.Counter()
        self.reads_per_shard_second: collections.Counter[tuple[str, int]] = collections.Counter()
        self.first_request: dict[str, float] = {}
        server.add_hook(self.saw)

    def saw(self, operation: str, request: dict) -> None:
        now = time.time()
        if operation == "DescribeStream":
            self.describe_per_second[int(now)] += 1
        elif operation == "GetRecords":
            shard = self.server.decode_iterator(request.get("ShardIterator"))[0]
            self.reads_per_shard_second[(shard, int(now))] += 1
        elif operation == "GetShardIterator":
            self.first_request.setdefault(request.get("ShardId"), now)


class Topology:
    """The open shards, splitting one every `split_every` seconds; each child's parent and close time."""

    def __init__(self, server: ScriptedStreamServer, shards: int, rng: random.Random):
        self.server, self.rng = server, rng
        self.open = [server.add_shard(make_shard_id(f"g0-{i}")) for i in range(shards)]
        self.closed_at: dict[str, float] = {}  # child -> when its parent closed
        self._lock = threading.Lock()
        self._born = 0

    def split_one(self) -> None:
        with self._lock:
            parent = self.open.pop(self.rng.randrange(len(self.open)))
            children = [make_shard_id(f"c{self._born}-{side}") for side in "ab"]
            self._born += 1
            self.server.split(parent, children)
            closed = time.time()
            self.open += children
            for child in children:
                self.closed_at[child] = closed

    def put(self, number: int) -> None:
        with self._lock:
            shard = self.open[self.rng.randrange(len(self.open))]
            key = {"pk": {"S": f"k{number}"}}
            self.server.put(shard, "INSERT", key, new_image={**key, "v": {"N": str(number)}}, created=round(time.time(), 3))


def serve_stream(conn, shards: int, rate: float, split_every: float, seed: int) -> None:
    """The child process: serve the stream, write and split until told to stop, then send what it saw."""
    rng = random.Random(seed)
    with ScriptedStreamServer(table_name=TABLE, view_type=VIEW) as server:
        topology = Topology(server, shards, rng)
        calls = ServedCalls(server)
        stop = threading.Event()
        conn.send((server.endpoint_url, server.stream_arn))

        def write() -> None:
            started, written = time.monotonic(), 0
            while not stop.is_set():
                due = int((time.monotonic() - started) * rate)
                for number in range(written, due):
                    topology.put(number)
                written = due
                time.sleep(TICK_SECONDS)

        def split() -> None:
            while not stop.wait(split_every):
                topology.split_one()

        threads = [threading.Thread(target=t, daemon=True) for t in (write, split)]
        for thread in threads:
            thread.start()
        conn.recv()  # "stop"
        stop.set()
        for thread in threads:
            thread.join()
        waits = [calls.first_request[c] - closed for c, closed in topology.closed_at.items() if c in calls.first_request]
        conn.send({
            "describe_per_second": dict(calls.describe_per_second),
            "reads_per_shard_second_max": max(calls.reads_per_shard_second.values(), default=0),
            "child_waits": waits, "children": len(topology.closed_at), "open_shards": len(topology.open),
            "listed_shards": len(server.shard_ids()),
        })  # fmt: skip


# ---- the reader, in this process ----


@dataclass
class Run:
    shards: int
    plan_wall: list[float] = field(default_factory=list)
    plan_cpu: list[float] = field(default_factory=list)
    offset_bytes: list[int] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    ranges: list[int] = field(default_factory=list)  # shards with new records, each a range of a partition
    lags: list[float] = field(default_factory=list)
    batch_lags: list[tuple[float, float]] = field(default_factory=list)  # --apply: (newest, oldest) per batch
    batches_logged: int = 0  # --apply: every batch with records, the warm-up's included
    records: int = 0
    seconds: float = 0.0
    rss_growth_kb: int = 0
    served: dict = field(default_factory=dict)
    error: str | None = None


def write_config(workdir: Path, endpoint_url: str, target_url: str = "http://127.0.0.1:9") -> Path:
    path = workdir / "bench-shards.yaml"
    target_host, target_port = target_url.rsplit(":", 1)
    path.write_text(
        "source:\n"
        f"  type: dynamodb\n  table: {TABLE}\n  region: us-east-1\n  endpoint: {{host: {endpoint_url.rsplit(':', 1)[0]}, "
        f"port: {endpoint_url.rsplit(':', 1)[1]}}}\n"
        "  credentials: {accessKey: bench, secretKey: bench}\n"
        "target:\n  type: dynamodb\n  table: bench_target\n  region: us-east-1\n"
        f"  endpoint: {{host: {target_host}, port: {target_port}}}\n  credentials: {{accessKey: bench, secretKey: bench}}\n"
        "  streamChanges: true\n",
        encoding="utf-8",
    )
    return path


def percentile(ordered: list[float], percent: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * percent / 100))] if ordered else float("nan")


def drive(run: Run, reader: ChangesReader, seconds: float) -> None:
    """Spark's micro-batch loop, as far as the driver's reader is concerned."""
    start = reader.initialOffset()
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        trigger = time.monotonic()
        cpu = time.process_time()  # this process is the driver's reader alone: the stream is served by another
        end = reader.latestOffset(start)
        planned = reader.partitions(start, end)
        run.plan_cpu.append(time.process_time() - cpu)
        done = time.monotonic()
        run.plan_wall.append(done - trigger)
        run.offset_bytes.append(len(json.dumps(end)))
        run.partitions.append(len(planned))
        run.ranges.append(sum(len(partition.value) for partition in planned))
        now = time.time()
        for shard_range in (r for partition in planned for r in partition.value):
            records = shard_range.records or []
            run.records += len(records)
            run.lags += [now - float(r["dynamodb"]["ApproximateCreationDateTime"]) for r in records]  # epoch seconds
        start = end
        time.sleep(max(0.0, TRIGGER_SECONDS - (time.monotonic() - trigger)))
    run.seconds = time.monotonic() - began


def measure(shards: int, args: argparse.Namespace, workdir: Path) -> Run:
    run = Run(shards)
    if args.apply:
        spark_session()  # started before the stream: a cold session's backlog is no steady state
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    child = context.Process(target=serve_stream, args=(theirs, shards, args.rate, args.split_every, args.seed))
    child.start()
    try:
        endpoint_url, arn = ours.recv()
        source = load_config(str(write_config(workdir, endpoint_url))).config.source.client_spec("source")
        feed = feed_of(StreamInfo(arn, VIEW, KEY_NAMES), source, TABLE)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            if args.apply:
                replicate_into_dynalite(run, endpoint_url, arn, workdir, args.seconds, args.warmup)
            else:
                drive(run, ChangesReader(feed, PARTITIONS_PER_CORE * SPARK_CORES), args.seconds)
        except Exception as exc:  # reported, and the exit code says so
            run.error = f"{type(exc).__name__}: {exc}"
        run.rss_growth_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
        ours.send("stop")
        run.served = ours.recv()
    finally:
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    return run


# ---- the replication, end to end (--apply) ----


class BatchLags(logging.Handler):
    """Each batch's records and lags, from the replication's own log line (migrator.replicate.query._record)."""

    LINE = re.compile(r"batch \d+: (\d+) records, .* lag ([\d.]+)s \(its oldest record ([\d.]+)s\)")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        # (when logged, records, newest record's lag, oldest record's lag)
        self.batches: list[tuple[float, int, float, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        found = self.LINE.search(record.getMessage())
        if found:
            self.batches.append((time.monotonic(), int(found[1]), float(found[2]), float(found[3])))


_spark_session = None


def spark_session():
    """One local[2] session for every shard count: a session's start costs seconds."""
    global _spark_session
    if _spark_session is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers import what this venv has
        _spark_session = create_session("bench-shards", master=f"local[{SPARK_CORES}]")
    return _spark_session


def replicate_into_dynalite(run: Run, endpoint_url: str, arn: str, workdir: Path, seconds: float, warmup: float) -> None:
    """The replication of the served stream into a dynalite table, `warmup` + `seconds` long; lags from its log."""
    with DynaliteProcess() as dynalite:
        boto3.client(
            "dynamodb", endpoint_url=dynalite.endpoint_url, region_name="us-east-1",
            aws_access_key_id="bench", aws_secret_access_key="bench",
        ).create_table(
            TableName="bench_target", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )  # fmt: skip
        config = load_config(str(write_config(workdir, endpoint_url, dynalite.endpoint_url))).config
        lags = BatchLags()
        query_log = logging.getLogger("migrator.replicate.query")
        query_log.addHandler(lags)
        query_log.setLevel(logging.INFO)
        began = time.monotonic()
        try:
            replicate(
                spark_session(), config, StreamInfo(arn, VIEW, KEY_NAMES), str(workdir / f"checkpoint-{run.shards}"),
                should_stop=lambda summary: time.monotonic() - began > warmup + seconds,
            )  # fmt: skip
        finally:
            query_log.removeHandler(lags)
        # The first batches hold what was written while the query started (the backlog of a cold
        # session's first batch): measured from the first batch logged after the warm-up.
        run.batches_logged = len(lags.batches)
        steady = [batch for batch in lags.batches if batch[0] - began > warmup]
        if len(steady) > 1:
            run.seconds = steady[-1][0] - steady[0][0]
            for _, records, newest, oldest in steady[1:]:
                run.records += records
                run.batch_lags.append((newest, oldest))


# ---- the report ----


def apply_summary(run: Run) -> dict[str, str]:
    newest, oldest = (sorted(lags[i] for lags in run.batch_lags) for i in (0, 1))
    describe = run.served.get("describe_per_second", {})
    seconds = max(run.seconds, 1e-9)
    return {
        "shards": f"{run.shards:,}",
        "batches measured (all)": f"{len(run.batch_lags)} ({run.batches_logged})",
        "lag of a batch's newest record p50/p99 s": f"{percentile(newest, 50):.2f}/{percentile(newest, 99):.2f}",
        "lag of a batch's oldest record p50/p99/max s": (
            f"{percentile(oldest, 50):.2f}/{percentile(oldest, 99):.2f}/{oldest[-1] if oldest else float('nan'):.2f}"
        ),
        "changes applied/s": f"{run.records / seconds:,.0f}",
        "DescribeStream/s max": f"{max(describe.values(), default=0)}",
        "GetRecords/shard/s max": f"{run.served.get('reads_per_shard_second_max', 0)}",
    }


def reader_summary(run: Run) -> dict[str, str]:
    wall, cpu, lags = sorted(run.plan_wall), sorted(run.plan_cpu), sorted(run.lags)
    describe = run.served.get("describe_per_second", {})
    seconds = max(run.seconds, 1e-9)
    waits = sorted(run.served.get("child_waits", []))
    return {
        "shards": f"{run.shards:,}",
        "triggers": f"{len(wall)}",
        "plan p50/max s": f"{percentile(wall, 50):.2f}/{wall[-1] if wall else float('nan'):.2f}",
        "plan CPU p50 s": f"{percentile(cpu, 50):.2f}",
        "offset KB": f"{max(run.offset_bytes, default=0) / 1024:.0f}",
        "shards read/batch": f"{percentile(sorted(run.ranges), 50):.0f}",
        "partitions/batch": f"{percentile(sorted(run.partitions), 50):.0f}",
        "DescribeStream/s avg/max": f"{sum(describe.values()) / seconds:.1f}/{max(describe.values(), default=0)}",
        "GetRecords/shard/s max": f"{run.served.get('reads_per_shard_second_max', 0)}",
        "child wait p50/max s": f"{percentile(waits, 50):.1f}/{waits[-1] if waits else float('nan'):.1f}",
        "read lag p50/p99 s": f"{percentile(lags, 50):.2f}/{percentile(lags, 99):.2f}",
        "changes/s": f"{run.records / seconds:,.0f}",
        "driver RSS +MB": f"{run.rss_growth_kb / 1024:.0f}",
    }


def print_table(rows: list[dict[str, str]]) -> None:
    columns = list(rows[0])
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        print("| " + " | ".join(row[c] for c in columns) + " |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="10,100,500,2000", help="open shard counts, one run each")
    parser.add_argument("--seconds", type=float, default=30.0, help="reading time per shard count")
    parser.add_argument("--rate", type=float, default=1000.0, help="changes per second across the shards")
    parser.add_argument("--split-every", type=float, default=3.0, help="seconds between two shard splits")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--warmup", type=float, default=20.0, help="--apply: seconds before measuring")
    parser.add_argument(
        "--apply", action="store_true",
        help="run the replication itself (Spark, local[2]) into a dynalite table and measure end-to-end lag",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"bench_shards: {args.rate:,.0f} changes/s, a split every {args.split_every} s, {args.seconds:.0f} s per "
          f"shard count; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    rows, failed = [], False
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as workdir:
        for shards in (int(n) for n in args.shards.split(",")):
            run = measure(shards, args, Path(workdir))
            row = apply_summary(run) if args.apply else reader_summary(run)
            rows.append(row)
            print(", ".join(f"{k} {v}" for k, v in row.items()) + (f"; FAILED: {run.error}" if run.error else ""), flush=True)
            failed |= run.error is not None
    print_table(rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
