"""A Delta MERGE's tasks run in the test's own process, one after another, for tests of the MERGE on real local
tables without a Spark session: each task is the very `run_task` an executor runs, given the same picklable
work (round-tripped through pickle, as Spark would ship it)."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Callable

from migrator.target.delta_file_merge import Changes, MergeWork, Task, TaskFiles, run_task


@dataclass
class InProcess:
    """`delta_file_merge.Executors` in this process. `before_run`: called before each MERGE attempt's tasks run,
    with the attempt's number (1 for the first), so a test can commit as another writer while the MERGE runs."""

    cores: int = 2
    before_run: Callable[[int], None] | None = None
    attempts: int = 0
    tasks: list[Task] = field(default_factory=list)

    def run(self, work: MergeWork, changes: Changes | None, tasks: list[Task]) -> list[TaskFiles]:
        self.attempts += 1
        self.tasks = tasks
        if self.before_run is not None:
            self.before_run(self.attempts)
        work, changes = pickle.loads(pickle.dumps((work, changes)))
        return [run_task(work, changes, task) for task in tasks]


def operation_of(commit_info: dict) -> str:
    """A Delta commit's operation as the migrator names it: a MERGE whose files the executors wrote is a WRITE to
    Delta, and its commitInfo says "MERGE" under "migrator" (`delta_file_merge.commit`)."""
    return commit_info.get("migrator", {}).get("operation", commit_info["operation"])
