"""A Delta unit's files (a scan segment's, a full export data file's) committed by the driver.

The unit's task writes its data files on an executor and returns their add actions
(`target.delta.write_once`); in the unit's own thread on the driver, right after its Spark job, they
are committed as one commit with the unit's app id (`target.delta.commit_once`), before the unit is
recorded in the savepoint. A commit that fails is the unit's failure, retried as a failed Spark job
is: the files it wrote are named by no commit (a VACUUM removes them), and the retry writes the unit
again.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from deltalake.exceptions import DeltaError
from pyspark.sql import SparkSession

from migrator.snapshot.runner import UnitJobs, run_job
from migrator.target.delta import commit_once


def committed_by_the_driver(jobs: UnitJobs) -> UnitJobs:
    """`jobs` whose each attempt is the unit's Spark job, then the driver's commit of the files it wrote."""
    return replace(jobs, attempt=_job_then_commit)


def _job_then_commit(spark: SparkSession, task: Any, jobs: UnitJobs, stop: threading.Event) -> Any:
    outcome = run_job(spark, task, jobs)
    if not outcome.ok or outcome.adds is None:  # failed, or committed by an earlier run
        return outcome
    try:
        committed = commit_once(task.location, task.app_id, outcome.adds)
    except (DeltaError, OSError) as exc:
        return jobs.job_failed(task, f"committing its files to {task.location.uri} failed ({type(exc).__name__}: {str(exc)[:300]})")
    if not committed:  # the unit's commit is in the table already (made by an attempt whose answer was lost)
        return replace(outcome, already_committed=True, written=0, adds=None)
    return replace(outcome, adds=None)
