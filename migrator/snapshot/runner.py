"""Run the snapshot on Spark: one small Spark job per unit of work, a bounded number at once.

A unit is a scan segment of a table copy or of an export written, or a data file of an S3 export
import; each kind says how to run it with a `UnitJobs`. A job per
unit lets the driver know the moment a unit is done, so the savepoint is written then, and
lets it retry one unit when its failure is transient (an executor lost, retries exhausted
under throttling) without rerunning the others. Each job's description names the phase and
the unit in the Spark UI.
"""

from __future__ import annotations

import logging
import re
import signal
import threading
from contextlib import contextmanager
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterator, TypeVar

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from migrator.target.delta_file_merge import SparkExecutors


log = logging.getLogger(__name__)

SEGMENT_ATTEMPTS = 3  # attempts per unit, segment or file

Task = TypeVar("Task")
Outcome = TypeVar("Outcome")  # has `ok` and `error` (a MigratorError, with `retryable`)
Result = TypeVar("Result")


@dataclass(frozen=True)
class UnitJobs(Generic[Task, Outcome]):
    """How to run one kind of unit as a Spark job.

    `work` runs on an executor and returns an outcome, never raises (its error pickles back
    intact); `describe` names the job in the Spark UI; `job_failed` is the outcome of a job
    that Spark itself failed (executor lost, task killed), which is worth retrying.
    `attempt`, when set, runs one attempt of a unit on the driver in place of the single
    `run_job`: for units done in several Spark jobs (an export's segment in pieces); it stops
    starting jobs once its `threading.Event` is set (Ctrl+C, another unit's failure).
    """

    work: Callable[[Task], Outcome]
    describe: Callable[[Task], str]
    job_failed: Callable[[Task, str], Outcome]
    unit: str = "unit"  # "segment", "file": in thread names and log lines
    attempt: Callable[[SparkSession, Task, "UnitJobs", threading.Event], Outcome] | None = None


def run_units(
    spark: SparkSession,
    tasks: list[Any],
    concurrency: int,
    on_done: Callable[[Any], None],
    jobs: UnitJobs,
) -> None:
    """Run every unit, `concurrency` at once; call `on_done` as each finishes; raise the first terminal failure."""
    stop = threading.Event()
    with plain_ctrl_c(), ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=jobs.unit) as pool:
        futures: list[Future] = [pool.submit(_run_unit, spark, task, stop, on_done, jobs) for task in tasks]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failures = [f.exception() for f in done if f.exception() is not None]
            if failures:
                raise failures[0]
        except BaseException:  # the first failure, or Ctrl+C: stop what runs, start nothing new
            stop.set()
            for future in futures:
                future.cancel()
            cancel_jobs(spark)
            raise


def run_action(spark: SparkSession, action: Callable[[], Result], name: str) -> Result:
    """Run one Spark action (a `collect`) in a thread while the main thread waits for it.

    Ctrl+C and SIGTERM then interrupt the main thread's wait, never a py4j call in progress,
    which py4j would log as errors with tracebacks and whose connection would break. On any
    interruption or failure the running jobs are cancelled and the exception goes on.
    """
    with plain_ctrl_c(), ThreadPoolExecutor(max_workers=1, thread_name_prefix=name) as pool:
        future = pool.submit(action)
        try:
            return future.result()
        except BaseException:
            cancel_jobs(spark)
            raise


def delta_executors(spark: SparkSession, name: str) -> SparkExecutors:
    """Where a Delta MERGE's (or rewrite's) tasks run: Spark jobs waited on as `run_action` waits."""
    return SparkExecutors(spark, lambda collect: run_action(spark, collect, name))


@contextmanager
def plain_ctrl_c() -> Iterator[None]:
    """Ctrl+C raises KeyboardInterrupt without calling into the JVM.

    PySpark's own SIGINT handler calls cancelAllJobs through py4j first; under spark-submit
    the JVM got the same signal and is shutting down, so that call fails and its py4j error
    replaces the KeyboardInterrupt: the user would see a traceback instead of "rerun to resume".
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def cancel_jobs(spark: SparkSession) -> None:
    """Cancel running segment jobs; the JVM may already be gone (Ctrl+C reaches it too)."""
    try:
        spark.sparkContext.cancelAllJobs()
    except Py4JError:
        log.debug("could not cancel Spark jobs: the JVM is shutting down")


# The last line of a Python traceback that ended in one of our errors: the message after the class.
_OUR_ERROR_LINE = re.compile(r"^migrator\.errors\.\w+: (.+)$", re.MULTILINE)


def failed_job_cause(exc: Exception) -> str:
    """The cause of a failed Spark job in one line: the migrator's own error when the trace holds one
    (an error raised inside a task reaches the driver only as the text of its traceback)."""
    text = str(exc)
    ours = _OUR_ERROR_LINE.findall(text)
    cause = ours[-1].strip() if ours else (text.strip().splitlines() or [type(exc).__name__])[0]
    return cause[:400]


def _run_unit(
    spark: SparkSession, task: Any, stop: threading.Event, on_done: Callable[[Any], None], jobs: UnitJobs
) -> None:
    if stop.is_set():
        return
    spark.sparkContext.setJobDescription(jobs.describe(task))
    for attempt in range(1, SEGMENT_ATTEMPTS + 1):
        outcome = jobs.attempt(spark, task, jobs, stop) if jobs.attempt else run_job(spark, task, jobs)
        if outcome.ok:
            on_done(outcome)
            return
        error = outcome.error
        if stop.is_set() or not error.retryable or attempt == SEGMENT_ATTEMPTS:
            raise error
        log.warning("%s; retrying the %s (attempt %d of %d)", error, jobs.unit, attempt + 1, SEGMENT_ATTEMPTS)


def driver_addresses(spark: SparkSession) -> tuple[str, str]:
    """Where the driver listens and the address executors reach it at: Spark's own
    (`spark.driver.bindAddress`, which defaults to `spark.driver.host`)."""
    conf = spark.sparkContext.getConf()
    host = conf.get("spark.driver.host") or "localhost"
    return conf.get("spark.driver.bindAddress") or host, host


def run_job(spark: SparkSession, task: Any, jobs: UnitJobs) -> Any:
    """Run `jobs.work` on `task` as one Spark job of one task; its outcome, or `job_failed`'s."""
    try:
        return spark.sparkContext.parallelize([task], 1).map(jobs.work).collect()[0]
    except Py4JError as exc:  # the Spark job itself failed: executor lost, task killed, cancelled
        cause = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        return jobs.job_failed(task, f"Spark job failed: {cause}")
