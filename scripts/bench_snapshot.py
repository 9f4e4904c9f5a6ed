#!/usr/bin/env python
"""Benchmark the snapshot copy on the moto emulator: the migrator against the emulator's limit and plain boto3.

    .venv/bin/python scripts/bench_snapshot.py [--items 100000] [--payload-bytes 207] [--segments N] [--limit-threads 8]
        [--export-files 8] [--no-imports]

One emulator (testsupport/emulator.py) serves a source table of N `sample_data.make_item` items, copied three times:
  (a) emulator limit: a parallel Scan (a thread per segment) into memory, then BatchWriteItem from as many
      threads. moto answers on about one core (GIL-bound), so no copy beats its Scan cost plus its write cost.
  (b) plain boto3: one thread, paginated Scan, BatchWriteItem of 25: the copy a user writes.
  (c) the migrator, `spark-submit --master local[2] jobs/migrate.py`, timed from launch to exit and from its
      first Scan to the answer to its last BatchWriteItem (the copy without JVM start-up and shutdown), which
      testsupport/faultproxy.py, relaying its requests with no faults, timestamps.
Then the validator checks (c)'s copy:
  (v) `spark-submit --master local[2] jobs/validate.py` with (c)'s config: both tables scanned and compared key by
      key. Launched, sampled and proxied as (c) is; timed from launch to exit and from its first Scan to the
      moment its JSON report is written (the comparison done, before JVM shutdown). Its report must count every
      item equal. Items compared per second are the source's items (each read from both tables) per second.
Then the same items are imported from S3 exports, beside the Scan path (skipped with --no-imports):
  (d), (e) the migrator importing a full export (`source.type: dynamodb-s3-export`) of the same items, which
      testsupport/s3_exports.py wrote beforehand into the emulator's S3 in AWS's layout (--export-files gzip data
      files, not timed): (d) DYNAMODB_JSON, (e) ION. Launched as (c) is, and timed from launch to exit and from
      its first BatchWriteItem to the answer to its last, through the same kind of proxy (its S3 reads go to
      the emulator directly; a data file's download precedes its first write by well under a second).
Then the same table into a Delta Lake table, beside the DynamoDB target (skipped with --no-delta):
  (f) the migrator with `target.type: delta` writing a local Delta table (delta-rs on the executors), launched,
      proxied and sampled as (c) is. It sends no write the proxy could stamp, so (f) and (c) compare by the job's
      own snapshot seconds (their summaries' `seconds:` line) and from launch to exit; verified by reading the
      table's key columns back with delta-rs.
Each copy goes into a fresh table, and is verified by scanning it: the item count and the set of keys must be
the source's, else the exit code is 1 (after the full report).

Client CPU never includes the emulator (a process of its own, outside every copy):
  (a), (b): this process's CPU time (time.process_time) during the copy.
  (c): all the job's processes, JVM start-up included: RUSAGE_CHILDREN after minus before, the CPU of every
      descendant once waited for. This process is the child subreaper (prctl), so job processes whose parent
      exits first are re-parented here and waited for here. One hole: pyspark.daemon ignores SIGCHLD, so the
      kernel reaps its forked workers and their CPU reaches no RUSAGE_CHILDREN; for them the last utime+stime
      seen in /proc is added (the job's session is sampled every 0.2 s). The proxy's CPU is not counted.
Peak RSS of (c), from the same samples: driver JVM, Python driver, Python workers (pyspark.daemon and its
forks summed, the pages they share counted in each).

moto's Scan walks the whole table for every page: the rates describe the emulator, not DynamoDB. So a second
mode runs on a fast emulator, dynalite (testsupport/dynalite.py installs it with npm on first use):

    .venv/bin/python scripts/bench_snapshot.py --emulator dynalite [--items 300000] [--small-items 100000]

There (b) and (c) copy two tables, of --small-items and --items items, without the proxy (a relay in Python would
cap the rate), (c) timed by the job's own snapshot seconds; (v) validates the larger copy. dynalite's own CPU
during each copy, read from /proc, gives its cost per item and the rate one core of it allows (its limit, in place
of (a)); the two sizes split the migrator's client CPU into a fixed part and a marginal part per item. The machine
may be shared: load averages are printed. Ctrl+C or SIGTERM stops the job, the proxy and the emulator (exit 130).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import importlib.metadata
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # testsupport: the emulator, the fault proxy, sample data

import boto3  # noqa: E402
import yaml  # noqa: E402
from botocore.config import Config  # noqa: E402
from deltalake import DeltaTable  # noqa: E402

from migrator.items import item_size_bytes, to_dynamodb_json  # noqa: E402
from migrator.spark import LOCAL_DRIVER_JAVA_OPTIONS  # noqa: E402
from testsupport.dynalite import VERSION as DYNALITE_VERSION  # noqa: E402
from testsupport.dynalite import DynaliteProcess  # noqa: E402
from testsupport.emulator import EmulatorProcess  # noqa: E402
from testsupport.faultproxy import FaultProxy  # noqa: E402
from testsupport.s3_exports import DYNAMODB_JSON, ION, DataFileSpec, create_bucket, dynamodb_numbers, full_lines  # noqa: E402
from testsupport.s3_exports import write_export  # noqa: E402
from testsupport.sample_data import create_sample_table, make_item, seed  # noqa: E402

REGION, ACCESS_KEY, SECRET_KEY = "us-east-1", "bench-access-key", "bench-secret-key"
MASTER = "local[2]"
CHECK_SEGMENTS = 8  # threads that scan a target to verify it
SAMPLE_SECONDS = 0.2
TICKS, PAGE_BYTES = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
JVM, PY_DRIVER, WORKERS = "driver JVM", "Python driver", "Python workers"


@dataclass
class Source:
    table: str
    keys: set[tuple[str, str]]  # (pk, sk) of every item: what each copy must hold
    mean_item_bytes: float


@dataclass
class Copy:
    """One copy of the source: its time, the client CPU it took, and what scanning its target found."""

    how: str
    seconds: float
    client_cpu: float
    check: str = "not checked"
    ok: bool = False
    window_seconds: float = 0.0  # (c): first Scan to last write; (v): first Scan to the report written
    workers_sampled: bool = True  # (c) only: False when no CPU of a forked Python worker was sampled
    peak_rss: dict[str, int] = field(default_factory=dict)  # (c) only: bytes per kind of process
    target: str = ""  # the table a copy wrote
    emulator_cpu: float = 0.0  # on a fast emulator: its CPU-seconds during the copy (verification excluded)
    job_seconds: float = 0.0  # (c), (f): the job's own snapshot seconds, from its summary


# --- DynamoDB helpers -----------------------------------------------------------------------------------
def dynamodb(endpoint_url: str):
    """A boto3 client with a connection per benchmark thread; few retries, so Ctrl+C ends quickly."""
    config = Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=64, read_timeout=300)
    return boto3.client("dynamodb", endpoint_url=endpoint_url, region_name=REGION, config=config,
                        aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)


def in_threads(threads: int, function, arguments) -> list:
    """function over arguments on `threads` threads; on Ctrl+C the calls not yet started are dropped."""
    pool = ThreadPoolExecutor(threads)
    try:
        return list(pool.map(function, arguments))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def write_batch(client, table: str, items: list[dict]) -> None:
    """BatchWriteItem of up to 25 items, resending UnprocessedItems (DynamoDB may take part of a batch)."""
    pending = {table: [{"PutRequest": {"Item": item}} for item in items]}
    while pending:
        pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def parallel_scan(client, table: str, segments: int, **request) -> list[dict]:
    """Every item of the table, one thread per Scan segment."""

    def scan_segment(segment: int) -> list[dict]:
        items, start = [], {}
        while start is not None:
            page = client.scan(TableName=table, Segment=segment, TotalSegments=segments, **request, **start)
            items += page["Items"]
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]} if "LastEvaluatedKey" in page else None
        return items

    return [item for part in in_threads(segments, scan_segment, range(segments)) for item in part]


def new_table(client, prefix: str) -> str:
    table = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_sample_table(client, table)
    return table


def verify(client, copy: Copy, table: str, source: Source, project_keys: bool = True) -> None:
    """Scan the target's keys: the copy is good when its item count and key set are the source's.

    `project_keys=False` scans whole items: moto's ProjectionExpression fails (HTTP 500) on numbers
    of more than 38 digits in plain notation, which is how exports hold the sample's 1E-130.
    """
    request = {"ProjectionExpression": "pk, sk"} if project_keys else {}
    items = parallel_scan(client, table, CHECK_SEGMENTS, **request)
    keys = {(item["pk"]["S"], item["sk"]["N"]) for item in items}
    copy.ok = len(items) == len(source.keys) and keys == source.keys
    copy.check = f"{table}: {len(items):,} items, {len(keys):,} distinct keys: {'OK' if copy.ok else 'MISMATCH'}"
    print(f"    check {copy.check}")


def measure(how: str, work) -> Copy:
    """Run work(); keep its wall time and this process's CPU time (all its threads)."""
    cpu0, started = time.process_time(), time.monotonic()
    work()
    copy = Copy(how, time.monotonic() - started, time.process_time() - cpu0)
    print(f"    {copy.seconds:.1f} s, client CPU {copy.client_cpu:.1f} s")
    return copy


# --- The phases -----------------------------------------------------------------------------------------
def seed_source(client, n: int, payload_bytes: int) -> Source:
    """Create the source table and fill it with items 0..n-1 from 8 threads."""
    items = [make_item(i, payload_bytes) for i in range(n)]
    table, started = new_table(client, "bench-src"), time.monotonic()
    seed(client, table, items, threads=8)
    source = Source(table, {(it["pk"]["S"], it["sk"]["N"]) for it in items}, mean(map(item_size_bytes, items)))
    print(f"source:    {table}: {n:,} items of {source.mean_item_bytes:,.0f} bytes on average "
          f"(migrator.items.item_size_bytes), seeded in {time.monotonic() - started:.1f} s")
    return source


def copy_limit(client, source: Source, threads: int) -> Copy:
    """(a) The emulator's limit: everything scanned by `threads` segments, then written from as many threads."""
    how = f"{threads}-segment parallel Scan, then {threads}-thread BatchWriteItem"
    print(f"\n(a) emulator limit: {how} ...")
    target, items, scanned_at = new_table(client, "bench-a"), [], []

    def work():
        items.extend(parallel_scan(client, source.table, threads))
        scanned_at.append(time.monotonic())
        batches = [items[i : i + 25] for i in range(0, len(items), 25)]
        in_threads(threads, lambda batch: write_batch(client, target, batch), batches)

    copy = measure(how, work)
    print(f"    of which writing {time.monotonic() - scanned_at[0]:.1f} s")
    verify(client, copy, target, source)
    return copy


def copy_plain(client, source: Source, emulator_cpu=None) -> Copy:
    """(b) A plain boto3 copy: one thread, paginated Scan, BatchWriteItem of 25.

    With `emulator_cpu` (a fast emulator's CPU-seconds so far), the emulator's CPU during the copy is kept.
    """
    how = "1 thread: paginated Scan, BatchWriteItem of 25"
    print(f"\n(b) plain boto3: {how} ...")
    target = new_table(client, "bench-b")

    def work():
        for page in client.get_paginator("scan").paginate(TableName=source.table):
            for i in range(0, len(page["Items"]), 25):
                write_batch(client, target, page["Items"][i : i + 25])

    emulator0 = emulator_cpu() if emulator_cpu else 0.0
    copy = measure(how, work)
    copy.window_seconds, copy.target = copy.seconds, target
    if emulator_cpu:
        copy.emulator_cpu = emulator_cpu() - emulator0
        print(f"    emulator CPU {copy.emulator_cpu:.1f} s")
    verify(client, copy, target, source)
    return copy


def copy_migrator(client, emulator_url: str, source: Source, segments: int | None, workdir: Path,
                  emulator_cpu=None, delta: Path | None = None) -> Copy:
    """(c) The migrator as a user runs it; a proxy that injects no faults timestamps its requests.

    With `emulator_cpu` (a fast emulator's CPU-seconds so far), no proxy: a relay in Python would cap a fast
    emulator's rate and share its cores, so the window is the job's own snapshot seconds (planned to complete),
    and the emulator's CPU during the job is kept.

    With `delta`, (f): the same job into a local Delta table at that path (`target.type: delta`), through the
    same kind of proxy. It sends no write the proxy could stamp, so its window is the job's own snapshot
    seconds, which (c)'s summary reports too (`job_seconds`): the two compare by those.
    """
    label = "(f) migrator into a local Delta table" if delta else "(c) migrator"
    print(f"\n{label}: spark-submit --master {MASTER} jobs/migrate.py ...")
    target = str(delta) if delta else f"bench-c-{uuid.uuid4().hex[:8]}"
    job = Job(workdir / f"job-{'f-' if delta else ''}{source.table}.log")
    with contextlib.ExitStack() as stack:
        proxy = None if emulator_cpu else stack.enter_context(
            FaultProxy(emulator_url, fault_rate=0.0, record=True, clock=time.monotonic))
        endpoint_url = proxy.endpoint_url if proxy else emulator_url
        command = spark_submit(write_config(workdir, endpoint_url, source.table, target, segments, delta=bool(delta)))
        print(f"    {shlex.join(command)}")
        emulator0 = emulator_cpu() if emulator_cpu else 0.0
        rusage0, launched = children_cpu(), time.monotonic()
        exit_code = job.run(command)
        exited, rusage = time.monotonic(), children_cpu() - rusage0
        emulator_seconds = emulator_cpu() - emulator0 if emulator_cpu else 0.0
        requests = proxy.recorded if proxy else []  # (operation, body, arrived, answered)
    log = job.log_path.read_text(errors="replace").splitlines()
    reported = next((line.split()[-1] for line in log if line.startswith("  seconds:")), "0")
    job_seconds = float(reported.replace(",", ""))
    if proxy and not delta:
        first_scan = min((r[2] for r in requests if r[0] == "Scan"), default=exited)
        last_write = max((r[3] for r in requests if r[0] == "BatchWriteItem"), default=exited)
        window, where = max(last_write - first_scan, 0.0), "first Scan → last write"
        placed = f", from {first_scan - launched:.1f} s after launch to {exited - last_write:.1f} s before exit"
    else:
        window, where, placed = job_seconds, "the job's snapshot seconds", ""
    plan = next((line.partition("snapshot plan: ")[2] for line in log if "snapshot plan: " in line), "?")
    how = "target.type: delta, a local path" if delta else ', '.join(plan.split(', ')[:2])  # a Delta copy logs no plan
    copy = Copy(f"spark-submit --master {MASTER}; {how}", exited - launched,
                rusage + job.kernel_reaped_worker_cpu(), window_seconds=window, peak_rss=job.peak_rss,
                workers_sampled=job.kernel_reaped_worker_cpu() > 0, target=target, emulator_cpu=emulator_seconds,
                job_seconds=job_seconds)
    print(f"    plan: {plan}")
    print(f"    launch → exit {copy.seconds:.1f} s; {where} {copy.window_seconds:.1f} s{placed}")
    print(f"    client CPU {copy.client_cpu:.1f} s = {rusage:.1f} s waited for (RUSAGE_CHILDREN; {len(job.reaped)} "
          f"orphans waited for here) + {job.kernel_reaped_worker_cpu():.1f} s of workers the kernel reaped (sampled)")
    if emulator_cpu:
        print(f"    emulator CPU {emulator_seconds:.1f} s")
    print(f"    peak RSS: {', '.join(f'{kind} {mib(size)}' for kind, size in job.peak_rss.items())}")
    if exit_code != 0:
        copy.check = f"the job exited with code {exit_code}; its log ends:\n    " + "\n    ".join(log[-40:])
        return copy
    print("\n".join(f"    | {line}" for line in log if line.startswith(("snapshot ", "  "))))  # the job's summary
    if delta:
        verify_delta(copy, delta, source)
    else:
        verify(client, copy, target, source)
    return copy


def verify_delta(copy: Copy, path: Path, source: Source) -> None:
    """Read the Delta table's key columns back (delta-rs): the copy is good when its rows and keys are the source's."""
    rows = DeltaTable(str(path)).to_pyarrow_table(columns=["pk", "sk"]).to_pylist()
    keys = {(row["pk"], str(row["sk"])) for row in rows}  # sk typed decimal(38, 0): str() gives the integer's text
    copy.ok = len(rows) == len(source.keys) and keys == source.keys
    copy.check = f"Delta {path.name}: {len(rows):,} rows, {len(keys):,} distinct keys: {'OK' if copy.ok else 'MISMATCH'}"
    print(f"    check {copy.check}")


def validate_copy(emulator_url: str, source: Source, copy: Copy, segments: int | None, workdir: Path) -> Copy:
    """(v) The validator comparing (c)'s target with the source, launched and sampled as (c) is.

    The proxy stamps requests with the wall clock, which the report file's mtime shares: the window
    ends when the comparison is done and reported, before the JVM shuts down.
    """
    print(f"\n(v) validator: spark-submit --master {MASTER} jobs/validate.py, (c)'s copy against the source ...")
    job, report_path = Job(workdir / "job-v.log"), workdir / "report-v.json"
    with FaultProxy(emulator_url, fault_rate=0.0, record=True, clock=time.time) as proxy:
        config = write_config(workdir, proxy.endpoint_url, source.table, copy.target, segments)
        command = spark_submit(config, "validate.py", "--report", str(report_path))
        print(f"    {shlex.join(command)}")
        rusage0, launched, launched_at = children_cpu(), time.monotonic(), time.time()
        exit_code = job.run(command)
        exited, rusage = time.monotonic(), children_cpu() - rusage0
        scans = [r for r in proxy.recorded if r[0] == "Scan"]  # (operation, body, arrived, answered)
    reported_at = report_path.stat().st_mtime if report_path.exists() else launched_at + exited - launched
    first_scan = min((r[2] for r in scans), default=reported_at)
    log = job.log_path.read_text(errors="replace").splitlines()
    plan = next((line.partition("validating ")[2].partition(": ")[2] for line in log if "validating " in line), "?")
    validation = Copy(f"spark-submit --master {MASTER}; {', '.join(plan.split(', ')[:2])}", exited - launched,
                      rusage + job.kernel_reaped_worker_cpu(), window_seconds=max(reported_at - first_scan, 0.0),
                      peak_rss=job.peak_rss, workers_sampled=job.kernel_reaped_worker_cpu() > 0)  # fmt: skip
    print(f"    plan: {plan}")
    print(f"    launch → exit {validation.seconds:.1f} s; first Scan → report written {validation.window_seconds:.1f} s, "
          f"from {first_scan - launched_at:.1f} s after launch to {launched_at + validation.seconds - reported_at:.1f} s "
          f"before exit")
    print(f"    client CPU {validation.client_cpu:.1f} s; peak RSS: "
          f"{', '.join(f'{kind} {mib(size)}' for kind, size in job.peak_rss.items())}")
    print("\n".join(f"    | {line}" for line in log if line.startswith(("validation ", "  "))))  # the job's summary
    if exit_code != 0 or not report_path.exists():
        validation.check = f"the job exited with code {exit_code}; its log ends:\n    " + "\n    ".join(log[-40:])
        return validation
    counts = json.loads(report_path.read_text())
    n = len(source.keys)
    validation.ok = counts["sourceItems"] == counts["targetItems"] == counts["equal"] == n
    validation.check = (f"report: {counts['sourceItems']:,} source items, {counts['targetItems']:,} target items, "
                        f"{counts['equal']:,} equal: {'OK' if validation.ok else 'MISMATCH'}")  # fmt: skip
    print(f"    check {validation.check}")
    return validation


def spark_submit(config: Path, job: str = "migrate.py", *args: str) -> list[str]:
    log4j = f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}"  # Spark's own logging at WARN
    # The launch docs/snapshot.md recommends for local mode (see migrator.spark.LOCAL_DRIVER_JAVA_OPTIONS).
    java_options = f"{log4j} {LOCAL_DRIVER_JAVA_OPTIONS}"
    return [str(Path(sys.executable).parent / "spark-submit"), "--master", MASTER, "--driver-java-options", java_options,
            str(REPO / "jobs" / job), "--config", str(config), *args]


def write_config(workdir: Path, endpoint_url: str, source: str, target: str, segments: int | None,
                 delta: bool = False) -> Path:
    """The job's YAML: both tables behind the proxy; the split left to the migrator unless --segments.
    `delta`: `target` is a local Delta table's path."""
    host, _, port = endpoint_url.rpartition(":")

    def side(table: str) -> dict:
        return {"type": "dynamodb", "table": table, "region": REGION, "endpoint": {"host": host, "port": int(port)},
                "credentials": {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}}

    target_block = {"type": "delta", "path": target} if delta else {**side(target), "streamChanges": False}
    config = {"source": side(source), "target": target_block, "savepoints": {"path": str(workdir / "savepoints")}}
    if segments:
        config["source"]["scanSegments"] = segments
    path = workdir / "bench-c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


# --- Imports of S3 exports of the same items (d, e) ----------------------------------------------------
IMPORTS = (("d", DYNAMODB_JSON), ("e", ION))
KEYS_DESCRIPTION = {  # the source's keys (sample_data): an export does not record them
    "attributeDefinitions": [{"name": "pk", "type": "S"}, {"name": "sk", "type": "N"}],
    "keySchema": [{"name": "pk", "type": "HASH"}, {"name": "sk", "type": "RANGE"}],
}


@dataclass
class Export:
    output_format: str
    bucket: str
    summary_key: str
    size_bytes: int  # of its gzip data files


def write_exports(emulator_url: str, source: Source, n: int, payload_bytes: int, files: int) -> list[Export]:
    """A full export of the source's items per format, in AWS's layout, in one bucket of the emulator's S3."""
    s3 = boto3.client("s3", endpoint_url=emulator_url, region_name=REGION,
                      aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)  # fmt: skip
    bucket, started = create_bucket(s3, f"bench-exports-{uuid.uuid4().hex[:8]}"), time.monotonic()
    items = [dynamodb_numbers(to_dynamodb_json(make_item(i, payload_bytes))) for i in range(n)]  # as exports hold them
    exports = []
    for _, output_format in IMPORTS:
        lines = full_lines(items, output_format)
        written = write_export(s3, bucket, [DataFileSpec(lines[k::files]) for k in range(files)],
                               output_format=output_format, prefix=f"bench-{output_format.lower()}", table=source.table)  # fmt: skip
        exports.append(Export(output_format, bucket, written.summary_key, sum(map(len, written.bodies.values()))))
    print(f"exports:   s3://{bucket}: {', '.join(f'{e.output_format} {mib(e.size_bytes)}' for e in exports)} of gzip, "
          f"{files} data files each, written in {time.monotonic() - started:.1f} s")
    return exports


def copy_import(client, emulator_url: str, source: Source, export: Export, label: str, workdir: Path) -> Copy:
    """(d), (e) The migrator importing an export, launched and sampled as (c); a proxy timestamps its writes."""
    print(f"\n({label}) migrator import of the {export.output_format} export: spark-submit --master {MASTER} "
          "jobs/migrate.py ...")  # fmt: skip
    target, job = f"bench-{label}-{uuid.uuid4().hex[:8]}", Job(workdir / f"job-{label}.log")
    with FaultProxy(emulator_url, fault_rate=0.0, record=True, clock=time.monotonic) as proxy:
        config = write_import_config(workdir, emulator_url, proxy.endpoint_url, export, target, label)
        command = spark_submit(config)
        rusage0, launched = children_cpu(), time.monotonic()
        exit_code = job.run(command)
        exited, rusage = time.monotonic(), children_cpu() - rusage0
        writes = [r for r in proxy.recorded if r[0] == "BatchWriteItem"]  # (operation, body, arrived, answered)
    first_write = min((r[2] for r in writes), default=exited)
    last_write = max((r[3] for r in writes), default=exited)
    log = job.log_path.read_text(errors="replace").splitlines()
    plan = next((line.partition("import plan: ")[2] for line in log if "import plan: " in line), "?")
    copy = Copy(f"spark-submit --master {MASTER}; {export.output_format}, {', '.join(plan.split(', ')[:2])}",
                exited - launched, rusage + job.kernel_reaped_worker_cpu(),
                window_seconds=max(last_write - first_write, 0.0), peak_rss=job.peak_rss)  # fmt: skip
    print(f"    plan: {plan}")
    print(f"    launch → exit {copy.seconds:.1f} s; first write → last write {copy.window_seconds:.1f} s, "
          f"from {first_write - launched:.1f} s after launch to {exited - last_write:.1f} s before exit")
    print(f"    client CPU {copy.client_cpu:.1f} s; peak RSS: "
          f"{', '.join(f'{kind} {mib(size)}' for kind, size in job.peak_rss.items())}")
    if exit_code != 0:
        copy.check = f"the job exited with code {exit_code}; its log ends:\n    " + "\n    ".join(log[-40:])
        return copy
    print("\n".join(f"    | {line}" for line in log if line.startswith(("import ", "  "))))  # the job's summary
    verify(client, copy, target, source, project_keys=False)
    return copy


def write_import_config(workdir: Path, s3_url: str, dynamodb_url: str, export: Export, target: str, label: str) -> Path:
    """The import's YAML: the export read from the emulator's S3, the target table behind the proxy."""

    def endpoint(url: str) -> dict:
        host, _, port = url.rpartition(":")
        return {"host": host, "port": int(port)}

    credentials = {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}
    config = {
        "source": {"type": "dynamodb-s3-export", "bucket": export.bucket, "manifestKey": export.summary_key,
                   "region": REGION, "endpoint": endpoint(s3_url), "credentials": credentials,
                   "tableDescription": KEYS_DESCRIPTION},
        "target": {"type": "dynamodb", "table": target, "region": REGION, "endpoint": endpoint(dynamodb_url),
                   "credentials": credentials},
        "savepoints": {"path": str(workdir / f"savepoints-{label}")},
    }  # fmt: skip
    path = workdir / f"bench-{label}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


# --- The job's processes, from /proc --------------------------------------------------------------------
# The fields of /proc/<pid>/stat used here (proc(5)): cpu is utime + stime in seconds; start is the start
# time in clock ticks, which tells a process from a later one with the same pid; rss is in bytes.
Stat = namedtuple("Stat", "comm ppid session cpu start rss")


def read_stat(pid: int) -> Stat | None:
    try:
        head, _, rest = Path(f"/proc/{pid}/stat").read_text().rpartition(")")
    except OSError:
        return None  # gone
    f = rest.split()  # f[0] is field 3, state
    cpu = (int(f[11]) + int(f[12])) / TICKS
    return Stat(head.partition("(")[2], int(f[1]), int(f[3]), cpu, int(f[19]), int(f[21]) * PAGE_BYTES)


def children_cpu() -> float:
    return sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])  # user + system seconds


def kind_of(pid: int, comm: str) -> str:
    """Which part of the job a process is, from its name and command line."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return "gone"
    if comm.startswith("python"):
        return WORKERS if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline else PY_DRIVER
    # Spark's launcher JVM runs alone and briefly before spark-class execs the driver JVM: never the peak.
    return JVM if comm == "java" else comm


class Job:
    """spark-submit in a session of its own, sampled from /proc until no process of that session is left."""

    def __init__(self, log_path: Path):
        self.log_path = log_path
        self.seen: dict[tuple[int, int], tuple[str, Stat]] = {}  # (pid, start) -> kind, last sample
        self.peak_rss = dict.fromkeys((JVM, PY_DRIVER, WORKERS), 0)
        self.reaped: set[int] = set()  # job processes re-parented here and waited for here
        # (pid, start) of the daemon's forked workers, fixed when first seen: once the daemon exits, a
        # last sample can show a worker re-parented (to this process or init), no longer a daemon child.
        self.forked: set[tuple[int, int]] = set()
        self._stop = threading.Event()

    def run(self, command: list[str], cwd: Path = REPO) -> int:
        """Run the job to its end and return its exit code; on an error or Ctrl+C, kill all of it. The
        Python workers import `migrator` from `cwd` first (their sys.path starts with it)."""
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        with open(self.log_path, "wb") as log:  # spark-submit relays the Python driver's output too
            self.proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        sampler = threading.Thread(target=self._sample_until_stopped, daemon=True)
        sampler.start()
        try:
            code = self.proc.wait()
            self._wait_for_session()
            return code
        finally:
            self._stop.set()
            sampler.join()
            self._kill_session()  # nothing is left after a normal end
            self.proc.wait()

    def kernel_reaped_worker_cpu(self) -> float:
        """Sampled CPU of pyspark.daemon's forked workers (it ignores SIGCHLD, so the kernel reaps them)."""
        return sum(stat.cpu for (pid, start), (_, stat) in self.seen.items()
                   if (pid, start) in self.forked and pid not in self.reaped)

    def _wait_for_session(self) -> None:
        """After spark-submit exits: reap the job's processes re-parented here until none is left."""
        deadline = time.monotonic() + 30
        while session := self._session():
            for pid in (pid for pid, stat in session.items() if stat.ppid == os.getpid()):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == pid:
                        self.reaped.add(pid)
            if time.monotonic() > deadline:
                print(f"    note: killing job processes still running 30 s after spark-submit: {sorted(session)}")
                self._kill_session()
            time.sleep(0.05)

    def _session(self) -> dict[int, Stat]:
        stats = {int(pid): read_stat(int(pid)) for pid in os.listdir("/proc") if pid.isdigit()}
        return {pid: stat for pid, stat in stats.items() if stat and stat.session == self.proc.pid}

    def _kill_session(self) -> None:
        for pid in self._session():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _sample_until_stopped(self) -> None:
        """Every SAMPLE_SECONDS: each job process's kind, CPU and RSS, and the RSS peak per kind."""
        while not self._stop.wait(SAMPLE_SECONDS):
            rss = dict.fromkeys(self.peak_rss, 0)
            session = self._session()
            kinds = {pid: kind_of(pid, stat.comm) for pid, stat in session.items()}  # changes when a shell execs java
            for pid, stat in session.items():
                self.seen[(pid, stat.start)] = (kinds[pid], stat)
                if kinds[pid] == WORKERS and kinds.get(stat.ppid) == WORKERS:
                    self.forked.add((pid, stat.start))
                rss[kinds[pid]] = rss.get(kinds[pid], 0) + stat.rss
            self.peak_rss = {kind: max(peak, rss[kind]) for kind, peak in self.peak_rss.items()}


# --- Report ---------------------------------------------------------------------------------------------
def mib(size_bytes: int) -> str:
    return f"{size_bytes / 2**20:,.0f} MiB"


def reproduce_command(args: argparse.Namespace) -> str:
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(f"{REPO}/") else sys.executable
    flags = f"--items {args.items} --payload-bytes {args.payload_bytes} --limit-threads {args.limit_threads}"
    segments = f" --segments {args.segments}" if args.segments else ""
    imports = " --no-imports" if args.no_imports else f" --export-files {args.export_files}"
    imports += " --no-delta" if args.no_delta else ""
    if args.emulator == "dynalite":
        flags = f"--emulator dynalite --items {args.items} --small-items {args.small_items} " \
                f"--payload-bytes {args.payload_bytes}"
        imports = ""
    return f"cd {REPO} && {python} scripts/bench_snapshot.py {flags}{segments}{imports}"


def print_header(args: argparse.Namespace) -> dict[str, str]:
    """Machine, versions, load and how to reproduce: what a reader needs to weigh the numbers."""

    def run(*command: str) -> str:
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
        return (done.stdout + done.stderr).strip()

    memory_kib = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal:"))
    cpu = next((line.split(":")[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    dirty = " + uncommitted changes in migrator/" if run("git", "status", "--porcelain", "--", "migrator") else ""
    packages = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in ("pyspark", "moto", "boto3"))
    facts = {
        "machine": f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {memory_kib / 2**20:.1f} GiB, "
        f"{cpu}, Linux {platform.release()}",
        "versions": f"migrator {run('git', 'rev-parse', '--short', 'HEAD')}{dirty}, python {platform.python_version()}, "
        f"{packages}, botocore {importlib.metadata.version('botocore')}, {run('java', '-version').splitlines()[0]}",
        "load": "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()),
    }
    print(f"# dynamodb-migrator snapshot benchmark\nreproduce: {reproduce_command(args)}")
    print(f"machine:   {facts['machine']}\nversions:  {facts['versions']}")
    print(f"load average at start (1/5/15 min): {facts['load']} (other work may share the machine)")
    return facts


def report(args: argparse.Namespace, facts: dict[str, str], source: Source, a: Copy, b: Copy, c: Copy, v: Copy,
           imports: dict[str, Copy] | None = None, f: Copy | None = None) -> None:
    """Rates, ratios, CPU, memory and the goals; then the same as a Markdown table for docs/benchmarks.md.

    `v`: the validation of (c)'s copy; `imports`: (d) and (e), the S3 export imports, by label, when they ran;
    `f`: the copy into a local Delta table, when it ran.
    """
    imports = imports or {}
    n, rss, load = args.items, c.peak_rss, "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    rate = {"a": n / a.seconds, "b": n / b.seconds, "c": n / c.window_seconds if c.window_seconds else 0.0}
    cpu = {key: copy.client_cpu / n * 10_000 for key, copy in zip("abc", (a, b, c))}
    print(f"\n## Results\nitems/s: (a) {rate['a']:,.0f}, (b) {rate['b']:,.0f}, (c) {rate['c']:,.0f} from first Scan "
          f"to last write ({n / c.seconds:,.0f} from launch to exit)")
    print(f"c/a: {rate['c'] / rate['a']:.2f}, c/b: {rate['c'] / rate['b']:.2f} (c from first Scan to last write)")
    if imports:
        formats = dict(IMPORTS)
        print("items/s importing an S3 export, beside (c)'s Scan path: " + ", ".join(
            f"({label}) {formats[label]} {n / copy.window_seconds if copy.window_seconds else 0.0:,.0f} from first "
            f"write to last write ({n / copy.seconds:,.0f} from launch to exit)" for label, copy in imports.items()))
        print("client CPU-s per 10,000 items importing: " + ", ".join(
            f"({label}) {copy.client_cpu / n * 10_000:.2f}" for label, copy in imports.items()))  # fmt: skip
    print(f"client CPU-s per 10,000 items: (b) {cpu['b']:.2f}, (c) {cpu['c']:.2f}  [(a) {cpu['a']:.2f}]")
    rate["v"] = n / v.window_seconds if v.window_seconds else 0.0
    print(f"items compared/s validating (c)'s copy: (v) {rate['v']:,.0f} from first Scan to report written "
          f"({n / v.seconds:,.0f} from launch to exit); client CPU-s per 10,000 items {v.client_cpu / n * 10_000:.2f}")
    print(f"peak RSS of (c): {', '.join(f'{kind} {mib(size)}' for kind, size in rss.items())}")
    print(f"goal: c(first scan→last write) >= 0.8 × a: {'MET' if rate['c'] >= 0.8 * rate['a'] else 'NOT MET'} "
          f"({rate['c']:,.0f} vs {0.8 * rate['a']:,.0f} items/s)")
    # The workers copy every item: a (c) without their CPU is no figure to compare (the sampling missed them).
    cpu_goal = "UNKNOWN (no worker CPU was sampled)" if not c.workers_sampled else "MET" if cpu["c"] < cpu["b"] else "NOT MET"
    print(f"goal: client CPU per item c < b: {cpu_goal} ({cpu['c']:.2f} vs {cpu['b']:.2f} CPU-s per 10k items)")
    print(f"goal: validation no slower than the copy, v >= c (first Scan onwards): "
          f"{'MET' if rate['v'] >= rate['c'] else 'NOT MET'} ({rate['v']:,.0f} vs {rate['c']:,.0f} items/s; "
          f"launch → exit {v.seconds:.1f} s vs {c.seconds:.1f} s)")
    if f is not None:
        report_delta(n, c, f)
    print(f"load average at end (1/5/15 min): {load}")
    for copy in (a, b, c, v, *imports.values(), *([f] if f else [])):
        print(f"verified: {copy.check}" if copy.ok else f"FAILED: {copy.how}: {copy.check}")
    print(f"\n## Markdown\n\nSnapshot copy of {n:,} items ({source.mean_item_bytes:,.0f} bytes on average) on the "
          f"moto emulator; {facts['machine']}; {facts['versions']}; load average {facts['load'].split()[0]} at "
          f"start, {load.split()[0]} at end. Reproduce: `{reproduce_command(args)}`\n")
    print("| run | how | seconds | items/s | vs (a) | client CPU-s / 10k items | peak RSS |")
    print("|---|---|---:|---:|---:|---:|---|")
    rows = [("(a) emulator limit", a.how, a.seconds, f"{cpu['a']:.2f}", ""),
            ("(b) plain boto3", b.how, b.seconds, f"{cpu['b']:.2f}", ""),
            ("(c) migrator, first Scan → last write", c.how, c.window_seconds, "", ""),
            ("(c) migrator, launch → exit", "the same run, JVM start-up and shutdown included", c.seconds,
             f"{cpu['c']:.2f}", ", ".join(f"{kind} {mib(size)}" for kind, size in rss.items())),
            ("(v) validator of (c)'s copy, first Scan → report written", v.how, v.window_seconds, "", ""),
            ("(v) validator, launch → exit", "the same run, JVM start-up and shutdown included", v.seconds,
             f"{v.client_cpu / n * 10_000:.2f}", ", ".join(f"{kind} {mib(size)}" for kind, size in v.peak_rss.items()))]
    for label, copy in imports.items():
        name = f"({label}) migrator, {dict(IMPORTS)[label]} export import"
        rows += [(f"{name}, first write → last write", copy.how, copy.window_seconds, "", ""),
                 (f"{name}, launch → exit", "the same run, JVM start-up and shutdown included", copy.seconds,
                  f"{copy.client_cpu / n * 10_000:.2f}", ", ".join(f"{k} {mib(v)}" for k, v in copy.peak_rss.items()))]
    if f is not None:
        rows += [("(c) migrator, the job's snapshot seconds", "the same run as (c), by its summary", c.job_seconds, "", ""),
                 ("(f) migrator into a local Delta table, the job's snapshot seconds", f.how, f.job_seconds, "", ""),
                 ("(f) migrator into Delta, launch → exit", "the same run, JVM start-up and shutdown included", f.seconds,
                  f"{f.client_cpu / n * 10_000:.2f}", ", ".join(f"{k} {mib(v)}" for k, v in f.peak_rss.items()))]
    for run, how, seconds, cpu_10k, peak in rows:
        items_per_second = n / seconds if seconds else 0.0
        print(f"| {run} | {how} | {seconds:,.1f} | {items_per_second:,.0f} | {items_per_second / rate['a']:.2f} "
              f"| {cpu_10k} | {peak} |")


def report_delta(n: int, c: Copy, f: Copy) -> None:
    """(f) against (c): the same items into a local Delta table and into the emulator's DynamoDB, as ratios."""
    rate_c, rate_f = (n / copy.job_seconds if copy.job_seconds else 0.0 for copy in (c, f))
    cpu_c, cpu_f = (copy.client_cpu / n * 10_000 for copy in (c, f))
    print(f"items/s into a local Delta table: (f) {rate_f:,.0f} by the job's snapshot seconds ({n / f.seconds:,.0f} "
          f"from launch to exit), (c) into DynamoDB {rate_c:,.0f} ({n / c.seconds:,.0f}); f/c {rate_f / rate_c:.2f} "
          f"({c.seconds / f.seconds:.2f} from launch to exit)" if rate_c else "items/s into Delta: (c) has no seconds")
    print(f"client CPU-s per 10,000 items: (f) {cpu_f:.2f}, (c) {cpu_c:.2f}; f/c {cpu_f / cpu_c:.2f}")
    print(f"goal: the snapshot into Delta at least as fast as into the emulator's DynamoDB, f >= c: "
          f"{'MET' if rate_f >= rate_c else 'NOT MET'} ({rate_f:,.0f} vs {rate_c:,.0f} items/s)")


# --- On a fast emulator (dynalite) -------------------------------------------------------------------------
def benchmark_fast(args: argparse.Namespace, dynalite: DynaliteProcess, workdir: Path) -> int:
    """On dynalite: (b) and (c) at two table sizes, (v) on the larger copy, (f) the larger into Delta; the
    emulator's CPU from /proc.

    dynalite answers on one core (node), so 1 / (its CPU per copied item) is the most any client can copy per
    second; two sizes split the migrator's client CPU into a fixed part and a marginal part per item.
    """
    facts = print_header(args)
    dynalite.start()
    print(f"emulator:  dynalite {DYNALITE_VERSION} at {dynalite.endpoint_url} (pid {dynalite.pid})")
    client = dynamodb(dynalite.endpoint_url)
    sources = [seed_source(client, n, args.payload_bytes) for n in (args.small_items, args.items)]
    plain = [copy_plain(client, source, dynalite.cpu_seconds) for source in sources]
    copies = [copy_migrator(client, dynalite.endpoint_url, source, args.segments, workdir, dynalite.cpu_seconds)
              for source in sources]  # fmt: skip
    v = validate_copy(dynalite.endpoint_url, sources[1], copies[1], args.segments, workdir)
    f = None if args.no_delta else copy_migrator(client, dynalite.endpoint_url, sources[1], args.segments, workdir,
                                                 dynalite.cpu_seconds, delta=workdir / "delta-f")  # fmt: skip
    report_fast(args, facts, sources, plain, copies, v)
    if f is not None:
        report_delta(args.items, copies[1], f)
    return 0 if all(copy.ok for copy in (*plain, *copies, v, *([f] if f else []))) else 1


def split_cpu(sizes: tuple[int, int], copies: list[Copy]) -> tuple[float, float]:
    """(fixed CPU-seconds, marginal µs per item) of a straight line through two copies' client CPU."""
    marginal = (copies[1].client_cpu - copies[0].client_cpu) / (sizes[1] - sizes[0])
    return copies[0].client_cpu - marginal * sizes[0], marginal * 1e6


def report_fast(args: argparse.Namespace, facts: dict[str, str], sources: list[Source], plain: list[Copy],
                copies: list[Copy], v: Copy) -> None:
    """The emulator's limit, the migrator's share of it, and client CPU split into fixed and marginal parts."""
    sizes, load = (args.small_items, args.items), "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    c, n = copies[1], args.items
    emulator_us = c.emulator_cpu / n * 1e6
    limit = 1e6 / emulator_us if emulator_us else 0.0
    rate = n / c.window_seconds if c.window_seconds else 0.0
    fixed, marginal = split_cpu(sizes, copies)
    plain_fixed, plain_marginal = split_cpu(sizes, plain)
    print(f"\n## Results on dynalite\nemulator CPU per copied item: (c) {emulator_us:.0f} µs at {n:,} items, "
          f"{copies[0].emulator_cpu / sizes[0] * 1e6:.0f} µs at {sizes[0]:,}; (b) "
          f"{plain[1].emulator_cpu / n * 1e6:.0f} µs. One core's limit: {limit:,.0f} items/s")
    print(f"(c) {rate:,.0f} items/s over the job's snapshot seconds ({n / c.seconds:,.0f} from launch to exit): "
          f"{rate / limit if limit else 0.0:.2f} of the limit; (b) {n / plain[1].seconds:,.0f} items/s")
    print(f"client CPU of (c): {copies[0].client_cpu:.1f} s at {sizes[0]:,} items, {c.client_cpu:.1f} s at {n:,}: "
          f"fixed {fixed:.1f} CPU-s, marginal {marginal:.0f} µs per item")
    print(f"client CPU of (b): marginal {plain_marginal:.0f} µs per item (fixed {plain_fixed:.1f} CPU-s)")
    print(f"(v) validator of (c)'s copy: {n / v.window_seconds if v.window_seconds else 0.0:,.0f} items compared/s "
          f"(first Scan → report written), client CPU {v.client_cpu / n * 1e6:.0f} µs per item")
    goals = [("the copy at >= 0.9 of the emulator's one-core limit", rate >= 0.9 * limit, f"{rate / limit:.2f}"),
             ("marginal client CPU <= 30 µs per item", marginal <= 30, f"{marginal:.0f} µs"),
             ("fixed client CPU <= 3 CPU-s", fixed <= 3, f"{fixed:.1f} CPU-s")]  # fmt: skip
    for goal, met, figure in goals:
        print(f"goal: {goal}: {'MET' if met else 'NOT MET'} ({figure})")
    print(f"load average at end (1/5/15 min): {load}")
    for copy in (*plain, *copies, v):
        print(f"verified: {copy.check}" if copy.ok else f"FAILED: {copy.how}: {copy.check}")
    print(f"\n## Markdown\n\nSnapshot copy on dynalite {DYNALITE_VERSION} of {sizes[0]:,} and {n:,} items "
          f"({sources[1].mean_item_bytes:,.0f} bytes on average); {facts['machine']}; {facts['versions']}; load "
          f"average {facts['load'].split()[0]} at start, {load.split()[0]} at end. Reproduce: "
          f"`{reproduce_command(args)}`\n")
    print("| run | items | seconds | items/s | of the emulator's limit | emulator µs / item | client CPU-s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, runs in (("(b) plain boto3", plain), ("(c) migrator, snapshot seconds", copies)):
        for size, copy in zip(sizes, runs):
            per_second = size / copy.window_seconds if copy.window_seconds else 0.0
            print(f"| {label} | {size:,} | {copy.window_seconds:,.1f} | {per_second:,.0f} | "
                  f"{per_second / limit if limit else 0.0:.2f} | {copy.emulator_cpu / size * 1e6:.0f} | "
                  f"{copy.client_cpu:.1f} |")


# --- Main -----------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000, help="items in the source table (default 100,000)")
    parser.add_argument("--payload-bytes", type=int, default=207,
                        help="make_item's payload; 207 makes items of about 500 bytes (default)")
    parser.add_argument("--segments", type=int, help="source.scanSegments for (c) (default: the migrator plans it)")
    parser.add_argument("--limit-threads", type=int, default=8, help="Scan segments and write threads of (a)")
    parser.add_argument("--export-files", type=int, default=8, help="data files of each export of (d), (e)")
    parser.add_argument("--no-imports", action="store_true", help="skip (d) and (e), the S3 export imports")
    parser.add_argument("--no-delta", action="store_true", help="skip (f), the copy into a local Delta table")
    parser.add_argument("--emulator", choices=("moto", "dynalite"), default="moto",
                        help="moto (default), or dynalite: (b) and (c) at two sizes and (v), with the emulator's "
                        "CPU per item (no S3, so no imports)")
    parser.add_argument("--small-items", type=int,
                        help="with dynalite: the smaller table, to split client CPU into fixed and marginal "
                        "(default: a third of --items)")
    args = parser.parse_args(argv)
    if args.items < 1 or args.payload_bytes < 0 or args.limit_threads < 1 or (args.segments or 1) < 1:
        parser.error("--items, --segments and --limit-threads must be positive, --payload-bytes not negative")
    if args.export_files < 1:
        parser.error("--export-files must be positive")
    args.small_items = args.small_items or max(args.items // 3, 1)
    if args.emulator == "dynalite" and not 0 < args.small_items < args.items:
        parser.error("--small-items must be positive and below --items")
    return args


def interrupt(signum, frame) -> None:
    """Ctrl+C or SIGTERM: unwind through every cleanup block; a second signal must not cut them short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def benchmark(args: argparse.Namespace, emulator: EmulatorProcess, workdir: Path) -> int:
    """Seed the source, copy it three ways, validate the migrator's copy, import it from two exports; report;
    1 if a copy or the validation is wrong, or a job failed."""
    facts = print_header(args)
    emulator.start()
    print(f"emulator:  {emulator.endpoint_url} (pid {emulator.pid})")
    client = dynamodb(emulator.endpoint_url)
    source = seed_source(client, args.items, args.payload_bytes)
    a = copy_limit(client, source, args.limit_threads)
    b = copy_plain(client, source)
    c = copy_migrator(client, emulator.endpoint_url, source, args.segments, workdir)
    v = validate_copy(emulator.endpoint_url, source, c, args.segments, workdir)
    imports: dict[str, Copy] = {}
    if not args.no_imports:  # written after (c), so (a) to (c) run as they always have
        exports = write_exports(emulator.endpoint_url, source, args.items, args.payload_bytes, args.export_files)
        for (label, _), export in zip(IMPORTS, exports):
            imports[label] = copy_import(client, emulator.endpoint_url, source, export, label, workdir)
    f = None if args.no_delta else copy_migrator(client, emulator.endpoint_url, source, args.segments, workdir,
                                                 delta=workdir / "delta-f")  # fmt: skip
    report(args, facts, source, a, b, c, v, imports, f)
    return 0 if all(copy.ok for copy in (a, b, c, v, *imports.values(), *([f] if f else []))) else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress shows as it happens, also in a file
    for signum in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a shell's `&` would have it ignored
        signal.signal(signum, interrupt)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("needs Linux: prctl(PR_SET_CHILD_SUBREAPER) failed")
    workdir = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    emulator = DynaliteProcess() if args.emulator == "dynalite" else EmulatorProcess()
    try:
        if args.emulator == "dynalite":
            return benchmark_fast(args, emulator, workdir)
        return benchmark(args, emulator, workdir)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping what the benchmark started", file=sys.stderr)
        return 130
    finally:
        emulator.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
