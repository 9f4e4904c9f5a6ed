"""What a normal run prints: the migrator's lines, not Spark's noise; a log4j configuration of
the user's own is honoured as written; `--log-format json` gives one JSON object per line.

Through spark-submit, as users run it, without the README's `-Dlog4j2.configurationFile` unless
the test is about one.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from migrator.spark import Silencer
from testsupport.endpoint import put_items, side
from testsupport.jobs import drain, run_job, start_job, wait_for_output, write_config
from testsupport.replication import Changes, wait_until_converged
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

# Spark's WARN lines that a normal run must not show (issue 14, "Quiet logs").
NOISE = (
    "Failed to cancel job group",
    "Current batch is falling behind",
    "spark.sql.adaptive.enabled is not supported in streaming",
)


def a_copy(dynamodb, endpoint_url: str, table_name, tmp_path: Path, **target) -> Path:
    source, copy = table_name("quiet"), table_name("quiet-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(40))
    return write_config(tmp_path, {"source": side(endpoint_url, source, scanSegments=2),
                                   "target": side(endpoint_url, copy, **target),
                                   "checkpointLocation": str(tmp_path / "checkpoint")})  # fmt: skip


@pytest.mark.e2e
def test_a_replication_started_and_stopped_shows_none_of_sparks_noise(dynamodb, endpoint_url, table_name, tmp_path):
    config = a_copy(dynamodb, endpoint_url, table_name, tmp_path, streamChanges=True)
    source, target = (yaml_side["table"] for yaml_side in _sides(config))
    lines: list[str] = []
    job = start_job(config, log4j_config=None)
    wait_for_output(job, "replicating changes of", lines)
    reader = drain(job, lines)
    Changes(dynamodb, source, 30).write()
    wait_until_converged(dynamodb, source, target)
    os.killpg(job.pid, signal.SIGINT)  # Ctrl+C reaches the terminal's whole process group
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    reader.join(timeout=10)

    output = "".join(lines)
    assert "replication stopped" in output, output[-3000:]
    shown = [noise for noise in NOISE if noise in output]
    assert not shown, output[-5000:]


@pytest.mark.e2e
def test_the_users_own_log4j_configuration_is_honoured(dynamodb, endpoint_url, table_name, tmp_path):
    own = tmp_path / "log4j2.properties"
    own.write_text(
        "rootLogger.level = info\nrootLogger.appenderRef.stdout.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\nappender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\nappender.console.layout.pattern = %p %c{1}: %m%n\n"
    )
    config = a_copy(dynamodb, endpoint_url, table_name, tmp_path)

    finished = run_job(config, spark_submit=True, spark_conf={"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={own}"},
                       timeout=300)  # fmt: skip

    output = finished.stdout + finished.stderr
    assert finished.returncode == 0, output[-3000:]
    # Logged while the copy's Spark jobs run, after the session started: the user's INFO level held.
    assert "INFO DAGScheduler: Job " in output, output[-3000:]


def test_log_format_json_writes_the_migrators_lines_as_json_objects(dynamodb, endpoint_url, table_name, tmp_path):
    config = a_copy(dynamodb, endpoint_url, table_name, tmp_path)

    finished = run_job(config, args=("--log-format", "json"), timeout=300)

    assert finished.returncode == 0, finished.stderr[-3000:]
    records = [json.loads(line) for line in finished.stderr.splitlines() if line.startswith("{")]
    assert any(r["logger"] == "migrator.snapshot.progress" and "snapshot:" in r["message"] for r in records), records
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert " INFO migrator." not in finished.stderr, "a migrator line in the text format"


def _sides(config: Path):
    import yaml

    document = yaml.safe_load(config.read_text())
    return document["source"], document["target"]


def test_loggers_silenced_while_a_replication_stops_get_their_levels_back(spark):
    """A notebook's session goes on after a replication stops: a logger silenced for the stop that had no
    level of its own follows `setLogLevel` again, one with its own level gets it back."""
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    streaming, scheduler = "org.apache.spark.sql.execution.streaming", "org.apache.spark.scheduler.DAGScheduler"

    def own_levels() -> dict[str, str | None]:
        loggers = log4j.LogManager.getContext(False).getConfiguration().getLoggers()
        return {name: loggers.get(name).getLevel().toString() if loggers.containsKey(name) else None for name in (streaming, scheduler)}

    before = own_levels()
    assert before[streaming] is None and before[scheduler] is not None  # DAGScheduler is one of QUIET_LOGGERS
    with Silencer(spark, (streaming, scheduler), ("py4j.clientserver",)) as quiet:
        quiet.silence()
        assert own_levels() == {streaming: "OFF", scheduler: "OFF"}
        assert not logging.getLogger("py4j.clientserver").isEnabledFor(logging.CRITICAL)
    assert own_levels() == before
    assert logging.getLogger("py4j.clientserver").level == logging.NOTSET
    spark.sparkContext.setLogLevel("INFO")
    try:
        assert log4j.LogManager.getLogger(f"{streaming}.MicroBatchExecution").getLevel().toString() == "INFO"
    finally:
        spark.sparkContext.setLogLevel("WARN")


def test_waiting_for_running_tasks_outlasts_a_cancelled_jobs_killed_task(spark):
    """A cancelled job ends before its task does (Spark kills the task's Python worker a moment
    later), so what the killed task logs could come after a stop's reports got their levels back;
    the stop waits until no task runs."""
    from migrator.spark import running_tasks, wait_for_running_tasks

    context = spark.sparkContext
    runner = threading.Thread(target=_run_an_endless_task, args=(context,))
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not running_tasks(spark):
            assert time.monotonic() < deadline, "the endless task never started"
            time.sleep(0.05)
    finally:
        context.cancelJobGroup("endless")
        runner.join(timeout=60)
    assert wait_for_running_tasks(spark, 60)
    assert running_tasks(spark) == 0


def _run_an_endless_task(context) -> None:
    def endless(_):
        while True:
            time.sleep(0.05)

    context.setJobGroup("endless", "a task only a cancel ends", interruptOnCancel=True)
    try:
        context.parallelize([1], 1).foreach(endless)
    except Exception:  # the cancel, as the test means it
        pass


def test_running_tasks_counts_each_task_from_its_start_to_its_end(spark, tmp_path):
    """The stop's wait is only as good as this count: tasks that have started count at once (Spark's
    status store, which the UI reads, is updated at most every 100 ms and can miss them)."""
    from migrator.spark import running_tasks

    context, release = spark.sparkContext, tmp_path / "release"

    def held(index: int, _rows):
        (tmp_path / f"started-{index}").touch()
        deadline = time.monotonic() + 120
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return iter([index])

    runner = threading.Thread(target=lambda: context.parallelize(range(2), 2).mapPartitionsWithIndex(held).collect())
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"started-{i}").exists() for i in range(2)):
            assert time.monotonic() < deadline, "the two tasks never started"
            time.sleep(0.02)
        assert running_tasks(spark) == 2
    finally:
        release.touch()
        runner.join(timeout=60)
    assert running_tasks(spark) == 0
