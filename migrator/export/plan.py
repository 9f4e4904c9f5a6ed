"""How an export import is spread over the cluster: concurrent tasks and each one's write rate.

Pure arithmetic, like `migrator.plan` for table copies. A data file is the unit of work: a
full export's file is one Spark task, and files run `concurrency` at once so every core is
busy (never more tasks than files); the target's write rate is divided among them. An
incremental export is written by `concurrency` partitions of its newest records.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImportPlan:
    """The split of one import, and why it was chosen."""

    files: int  # data files to read in this run
    concurrency: int
    write_units_per_task: float
    reason: str

    def describe(self) -> str:
        return (
            f"{self.files} data files, {self.concurrency} concurrent tasks, "
            f"per task {self.write_units_per_task:,.0f} WCU/s ({self.reason})"
        )


def plan_import(*, files: int, parallelism: int, max_map_tasks: int | None, write_units: float) -> ImportPlan:
    """As many tasks at once as the cluster has cores (or source.maxMapTasks), never more than files."""
    if max_map_tasks:
        cap, reason = max_map_tasks, f"capped by source.maxMapTasks={max_map_tasks}"
    else:
        cap, reason = max(parallelism, 1), f"the cluster's parallelism {parallelism}"
    concurrency = max(1, min(files, cap))
    if files < cap:
        reason += ", fewer files than that"
    return ImportPlan(files=files, concurrency=concurrency, write_units_per_task=write_units / concurrency, reason=reason)
