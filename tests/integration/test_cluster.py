"""spark-submit to a real multi-executor master, with a planted secret that must leak nowhere.

`local-cluster[2,1,1024]` starts a master, a worker and two executor JVMs, each with its own
Python workers: nothing can rely on driver and executors sharing a process. The config's
credentials carry a planted secret; afterwards the job's output, its savepoint, Spark's
event log (which records every Spark property) and the executors' logs are searched for it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest
from deltalake import DeltaTable

from migrator.items import from_dynamodb_json
from testsupport.all_types import assert_same_items
from testsupport.endpoint import put_items, scan_all, side
from testsupport.jobs import REPO, job_env, write_config
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

PLANTED_SECRET = "planted-secret-6e1f0c4b9a"
PLANTED_SESSION_TOKEN = "planted-token-77aa01"


def files_under(directory: Path):
    """Every file below `directory`, less Hadoop's binary .crc checksum files."""
    return [p for p in directory.rglob("*") if p.is_file() and p.suffix != ".crc"]


def build_package(output: Path) -> Path:
    """The --py-files zip, built by the command line docs/cluster.md tells users to run."""
    built = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "package.py"), str(output)],
        cwd=REPO, capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    return Path(built.stdout.strip())


@pytest.mark.e2e
def test_copy_on_two_executors_leaks_no_secret(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("cluster"), table_name("cluster-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(1_500))
    credentials = {"accessKey": "AKIAPLANTED", "secretKey": PLANTED_SECRET, "sessionToken": PLANTED_SESSION_TOKEN}
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=6, credentials=credentials),
            "target": side(endpoint_url, target, credentials=credentials),
        },
    )
    events = tmp_path / "events"
    events.mkdir()
    archive = build_package(tmp_path / "dynamodb-migrator.zip")
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local-cluster[2,1,1024]",
        "--conf", "spark.eventLog.enabled=true",
        "--conf", f"spark.eventLog.dir={events}",
        "--conf", "spark.eventLog.compress=false",  # Spark 4 compresses event logs by default
        "--py-files", str(archive),
        "--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}",
        str(REPO / "jobs" / "migrate.py"), "--config", str(config),
    ]  # fmt: skip
    result = subprocess.run(command, cwd=REPO, env=job_env(), capture_output=True, text=True, timeout=600)
    # Spark 4 writes rolling event logs into eventlog_v2_<app id>/; local-cluster ignores
    # SPARK_WORKER_DIR, so executor logs land in $SPARK_HOME/work/<app id>.
    (app_id,) = {re.search(r"app-\d+-\d+", str(path)).group(0) for path in files_under(events)}
    work = Path(pyspark.__file__).parent / "work" / app_id

    assert result.returncode == 0, result.stdout + result.stderr
    assert "items written:   1,500" in result.stdout
    assert_same_items(make_items(1_500), scan_all(dynamodb, target))
    event_lines = [json.loads(line) for path in files_under(events) for line in path.read_text().splitlines()]
    executors = {e["Executor ID"] for e in event_lines if e["Event"] == "SparkListenerExecutorAdded"}
    assert executors == {"0", "1"}
    task_hosts = {e["Task Info"]["Executor ID"] for e in event_lines if e["Event"] == "SparkListenerTaskEnd"}
    assert task_hosts <= {"0", "1"} and task_hosts, "tasks ran on the executors"

    searched = {"stdout": result.stdout, "stderr": result.stderr}
    for path in files_under(events) + files_under(work) + files_under(tmp_path / "savepoints"):
        searched[str(path)] = path.read_text(errors="replace")
    assert any("savepoint_" in name for name in searched)
    assert any("stderr" in name for name in searched if name.startswith(str(work))), "executor logs were searched"
    for name, text in searched.items():
        assert PLANTED_SECRET not in text, f"the secret key leaked into {name}"
        assert PLANTED_SESSION_TOKEN not in text, f"the session token leaked into {name}"
    shutil.rmtree(work)


def executor_pids(job_pid: int) -> list[int]:
    """PIDs of the executor JVMs started for the job (CoarseGrainedExecutorBackend)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "CoarseGrainedExecutorBackend" in cmdline:
            pids.append(int(proc.name))
    return pids


def copy_losing_an_executor(config: Path, savepoint_dir: Path) -> str:
    """Runs the copy on two executors and kills one with SIGKILL once a segment is saved; the job's output."""
    command = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local-cluster[2,1,1024]",
        "--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}",
        str(REPO / "jobs" / "migrate.py"), "--config", str(config),
    ]  # fmt: skip
    job = subprocess.Popen(
        command, cwd=REPO, env=job_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 180
    while not any(_copied(savepoint_dir)) and time.monotonic() < deadline:
        assert job.poll() is None, job.stdout.read()
        time.sleep(0.05)
    victims = executor_pids(job.pid)
    assert victims, "no executor JVM found"
    os.kill(victims[0], signal.SIGKILL)

    output, _ = job.communicate(timeout=600)
    shutil.rmtree(Path(pyspark.__file__).parent / "work", ignore_errors=True)
    assert job.returncode == 0, output
    assert "Lost executor" in output, "Spark saw the executor go mid-job"
    return output


@pytest.mark.e2e
def test_losing_an_executor_mid_copy_still_ends_exact(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("lose"), table_name("lose-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(3_000))
    config = write_config(
        tmp_path,
        {"source": side(endpoint_url, source, scanSegments=12), "target": side(endpoint_url, target)},
    )

    output = copy_losing_an_executor(config, tmp_path / "savepoints")

    assert "segments:        12 of 12" in output and "items written:   3,000" in output
    assert_same_items(make_items(3_000), scan_all(dynamodb, target))


@pytest.mark.e2e
def test_losing_an_executor_mid_copy_into_delta_commits_each_segment_once(dynamodb, endpoint_url, table_name, tmp_path):
    """Segments the lost executor was running run again on the other: files it wrote but never returned to
    the driver are in no commit, and no segment is committed twice (docs/delta.md, exactly once)."""
    source, lake = table_name("lose-delta"), tmp_path / "lake"
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(3_000))
    config = write_config(
        tmp_path,
        {"source": side(endpoint_url, source, scanSegments=12), "target": {"type": "delta", "path": str(lake)}},
    )

    output = copy_losing_an_executor(config, tmp_path / "savepoints")

    assert "segments:        12 of 12" in output and "items written:   3,000" in output
    rows = DeltaTable(str(lake)).to_pyarrow_table()["_item"].to_pylist()
    items = [from_dynamodb_json(json.loads(text)) for text in rows]
    assert len(items) == 3_000, "a row was written twice or lost"
    assert_same_items(make_items(3_000), items)
    segment_ids = [
        txn["appId"] for log in sorted((lake / "_delta_log").glob("*.json"))
        for line in log.read_text().splitlines() for kind, txn in json.loads(line).items()
        if kind == "txn" and "-segment-" in txn["appId"]
    ]  # fmt: skip
    assert len(segment_ids) == len(set(segment_ids)) == 12


def _copied(savepoint_dir: Path) -> list[int]:
    import yaml

    from migrator.config.segments import SegmentRanges

    for path in savepoint_dir.glob("savepoint_*.yaml"):
        return list(SegmentRanges.parse(yaml.safe_load(path.read_text()).get("skipSegments") or []))
    return []
