"""ScyllaDB Migrator's partial migration: a table copied in parts with hand-written `skipSegments`.

Its documented flow: a first config with `skipSegments: [1, 2]` (of `scanSegments: 3`) into a
target that does not exist yet, then a second config with `skipSegments: [0]`. A skipSegments
written by hand is an instruction: the target is created and the other segments copied. What
the project's own savepoint records as copied keeps its safety check.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from migrator.errors import RecordedTargetMissing
from testsupport.all_types import assert_same_items
from testsupport.endpoint import put_items, scan_all, side, table_exists
from testsupport.jobs import migrate_on_session, write_config
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 90
SEGMENTS = 3


def part_config(tmp_path: Path, endpoint_url: str, source: str, target: str, skip: list[int], name: str) -> Path:
    return write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=SEGMENTS),
            "target": side(endpoint_url, target),
            "skipSegments": skip,
            "savepoints": {"path": str(tmp_path / "savepoints"), "intervalSeconds": 300},
        },
        name=name,
    )


def the_savepoint(tmp_path: Path) -> dict:
    (path,) = (tmp_path / "savepoints").glob("savepoint_*.yaml")
    return yaml.safe_load(path.read_text())


def test_a_table_copied_in_two_parts(dynamodb, endpoint_url, table_name, tmp_path, spark, caplog):
    source, target = table_name("parts"), table_name("parts-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    assert not table_exists(dynamodb, target)

    with caplog.at_level(logging.INFO, logger="migrator"):
        first = migrate_on_session(part_config(tmp_path, endpoint_url, source, target, [1, 2], "part-1.yaml"), spark)

    assert first.segments_copied == 1 and first.segments_skipped == 2
    assert "skipping segments 1, 2 of 3 on request (skipSegments)" in caplog.text
    copied_first = scan_all(dynamodb, target)
    assert 0 < len(copied_first) < ITEMS, "segment 0 alone holds some items, not all"
    recorded = the_savepoint(tmp_path)
    assert recorded["skipSegments"] == ["0-2"] and recorded["savepoint"]["copiedSegments"] == [0]

    second = migrate_on_session(part_config(tmp_path, endpoint_url, source, target, [0], "part-2.yaml"), spark)

    assert second.segments_copied == 2
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))
    assert the_savepoint(tmp_path)["savepoint"]["copiedSegments"] == ["0-2"]


def test_segments_the_savepoint_recorded_still_need_their_target(dynamodb, endpoint_url, table_name, tmp_path, spark):
    """Hand-written skips are obeyed; copies the savepoint recorded are not trusted once the target is gone."""
    source, target = table_name("parts"), table_name("parts-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    migrate_on_session(part_config(tmp_path, endpoint_url, source, target, [1, 2], "part-1.yaml"), spark)
    dynamodb.delete_table(TableName=target)

    with pytest.raises(RecordedTargetMissing) as refused:
        migrate_on_session(part_config(tmp_path, endpoint_url, source, target, [2], "part-2.yaml"), spark)

    assert "records 1 segment as copied" in str(refused.value)
    assert "delete the savepoint to copy everything again" in str(refused.value)
    assert not table_exists(dynamodb, target)
