"""Items as rows of the Delta table: the table's layout, its Arrow schema, and each item's row.

A row holds each key attribute in a column named as the attribute, the optional projected
columns (`target.columns`), and `_item`: the whole item in DynamoDB JSON, binary in base64, so
every type survives exactly whatever the columns hold. Number keys are written as strings holding
the number exactly as DynamoDB gave it: segments are written independently, so no scale chosen from
one segment's data could be known to fit every other. Once the snapshot is complete the driver
types them `decimal(38, s)` where every key fits (`migrator.target.delta_number_keys`, docs/delta.md).

Pure: no Spark, no AWS, no Delta library; pyarrow builds the batches the writer takes.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any, Iterable

import pyarrow as pa

from migrator.items import Item

ITEM_COLUMN = "_item"
_KEY_TYPES = {"S": pa.string(), "N": pa.string(), "B": pa.binary()}
_COLUMN_TYPES = {"string": pa.string(), "long": pa.int64(), "double": pa.float64(), "boolean": pa.bool_(),
                 "binary": pa.binary()}  # fmt: skip
_LONG_RANGE = (-(2**63), 2**63 - 1)


class LayoutError(ValueError):
    """The keys and the configured columns cannot make one table (a name used twice, an unknown partition
    column); `key_path` names the config key that can fix it."""

    def __init__(self, key_path: str, reason: str):
        super().__init__(reason)
        self.key_path = key_path


@dataclass(frozen=True)
class DeltaLayout:
    """The table's columns: keys as (attribute, S/N/B), projected columns as (attribute, type), partition columns."""

    keys: tuple[tuple[str, str], ...]
    columns: tuple[tuple[str, str], ...] = ()
    partition_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        key_names = [name for name, _ in self.keys]
        if ITEM_COLUMN in key_names:
            raise LayoutError(
                "renames",
                f"the source's key attribute {ITEM_COLUMN!r} would take the name of the column holding the whole "
                f"item: rename it (renames: [{{from: {ITEM_COLUMN}, to: ...}}])"
            )
        both = sorted(set(key_names) & {name for name, _ in self.columns})
        if both:
            raise LayoutError("target.columns", f"names the key attribute {both[0]!r}, which has its column already: remove it")
        unknown = [name for name in self.partition_by if name not in self.column_names]
        if unknown:
            raise LayoutError(
                "target.partitionBy",
                f"names {unknown[0]!r}, which is no column: name a key attribute "
                f"({', '.join(key_names)}) or one of target.columns"
            )
        kinds = {**{name: kind for name, kind in self.keys}, **dict(self.columns)}
        binary = [name for name in self.partition_by if kinds[name] in ("B", "binary")]
        if binary:
            raise LayoutError(
                "target.partitionBy",
                f"names {binary[0]!r}, which holds binary values, which delta-rs (the Delta library) reads back from "
                "a partition as their escaped text, so a MERGE would not find the row again: partition by a string, "
                "number or boolean column, or by none"
            )

    @property
    def column_names(self) -> tuple[str, ...]:
        return (*(name for name, _ in self.keys), *(name for name, _ in self.columns), ITEM_COLUMN)

    def arrow_schema(self) -> pa.Schema:
        fields = [pa.field(name, _KEY_TYPES[kind], nullable=False) for name, kind in self.keys]
        fields += [pa.field(name, column_type(kind)) for name, kind in self.columns]
        return pa.schema([*fields, pa.field(ITEM_COLUMN, pa.string(), nullable=False)])


def column_type(kind: str) -> pa.DataType:
    """A `target.columns` type (validated at load) as Arrow's type."""
    if kind.startswith("decimal("):
        precision, scale = (int(part) for part in kind[len("decimal(") : -1].split(","))
        return pa.decimal128(precision, scale)
    return _COLUMN_TYPES[kind]


def item_json(item: Item) -> str:
    """The item in DynamoDB JSON (`{"pk": {"S": "a"}, "n": {"N": "1.5"}}`), binary in base64: exact for every type.

    Scanned items are wire form already (binary as the service's base64 text); binary held as
    bytes (boto3's form) is encoded on the way.
    """
    return json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=_base64)


def _base64(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not a DynamoDB wire value")


def _bytes(payload: bytes | bytearray | str) -> bytes:
    """A binary value as bytes, from bytes or from base64 text."""
    return base64.b64decode(payload) if isinstance(payload, str) else bytes(payload)


def key_value(value: dict[str, Any]) -> str | bytes:
    """A key attribute's column value: the string, the number as DynamoDB wrote it, or the bytes."""
    (kind, payload), = value.items()
    return _bytes(payload) if kind == "B" else payload


def projected(value: dict[str, Any] | None, kind: str) -> tuple[Any, bool]:
    """An attribute's value for a column of type `kind`, and whether it fit.

    A missing attribute is None and fits; one of another DynamoDB type, or a number the column
    cannot hold exactly (a long, a decimal) or at all (a double), is None and does not fit: the
    item column still holds it.
    """
    if value is None:
        return None, True
    (dynamodb_type, payload), = value.items()
    wanted = {"string": "S", "boolean": "BOOL", "binary": "B"}.get(kind, "N")
    if dynamodb_type != wanted:
        return None, False
    if kind == "binary":
        return _bytes(payload), True
    if wanted != "N":
        return payload, True
    converted = _number(payload, kind)
    return converted, converted is not None


def column_value(layout: "DeltaLayout", name: str, kind: str, value: dict[str, Any] | None) -> tuple[Any, bool]:
    """An attribute's value for its `target.columns` column (`projected`). In a partition column an empty
    string does not fit either: Delta writes a partition value "" as null (Hive's default partition), so it
    would read back as a missing attribute."""
    column, fits = projected(value, kind)
    if column == "" and name in layout.partition_by:
        return None, False
    return column, fits


def _number(text: str, kind: str) -> int | float | Decimal | None:
    with localcontext() as context:
        context.prec = 100  # DynamoDB numbers have at most 38 significant digits: every step is exact
        number = Decimal(text)
        if kind == "double":
            as_float = float(number)
            return as_float if as_float not in (float("inf"), float("-inf")) else None
        if kind == "long":
            whole = number == number.to_integral_value() and _LONG_RANGE[0] <= number <= _LONG_RANGE[1]
            return int(number) if whole else None
        precision, scale = (int(part) for part in kind[len("decimal(") : -1].split(","))
        try:
            fitted = number.quantize(Decimal(1).scaleb(-scale))
        except InvalidOperation:
            return None
        if fitted != number or len(fitted.as_tuple().digits) > precision:
            return None
        return fitted


@dataclass
class RowCounts:
    """What the rows of a segment held: items, and projected values that did not fit their column."""

    items: int = 0
    unfit_values: int = 0


def record_batch(items: Iterable[Item], layout: DeltaLayout, schema: pa.Schema, counts: RowCounts) -> pa.RecordBatch:
    """The items as one Arrow batch of `schema` (the layout's), counted into `counts`."""
    columns: dict[str, list[Any]] = {name: [] for name in layout.column_names}
    for item in items:
        for name, _ in layout.keys:
            columns[name].append(key_value(item[name]))
        for name, kind in layout.columns:
            value, fits = column_value(layout, name, kind, item.get(name))
            columns[name].append(value)
            counts.unfit_values += not fits
        columns[ITEM_COLUMN].append(item_json(item))
        counts.items += 1
    return pa.RecordBatch.from_pydict(columns, schema=schema)
