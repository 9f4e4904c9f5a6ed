"""What a rerun into a Delta table trusts: the table itself, not the savepoint beside it.

A copy's segments are made exactly-once by app ids that name the segment count, so the table records
the count the copy was planned with (its first commit of that copy) and a rerun that lost its savepoint
keeps it, or is refused. A table holding rows that no commit of this copy wrote is refused unless
`target.overwrite` asks for it to be emptied first. The same for a full export imported twice.
Each test is a user's rerun, through the command line on the worker's shared session.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from migrator.items import to_dynamodb_json
from testsupport.all_types import all_types_items
from testsupport.endpoint import put_items, reaching, side
from testsupport.export_imports import export_source
from testsupport.jobs import assert_one_clear_line, run_job, write_config
from testsupport.s3_exports import DYNAMODB_JSON, DataFileSpec, create_bucket, dynamodb_numbers, full_lines, write_export
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 60


def copy_config(tmp_path: Path, endpoint_url: str, table: str, path: Path, segments: int | None, name: str,
                **target) -> Path:  # fmt: skip
    source = side(endpoint_url, table, **({"scanSegments": segments} if segments else {}))
    return write_config(tmp_path, {"source": source, "target": {"type": "delta", "path": str(path), **target}}, name=name)


def keys_held(path: Path) -> Counter:
    """How many rows the table holds per key, from `_item`."""
    items = [json.loads(text) for text in DeltaTable(str(path)).to_pyarrow_table().column("_item").to_pylist()]
    return Counter((item["pk"]["S"], item["sk"]["N"]) for item in items)


def delete_savepoints(tmp_path: Path) -> None:
    for savepoint in (tmp_path / "savepoints").glob("savepoint_*.yaml"):
        savepoint.unlink()


def log_entries(path: Path) -> list[str]:
    return sorted(entry.name for entry in (path / "_delta_log").iterdir())


@pytest.fixture
def copied_in_two_segments(dynamodb, endpoint_url, table_name, tmp_path):
    """A 60-item table copied into Delta with scanSegments 2, its savepoint then lost."""
    source = table_name("delta-rerun")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    path = tmp_path / "lake"
    first = run_job(copy_config(tmp_path, endpoint_url, source, path, 2, "two.yaml"))
    assert first.returncode == 0, first.stdout + first.stderr
    delete_savepoints(tmp_path)
    return source, path


def test_a_rerun_without_its_savepoint_asking_for_other_segments_is_refused(endpoint_url, tmp_path, copied_in_two_segments):
    source, path = copied_in_two_segments
    before = log_entries(path)

    rerun = run_job(copy_config(tmp_path, endpoint_url, source, path, 3, "three.yaml"))

    assert rerun.returncode == 2, rerun.stdout + rerun.stderr
    assert_one_clear_line(rerun, ["copied with 2 scan segments", "scanSegments is 3", "nothing was written",
                                  "scanSegments: 2", "new target.path"])  # fmt: skip
    assert log_entries(path) == before
    assert set(keys_held(path).values()) == {1} and len(keys_held(path)) == ITEMS


def test_a_rerun_without_its_savepoint_and_with_no_segment_count_keeps_the_tables(endpoint_url, tmp_path,
                                                                                  copied_in_two_segments):  # fmt: skip
    source, path = copied_in_two_segments

    rerun = run_job(copy_config(tmp_path, endpoint_url, source, path, None, "auto.yaml"))

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "found committed: 2 segments" in rerun.stdout, rerun.stdout
    held = keys_held(path)
    assert len(held) == ITEMS and set(held.values()) == {1}, held.most_common(3)


def test_a_table_another_copy_wrote_is_refused_then_overwritten_when_asked(dynamodb, endpoint_url, table_name,
                                                                           tmp_path, copied_in_two_segments):  # fmt: skip
    _, path = copied_in_two_segments
    other = table_name("delta-rerun-other")
    create_sample_table(dynamodb, other)
    put_items(dynamodb, other, list(make_items(ITEMS))[: ITEMS // 2])
    before = log_entries(path)

    refused = run_job(copy_config(tmp_path, endpoint_url, other, path, 2, "other.yaml"))

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert_one_clear_line(refused, ["holds rows that no commit of this copy wrote", "nothing was written",
                                    "overwrite: true", "new target.path"])  # fmt: skip
    assert log_entries(path) == before

    overwritten = run_job(copy_config(tmp_path, endpoint_url, other, path, 2, "overwrite.yaml", overwrite=True))

    assert overwritten.returncode == 0, overwritten.stdout + overwritten.stderr
    held = keys_held(path)
    assert len(held) == ITEMS // 2 and set(held.values()) == {1}, held.most_common(3)


def test_a_second_full_export_into_the_table_of_the_first_is_refused(s3, endpoint_url, tmp_path):
    lines = full_lines([dynamodb_numbers(to_dynamodb_json(item)) for item in all_types_items()], DYNAMODB_JSON)
    bucket = create_bucket(s3)
    path = tmp_path / "lake"

    def import_config(export, name):
        return write_config(tmp_path, {
            "source": export_source(endpoint_url, bucket, export.summary_key),
            "target": {"type": "delta", "path": str(path), **reaching(endpoint_url)},
        }, name=name)  # fmt: skip

    first = run_job(import_config(write_export(s3, bucket, [DataFileSpec(lines)]), "first.yaml"))
    assert first.returncode == 0, first.stdout + first.stderr
    rows = DeltaTable(str(path)).to_pyarrow_table().num_rows
    before = log_entries(path)

    second = run_job(import_config(write_export(s3, bucket, [DataFileSpec(lines)]), "second.yaml"))

    assert second.returncode == 2, second.stdout + second.stderr
    assert_one_clear_line(second, ["holds rows that no commit of this copy wrote", "nothing was written"])
    assert log_entries(path) == before and DeltaTable(str(path)).to_pyarrow_table().num_rows == rows
