"""Number keys of a Delta table typed `decimal(38, s)` once the snapshot is complete, with s chosen from the data.

Segments and data files commit independently, so no task knows every key before it writes: a table
whose source has a number (N) key is created with that key column as a string holding DynamoDB's
exact number, and the table property `migrator.numberKeys: pending` (`creation_properties`). Once the
snapshot is complete, the driver types the keys (`type_number_keys`): it reads only the number key
columns of the table at one version, in batches, and for each column finds the scale s (the most
fraction digits) such that every value fits `decimal(38, s)` (integer digits + s <= 38). The columns
that fit are rewritten ONCE as `decimal(38, s)`, every file by executor tasks
(`delta_file_merge.RetypeTask`): one overwrite commit, tagged with the application transaction
(`migrator-number-keys`, version 0), so a rerun after a kill neither repeats nor skips it. A column
with a value that does not fit (1E+125, 38 digits with a fraction) stays a string, and a log line
names it and the value. The property then says `decided`.

Later writers cast their rows' number keys to the table's column type, never rounding one. A MERGE (a
replication batch, an incremental export, repairs) whose key does not fit the column first rewrites that
column, once, as exact strings (`fit_number_keys`); an append, which runs on the executors side by side, is
refused with one line naming the key (`cast_keys`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, Transaction
from deltalake.exceptions import DeltaError

from migrator.errors import DeltaTargetError, DeltaWriteFailed
from migrator.target.delta_file_merge import (
    Executors, RetypeTask, commit_rewrite, data_files, file_groups, new_work, run_tasks,
)
from migrator.target.delta_rows import DeltaLayout

if TYPE_CHECKING:
    from migrator.target.delta import DeltaLocation

log = logging.getLogger(__name__)

MARKER = "migrator.numberKeys"  # a table property: `pending` until the number keys are typed, then `decided`
PENDING = "pending"
DECIDED = "decided"
TYPING_APP_ID = "migrator-number-keys"  # the typing commit's application transaction: committed once, version 0
MAX_PRECISION = 38  # Delta's (and Spark's) widest decimal
_READ_ROWS = 65_536  # rows per batch when reading the number key columns


def creation_properties(layout: DeltaLayout) -> dict[str, str] | None:
    """The new table's properties: the pending marker when it has number keys, else none (S/B keys pay nothing)."""
    return {MARKER: PENDING} if number_keys(layout) else None


def number_keys(layout: DeltaLayout) -> list[str]:
    return [name for name, kind in layout.keys if kind == "N"]


def digits_of(text: str) -> tuple[int, int]:
    """A DynamoDB number's (integer digits, fraction digits), trailing zeros dropped: "-1.50" is (1, 1), "1E+2" (3, 0)."""
    _, digits, exponent = Decimal(text).as_tuple()  # exact: no context rounds it (normalize() would, to 28 digits)
    written = "".join(map(str, digits))
    significant = written.rstrip("0")
    if not significant:  # zero
        return 0, 0
    exponent += len(written) - len(significant)
    return max(0, len(significant) + exponent), max(0, -exponent)


@dataclass
class ColumnDigits:
    """The most integer and fraction digits seen in a column, and a value that needs the most of each."""

    integer: int = 0
    fraction: int = 0
    widest: str | None = None  # the value with the most integer digits
    finest: str | None = None  # the value with the most fraction digits
    values: int = 0

    def add(self, text: str) -> None:
        integer, fraction = digits_of(text)
        self.values += 1
        if self.widest is None or integer > self.integer:
            self.integer, self.widest = integer, text
        if self.finest is None or fraction > self.fraction:
            self.fraction, self.finest = fraction, text

    def decimal_type(self) -> pa.Decimal128Type | None:
        """`decimal(38, s)` holding every value seen, s the most fraction digits; None when none does (or no value)."""
        if self.values == 0 or self.integer + self.fraction > MAX_PRECISION:
            return None
        return pa.decimal128(MAX_PRECISION, self.fraction)

    def why_not(self) -> str:
        if self.values == 0:
            return "the table holds no row to choose a scale from"
        if self.fraction == 0:
            return f"{self.widest} has {self.integer} integer digits, more than the {MAX_PRECISION} of a decimal"
        return (
            f"{self.widest} has {self.integer} integer digits and {self.finest} {self.fraction} fraction digits, "
            f"together more than the {MAX_PRECISION} of a decimal"
        )


def is_pending(table: DeltaTable) -> bool:
    return table.metadata().configuration.get(MARKER) == PENDING


def type_number_keys(location: DeltaLocation, layout: DeltaLayout, executors: Executors) -> None:
    """Type the pending table's number key columns, once; nothing for a table that is not pending.

    A table without number keys is not even opened. A failure of delta-rs is raised as retryable:
    a rerun finds the table still pending (or its typing commit made) and finishes the typing.
    """
    names = number_keys(layout)
    if not names:
        return
    table = location.open()
    if not is_pending(table):
        return
    try:
        if table.transaction_version(TYPING_APP_ID) is None:  # not yet rewritten (or a run died before the commit)
            types = _chosen_types(table, names, set(table.metadata().partition_columns))
            if types:
                _rewrite(location, table, layout, executors, types, version=0)
        table.alter.set_table_properties({MARKER: DECIDED}, raise_if_not_exists=False)
    except (DeltaError, OSError) as exc:
        raise DeltaWriteFailed(
            f"typing the number keys of the Delta table {table.table_uri}", exc,
            "run the job again: the snapshot is complete, and the keys are typed then",
        ) from None


def _chosen_types(table: DeltaTable, names: list[str], partition_columns: set[str]) -> dict[str, pa.DataType]:
    """Each number key column's decimal type, for the columns whose every value fits one; the others are logged."""
    digits = {name: ColumnDigits() for name in names}
    for batch in table.to_pyarrow_dataset().to_batches(columns=names, batch_size=_READ_ROWS):
        for name in names:
            for text in batch.column(name).to_pylist():
                digits[name].add(text)
    types = {}
    for name in names:
        chosen = digits[name].decimal_type()
        if name in partition_columns:  # a partition's folder name holds the value: it stays as DynamoDB wrote it
            log.info("Delta: number key column %r stays a string: it is a partition column", name)
        elif chosen is None:
            log.info("Delta: number key column %r stays a string holding the exact number: %s", name, digits[name].why_not())
        else:
            log.info("Delta: number key column %r is typed %s", name, _decimal_name(chosen))
            types[name] = chosen
    return types


def _rewrite(
    location: DeltaLocation, table: DeltaTable, layout: DeltaLayout, executors: Executors,
    types: dict[str, pa.DataType], version: int, from_item: tuple[str, ...] = (),
) -> None:  # fmt: skip
    """The table at its current version rewritten by the executors with the key columns of `types` (the `from_item`
    ones read back from `_item`), committed as one overwrite tagged with the typing app id's `version`; `table` is
    then at the new version."""
    schema = _typed_schema(typed_schema(layout, table), types)
    work = new_work(location, table, [name for name, _ in layout.keys], schema)
    tasks = [RetypeTask(group, from_item) for group in file_groups(data_files(table), executors.cores)]
    results = run_tasks(executors, work, None, tasks)
    commit_rewrite(table, work, Transaction(TYPING_APP_ID, version), results)
    table.update_incremental()


def _typed_schema(schema: pa.Schema, types: dict[str, pa.DataType]) -> pa.Schema:
    for name, kind in types.items():
        index = schema.get_field_index(name)
        schema = schema.set(index, schema.field(index).with_type(kind))
    return schema


def cast_keys(rows: pa.RecordBatch, table: DeltaTable, layout: DeltaLayout, uri: str) -> pa.RecordBatch:
    """An append's `rows` with their number keys (strings) cast to the table's decimal columns; unchanged when it
    has none. A key that does not fit its column raises DeltaTargetError naming it (appends run on executors, side
    by side: a rewrite of the table is the driver's, between MERGEs)."""
    typed = _decimal_keys(table, layout)
    for name in typed:
        index = rows.schema.get_field_index(name)
        column = rows.column(index)
        try:
            cast = pc.cast(column, typed[name])
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise _unfit(uri, name, typed[name], column) from None
        rows = rows.set_column(index, rows.schema.field(index).with_type(typed[name]), cast)
    return rows


def fit_number_keys(
    location: DeltaLocation, table: DeltaTable, layout: DeltaLayout, key_column: Callable[[str], Iterable[pa.Array]],
    executors: Executors,
) -> None:  # fmt: skip
    """Before a MERGE: a change's number key that does not fit the table's decimal column (a later change's finer
    fraction, a wider number) is never rounded: the column is first rewritten, once, as strings holding DynamoDB's
    exact numbers (from `_item`), as if its snapshot had held that key. `key_column(name)` reads one key column of
    the changes, in chunks (never the whole rows); `table` is then at the rewrite's version."""
    for name, kind in _decimal_keys(table, layout).items():
        unfit = next((chunk for chunk in key_column(name) if not _casts(chunk, kind)), None)
        if unfit is not None:
            _warn_unfit(name, next(text for text in unfit.to_pylist() if not _fits(text, kind)), kind)
            version = (table.transaction_version(TYPING_APP_ID) or 0) + 1
            _rewrite(location, table, layout, executors, {name: pa.string()}, version, from_item=(name,))


def _casts(column: pa.Array, kind: pa.Decimal128Type) -> bool:
    try:
        pc.cast(column, kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def _warn_unfit(name: str, example: str, kind: pa.Decimal128Type) -> None:
    log.warning(
        "Delta: the key %s=%s does not fit the table's key column %s %s: rewriting the column, once, as strings "
        "holding the exact numbers", name, example, name, _decimal_name(kind),
    )  # fmt: skip


def typed_schema(layout: DeltaLayout, table: DeltaTable) -> pa.Schema:
    """The layout's Arrow schema with the number key columns the table has typed as its decimals."""
    return _typed_schema(layout.arrow_schema(), _decimal_keys(table, layout))


def _decimal_keys(table: DeltaTable, layout: DeltaLayout) -> dict[str, pa.DataType]:
    typed = {field.name: field.type for field in pa.schema(table.schema().to_arrow()) if pa.types.is_decimal(field.type)}
    return {name: typed[name] for name, _ in layout.keys if name in typed}




def _unfit(uri: str, name: str, kind: pa.Decimal128Type, column: pa.ChunkedArray | pa.Array) -> DeltaTargetError:
    example = next((text for text in column.to_pylist() if not _fits(text, kind)), "?")
    return DeltaTargetError(
        uri,
        f"the key {name}={example} does not fit the table's key column {name} {_decimal_name(kind)}, typed from the "
        "snapshot's keys; nothing was written: import into a new target.path (its number keys are then typed from "
        "every key, or kept as exact strings when one does not fit)",
    )


def _fits(text: str, kind: pa.Decimal128Type) -> bool:
    try:
        integer, fraction = digits_of(text)
    except InvalidOperation:
        return False
    return fraction <= kind.scale and integer + kind.scale <= kind.precision


def _decimal_name(kind: pa.Decimal128Type) -> str:
    return f"decimal({kind.precision},{kind.scale})"
