"""Replicated changes as rows of a Delta MERGE: each key's final state in a batch, with a delete flag.

A row has the table's layout (`migrator.target.delta_rows`: key columns, projected columns,
`_item`) plus `_deleted`: true when the batch's last change of the key removed it. A delete has
only its key columns (the item is gone), so `_item` is empty there and never reaches the table:
the MERGE deletes matched rows and inserts nothing for it (`migrator.target.delta`).

Pure: no Spark, no AWS, no Delta library.
"""

from __future__ import annotations

from typing import Any, Iterable

import pyarrow as pa

from migrator.items import Item
from migrator.target.delta_rows import ITEM_COLUMN, DeltaLayout, RowCounts, column_value, item_json, key_value

DELETED_COLUMN = "_deleted"  # only in the MERGE's source: never a column of the table


def change_schema(layout: DeltaLayout) -> pa.Schema:
    """The layout's columns, `_item` nullable (a delete has none), and the delete flag."""
    schema = layout.arrow_schema()
    item_index = schema.get_field_index(ITEM_COLUMN)
    schema = schema.set(item_index, pa.field(ITEM_COLUMN, pa.string(), nullable=True))
    return schema.append(pa.field(DELETED_COLUMN, pa.bool_(), nullable=False))


def change_batch(states: Iterable[tuple[Item, Item | None]], layout: DeltaLayout, counts: RowCounts) -> pa.RecordBatch:
    """Each key's state, given as (keys, image) with the target's attribute names, as one row:
    the image's row with `_deleted` false, or, when the image is None, the keys with `_deleted` true."""
    columns: dict[str, list[Any]] = {name: [] for name in (*layout.column_names, DELETED_COLUMN)}
    for keys, image in states:
        for name, _ in layout.keys:
            columns[name].append(key_value(keys[name]))
        for name, kind in layout.columns:
            value, fits = column_value(layout, name, kind, image.get(name)) if image is not None else (None, True)
            columns[name].append(value)
            counts.unfit_values += not fits
        columns[ITEM_COLUMN].append(item_json(image) if image is not None else None)
        columns[DELETED_COLUMN].append(image is None)
        counts.items += 1
    return pa.RecordBatch.from_pydict(columns, schema=change_schema(layout))
