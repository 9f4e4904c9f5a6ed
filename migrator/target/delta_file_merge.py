"""A MERGE by key whose data files the executors write: the driver plans it and commits it.

A MERGE's changes are rows of `migrator.target.delta_changes`: each key's final state, `_deleted` when the
key was removed. They are applied copy-on-write, as delta-rs's own MERGE applies them: every data file
holding one of the changed keys is written again without those keys, and the changes that are not deletes
are written as new rows; one commit removes the rewritten files and adds the new ones.

- The driver lists the table's data files at the version it read (`plan_tasks`): groups of files, a
  rewrite task each, and the insert tasks (one per part of the changes).
- A rewrite task (on an executor) reads its files' key columns only; a file holding none of the changed
  keys is left as it is. The others are read batch by batch, their changed keys dropped (an anti join),
  and written anew, partition columns and all.
- An insert task writes its part's changes that are not deletes.
- A task writes its files as a small Delta table of its own under `<table>/migrator-files/<id>/`:
  delta-rs then writes the files, their statistics and partition values as it writes the table's. The task
  returns that table's add actions, paths made relative to the table, and deletes its log. No file of the
  table is changed: the files of an attempt that failed are named by no commit, and VACUUM removes them.
- The driver commits the removes and adds as the table's next version, with no commit retry (`commit`):
  another writer's commit in between fails it, and the caller plans the MERGE again on the new version, so
  the files removed are the files read and no key is written twice (`migrator.target.delta.merge_once`).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol, Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import DeltaError
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction, RemoveAction
from pyarrow.fs import PyFileSystem
from pyspark.sql import SparkSession

from migrator.errors import DeltaWriteFailed, MigratorError
from migrator.target.delta_changes import DELETED_COLUMN
from migrator.target.delta_rows import ITEM_COLUMN
from migrator.task_boundary import errors_returned

if TYPE_CHECKING:
    from migrator.target.delta import DeltaLocation

FILES_FOLDER = "migrator-files"  # not `_`-prefixed: VACUUM removes the files of a failed attempt
READ_ROWS = 65_536  # rows per batch read from a rewritten file
TASKS_PER_CORE = 2  # rewrite tasks per core of the cluster, at most one per file


@dataclass(frozen=True)
class DataFile:
    """One of the table's data files: its path relative to the table, as stored (the log holds it URL-encoded;
    delta-rs encodes the paths of the actions it commits)."""

    path: str
    size: int


@dataclass(frozen=True)
class MergeWork:
    """What every task of one MERGE attempt shares: plain values, so each executor task carries them."""

    location: DeltaLocation
    version: int  # the table version the MERGE reads; it commits the next
    key_names: tuple[str, ...]
    schema: pa.Schema  # the table's columns, number keys typed as the table types them
    partition_by: tuple[str, ...]
    folder: str  # this attempt's folder, relative to the table


@dataclass(frozen=True)
class RewriteTask:
    files: tuple[DataFile, ...]


@dataclass(frozen=True)
class InsertTask:
    part: int


@dataclass(frozen=True)
class RetypeTask:
    """Files written again whole with `MergeWork.schema`'s column types (`delta_number_keys`): each column cast,
    or for the columns in `from_item`, each row's number read back from `_item`, exactly as DynamoDB gave it."""

    files: tuple[DataFile, ...]
    from_item: tuple[str, ...] = ()


Task = RewriteTask | InsertTask | RetypeTask


@dataclass(frozen=True)
class TaskFiles:
    """What a task wrote (add entries of its log, paths relative to the table) and replaces, or its error."""

    adds: tuple[dict, ...] = ()
    removes: tuple[DataFile, ...] = ()
    error: MigratorError | None = None


class Changes(Protocol):
    """A MERGE's changes (`delta_changes.change_schema`: number keys as DynamoDB's strings); picklable, since
    the tasks read them on the executors, where they are cast to the table's types."""

    def keys(self, work: MergeWork) -> pa.Table:
        """The key columns of every change (a rewrite task's)."""

    def count(self) -> int:
        """How many changes (keys) there are."""

    def parts(self) -> int:
        """How many insert tasks read them."""

    def rows(self, work: MergeWork, part: int) -> Iterator[pa.RecordBatch]:
        """One part's changes, every column and the delete flag (an insert task's)."""

    def key_column(self, name: str) -> Iterable[pa.Array]:
        """One key column of every change, in chunks (the driver's, to check number keys fit the table)."""


@dataclass(frozen=True)
class HeldChanges:
    """Changes the driver holds (a replicated batch, a bucket's repairs): sent to the executors with the tasks,
    which PySpark broadcasts once when they are large."""

    table: pa.Table

    def keys(self, work: MergeWork) -> pa.Table:
        return self.table.select(list(work.key_names))

    def count(self) -> int:
        return self.table.num_rows

    def parts(self) -> int:
        return 1

    def rows(self, work: MergeWork, part: int) -> Iterator[pa.RecordBatch]:
        return iter(self.table.to_batches())

    def key_column(self, name: str) -> Iterable[pa.Array]:
        return self.table.column(name).chunks


class Executors(Protocol):
    """Where a MERGE's tasks run: `cores` of them at once."""

    cores: int

    def run(self, work: MergeWork, changes: Changes | None, tasks: list[Task]) -> list[TaskFiles]:
        """Each task's `run_task`, in the order given (changes: None for retype tasks)."""


def run_tasks(executors: Executors, work: MergeWork, changes: Changes | None, tasks: list[Task]) -> list[TaskFiles]:
    """Each task's files, in order (no task, no job); the first task's error raised."""
    results = executors.run(work, changes, tasks) if tasks else []
    failed = [result.error for result in results if result.error is not None]
    if failed:
        raise failed[0]
    return results


def data_files(table: DeltaTable) -> list[DataFile]:
    """The table's data files at the version it is loaded at."""
    actions = pa.table(table.get_add_actions(flatten=True)).select(["path", "size_bytes"]).to_pylist()
    return [DataFile(unquote(action["path"]), action["size_bytes"]) for action in actions]


def plan_tasks(files: list[DataFile], cores: int, changes: Changes) -> list[Task]:
    """A MERGE's tasks: a rewrite task per group of files, then the insert tasks."""
    return [*(RewriteTask(group) for group in file_groups(files, cores)), *(InsertTask(part) for part in range(changes.parts()))]


def file_groups(files: list[DataFile], cores: int) -> list[tuple[DataFile, ...]]:
    """The files in groups of about equal bytes, `TASKS_PER_CORE` per core at most."""
    groups: list[list[DataFile]] = [[] for _ in range(min(len(files), TASKS_PER_CORE * max(cores, 1)))]
    sizes = [0] * len(groups)
    for file in sorted(files, key=lambda file: -file.size):
        lightest = sizes.index(min(sizes))
        groups[lightest].append(file)
        sizes[lightest] += file.size
    return [tuple(group) for group in groups]


def new_work(location: DeltaLocation, table: DeltaTable, key_names: Sequence[str], schema: pa.Schema) -> MergeWork:
    return MergeWork(
        location, table.version(), tuple(key_names), schema, tuple(table.metadata().partition_columns),
        new_folder(),
    )  # fmt: skip


def run_task(work: MergeWork, changes: Changes | None, task: Task) -> TaskFiles:
    """One task's files written (on an executor); a failure is returned, a storage one as retryable."""
    with errors_returned("a Delta MERGE task") as caught:
        try:
            if isinstance(task, RetypeTask):
                return _retyped(work, task)
            assert changes is not None  # a MERGE's tasks
            if isinstance(task, RewriteTask):
                return _rewrite(work, changes, task.files)
            return TaskFiles(adds=_written(work, f"insert-{task.part}", _inserts(work, changes.rows(work, task.part))))
        except (DeltaError, OSError) as exc:
            raise DeltaWriteFailed(f"writing the files of a MERGE into the Delta table {work.location.uri}", exc) from None
    return TaskFiles(error=caught.error)


def _rewrite(work: MergeWork, changes: Changes, files: tuple[DataFile, ...]) -> TaskFiles:
    """The files holding a changed key, written again without the changed keys; the others untouched."""
    if not files:
        return TaskFiles()
    dataset, fragments = _fragments(work, files)
    wanted = {file.path: file for file in files}
    keys = _typed(changes.keys(work), _key_schema(work))
    touched = []  # (fragment, the changed keys it holds)
    for path, fragment in fragments.items():
        held = keys.join(_typed(fragment.to_table(schema=dataset.schema, columns=list(work.key_names)), _key_schema(work)),
                         keys=list(work.key_names), join_type="left semi")  # fmt: skip
        if held.num_rows:
            touched.append((wanted[path], fragment, held))
    if not touched:
        return TaskFiles()
    kept = (
        batch
        for _, fragment, held in touched
        for batch in _without(work, fragment.to_batches(schema=dataset.schema, batch_size=READ_ROWS), held)
    )
    adds = _written(work, f"rewrite-{uuid.uuid4().hex[:8]}", kept)
    return TaskFiles(adds=adds, removes=tuple(file for file, _, _ in touched))


def _fragments(work: MergeWork, files: tuple[DataFile, ...]) -> tuple[ds.Dataset, dict[str, ds.Fragment]]:
    """The table at the work's version as a pyarrow dataset (delta-rs fills in partition columns), and the files'
    fragments by path."""
    dataset = DeltaTable(work.location.uri, version=work.version, storage_options=work.location.storage_options()).to_pyarrow_dataset()
    wanted = {file.path for file in files}
    fragments = {fragment.path: fragment for fragment in dataset.get_fragments() if fragment.path in wanted}
    if len(fragments) != len(wanted):
        missing = sorted(wanted - set(fragments))
        raise MigratorError(f"the Delta table {work.location.uri} at version {work.version} lists no file {missing[0]}")
    return dataset, fragments


def _retyped(work: MergeWork, task: RetypeTask) -> TaskFiles:
    """The task's files, every row, written again with the work's column types."""
    if not task.files:
        return TaskFiles()
    dataset, fragments = _fragments(work, task.files)
    batches = (
        _typed(_numbers_from_item(pa.Table.from_batches([batch]), task.from_item), work.schema).to_batches()
        for fragment in fragments.values()
        for batch in fragment.to_batches(schema=dataset.schema, batch_size=READ_ROWS)
    )
    return TaskFiles(adds=_written(work, f"retype-{uuid.uuid4().hex[:8]}", (b for chunk in batches for b in chunk)))


def _numbers_from_item(rows: pa.Table, names: tuple[str, ...]) -> pa.Table:
    """`rows` with each column of `names` replaced by the number `_item` holds under that name, as text."""
    for name in names:
        numbers = [json.loads(text)[name]["N"] for text in rows.column(ITEM_COLUMN).to_pylist()]
        rows = rows.set_column(rows.schema.get_field_index(name), name, pa.array(numbers, pa.string()))
    return rows


def _without(work: MergeWork, batches: Iterator[pa.RecordBatch], held: pa.Table) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        rows = _typed(pa.Table.from_batches([batch]), work.schema)
        yield from rows.join(held, keys=list(work.key_names), join_type="left anti").select(work.schema.names).to_batches()


def _inserts(work: MergeWork, rows: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The changes that are not deletes (whose `_item` is never null), with the table's columns."""
    for batch in rows:
        kept = batch.filter(pc.invert(batch.column(DELETED_COLUMN)))
        yield from _typed(pa.Table.from_batches([kept]), work.schema).to_batches()


def _key_schema(work: MergeWork) -> pa.Schema:
    return pa.schema([work.schema.field(name) for name in work.key_names])


def _typed(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` with `schema`'s columns, in its order and types (delta-rs reads strings back as other string types)."""
    return rows.select(schema.names).cast(schema)


def _written(work: MergeWork, name: str, batches: Iterator[pa.RecordBatch]) -> tuple[dict, ...]:
    return write_files(work.location, work.schema, work.partition_by, f"{work.folder}/{name}", batches)


def new_folder() -> str:
    """A folder of the table no other write uses, relative to the table."""
    return f"{FILES_FOLDER}/{uuid.uuid4().hex}"


def write_files(
    location: DeltaLocation, schema: pa.Schema, partition_by: Sequence[str], folder: str,
    batches: Iterator[pa.RecordBatch],
) -> tuple[dict, ...]:  # fmt: skip
    """The batches written as data files of the table not yet committed: the files of a new Delta table at
    `folder` (relative to the table), whose log is deleted once read. Its add entries, paths relative to the
    table as stored (decoded). No row, no file."""
    first = next(batches, None)
    while first is not None and not first.num_rows:
        first = next(batches, None)
    if first is None:
        return ()
    rows = pa.RecordBatchReader.from_batches(schema, _chained(first, batches))
    write_deltalake(
        f"{location.uri.rstrip('/')}/{folder}", rows, partition_by=list(partition_by) or None,
        storage_options=location.storage_options(),
    )  # fmt: skip
    files = PyFileSystem(DeltaStorageHandler(location.uri, location.storage_options()))
    with files.open_input_stream(f"{folder}/_delta_log/{0:020d}.json") as log_file:
        entries = [json.loads(line) for line in log_file.read().decode("utf-8").splitlines() if line.strip()]
    files.delete_dir(f"{folder}/_delta_log")
    return tuple({**entry["add"], "path": f"{folder}/{unquote(entry['add']['path'])}"} for entry in entries if "add" in entry)


def _chained(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def commit_rewrite(table: DeltaTable, work: MergeWork, transaction: Transaction, results: list[TaskFiles]) -> None:
    """The retype tasks' files as the table's whole content and `work.schema` as its schema, one overwrite commit
    made as the next version after `work.version` (CommitFailedError when another writer committed it first)."""
    adds = [_add_action(add) for result in results for add in result.adds]
    table.create_write_transaction(
        adds, "overwrite", schema=work.schema, partition_by=list(work.partition_by) or None,
        commit_properties=CommitProperties(app_transactions=[transaction], max_commit_retries=0),
    )  # fmt: skip


def commit_append(table: DeltaTable, transaction: Transaction, adds: Sequence[dict]) -> None:
    """Files `write_files` wrote, added to the table as one commit with the application transaction. A blind
    append: delta-rs commits it on top of any other writer's commit."""
    table.create_write_transaction(
        [_add_action(add) for add in adds], "append", schema=table.schema(),
        partition_by=list(table.metadata().partition_columns) or None,
        commit_properties=CommitProperties(app_transactions=[transaction]),
    )  # fmt: skip


def _add_action(add: dict) -> AddAction:
    return AddAction(add["path"], add["size"], add["partitionValues"], add["modificationTime"], True, add["stats"])


def commit(table: DeltaTable, work: MergeWork, transaction: Transaction, changes: int, results: list[TaskFiles]) -> None:
    """The tasks' removes and adds as the table's next version after `work.version`, with the application
    transaction; CommitFailedError when another writer committed that version first.

    Delta names the commit a WRITE (its operation is delta-rs's, an append of actions); its commitInfo says what
    it is under "migrator": {"operation": "MERGE", "changes": <keys>, "filesRemoved": n, "filesAdded": m}."""
    now = int(time.time() * 1000)
    removes = [RemoveAction(file.path, True, now, file.size) for result in results for file in result.removes]
    adds = [_add_action(add) for result in results for add in result.adds]
    merge = {"operation": "MERGE", "changes": changes, "filesRemoved": len(removes), "filesAdded": len(adds)}
    table.create_write_transaction(
        [*removes, *adds], "append", schema=table.schema(), partition_by=list(work.partition_by) or None,
        commit_properties=CommitProperties(
            custom_metadata={"migrator": merge}, app_transactions=[transaction], max_commit_retries=0
        ),
    )  # fmt: skip


@dataclass(frozen=True)
class SparkExecutors:
    """The cluster's executors, a MERGE's tasks as one Spark job; `run_job` runs its collect (the caller's way
    of waiting on a Spark action: straight, or in a thread Ctrl+C can leave)."""

    spark: SparkSession
    run_job: Callable[[Callable[[], list]], list] = lambda collect: collect()

    @property
    def cores(self) -> int:
        return self.spark.sparkContext.defaultParallelism

    def run(self, work: MergeWork, changes: Changes | None, tasks: list[Task]) -> list[TaskFiles]:
        tasks_rdd = self.spark.sparkContext.parallelize(tasks, len(tasks))
        return self.run_job(tasks_rdd.map(partial(run_task, work, changes)).collect)
