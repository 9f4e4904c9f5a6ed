"""The layout a replication reads from an existing Delta table, on real local tables."""

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from migrator.config import DeltaTarget
from migrator.errors import ConfigError
from migrator.replicate.delta_apply import layout_of_table


def test_the_layout_is_read_from_the_tables_columns(tmp_path):
    schema = pa.schema([("pk", pa.string(), False), ("n", pa.decimal128(38, 2), False), ("status", pa.string()),
                        ("_item", pa.string(), False)])  # fmt: skip
    table = DeltaTable.create(str(tmp_path), schema=schema, partition_by=["status"])
    target = DeltaTarget.model_validate(
        {"type": "delta", "path": str(tmp_path), "columns": [{"name": "status", "type": "string"}],
         "partitionBy": ["status"]}  # fmt: skip
    )
    layout = layout_of_table(table, target)
    assert layout.keys == (("pk", "S"), ("n", "N")) and layout.columns == (("status", "string"),)


def test_a_table_partitioned_by_a_binary_key_is_refused_by_its_config_key(tmp_path):
    """A table an earlier version let be partitioned by a binary key: replicating into it would duplicate keys."""
    schema = pa.schema([("pk", pa.binary(), False), ("_item", pa.string(), False)])
    table = DeltaTable.create(str(tmp_path), schema=schema, partition_by=["pk"])
    target = DeltaTarget.model_validate({"type": "delta", "path": str(tmp_path), "partitionBy": ["pk"]})
    with pytest.raises(ConfigError, match="target.partitionBy.*'pk', which holds binary values.*nothing was merged") as caught:
        layout_of_table(table, target)
    assert caught.value.exit_code == 2
