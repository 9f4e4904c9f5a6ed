"""Run the snapshot on Spark: one small Spark job per scan segment, a bounded number at once.

A job per segment lets the driver know the moment a segment is copied, so the savepoint
is written then, and lets it retry one segment when its failure is transient (an
executor lost, retries exhausted under throttling) without rerunning the others. Each
job's description names the phase and the segment in the Spark UI.
"""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Callable, Iterator

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from migrator.errors import SegmentFailed
from migrator.segment_copy import SegmentOutcome, SegmentTask, copy_segment

log = logging.getLogger(__name__)

SEGMENT_ATTEMPTS = 3


def copy_segments(
    spark: SparkSession,
    tasks: list[SegmentTask],
    concurrency: int,
    on_copied: Callable[[SegmentOutcome], None],
) -> None:
    """Copy every segment; call `on_copied` as each finishes; raise the first terminal failure."""
    stop = threading.Event()
    with _plain_ctrl_c(), ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="segment") as pool:
        futures: list[Future] = [pool.submit(_copy_one, spark, task, stop, on_copied) for task in tasks]
        try:
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            failures = [f.exception() for f in done if f.exception() is not None]
            if failures:
                raise failures[0]
        except BaseException:  # the first failure, or Ctrl+C: stop what runs, start nothing new
            stop.set()
            for future in futures:
                future.cancel()
            _cancel_jobs(spark)
            raise


@contextmanager
def _plain_ctrl_c() -> Iterator[None]:
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


def _cancel_jobs(spark: SparkSession) -> None:
    """Cancel running segment jobs; the JVM may already be gone (Ctrl+C reaches it too)."""
    try:
        spark.sparkContext.cancelAllJobs()
    except Py4JError:
        log.debug("could not cancel Spark jobs: the JVM is shutting down")


def _copy_one(
    spark: SparkSession, task: SegmentTask, stop: threading.Event, on_copied: Callable[[SegmentOutcome], None]
) -> None:
    if stop.is_set():
        return
    sc = spark.sparkContext
    sc.setJobDescription(
        f"snapshot {task.source_table} → {task.target_table}: segment {task.segment} of {task.total_segments}"
    )
    for attempt in range(1, SEGMENT_ATTEMPTS + 1):
        outcome = _run_job(spark, task)
        if outcome.ok:
            on_copied(outcome)
            return
        error = outcome.error
        if stop.is_set() or not error.retryable or attempt == SEGMENT_ATTEMPTS:
            raise error
        log.warning("%s; retrying the segment (attempt %d of %d)", error, attempt + 1, SEGMENT_ATTEMPTS)


def _run_job(spark: SparkSession, task: SegmentTask) -> SegmentOutcome:
    try:
        return spark.sparkContext.parallelize([task], 1).map(copy_segment).collect()[0]
    except Py4JError as exc:  # the Spark job itself failed: executor lost, task killed, cancelled
        cause = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        return SegmentOutcome(
            segment=task.segment,
            error=SegmentFailed(task.segment, task.total_segments, f"Spark job failed: {cause}", True),
        )

