"""A restart's generations of a Delta table (`migrator.target.delta_restart`), on real local tables."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from migrator.target.delta import DeltaLocation, create_table
from migrator.target.delta_restart import empty_for_restart, generation_id, restart_app_id, restarts_of
from migrator.target.delta_rows import DeltaLayout

LAYOUT = DeltaLayout((("pk", "S"), ("sk", "N")), (("status", "string"),), ("status",))
ROWS = pa.table({"pk": ["a", "b"], "sk": ["1", "2"], "status": ["new", "old"], "_item": ["{}", "{}"]})


def test_each_restart_empties_the_table_in_one_commit_and_counts_itself(tmp_path):
    location = DeltaLocation(str(tmp_path / "table"))
    create_table(location, LAYOUT)
    write_deltalake(location.uri, ROWS.cast(LAYOUT.arrow_schema()), mode="append", partition_by=["status"])
    identity = DeltaTable(location.uri).metadata().id
    assert restarts_of(location, "orders") == 0

    assert empty_for_restart(location, LAYOUT, "orders") == 1
    assert empty_for_restart(location, LAYOUT, "orders") == 2  # an empty table is emptied too: the count moves

    table = DeltaTable(location.uri)
    assert table.to_pyarrow_table().num_rows == 0 and table.version() == 3
    assert table.transaction_version(restart_app_id("orders")) == 2 == restarts_of(location, "orders")
    assert table.metadata().id == identity and table.metadata().partition_columns == ["status"]
    assert restarts_of(location, "another-replication") == 0


def test_the_plain_ids_until_the_first_restart_then_one_per_generation():
    assert generation_id("orders", 0) == "orders"
    assert generation_id("orders", 1) == "orders-restart-1"
    assert generation_id("copy-3f2a", 2) == "copy-3f2a-restart-2"
