"""An item with both a rename's `from` and its `to` attribute stops the run, in every path that renames.

Renamed, both attributes would land on one name and one value would be dropped silently
(which one depends on the order of the item's attributes). Instead the run stops with one
error naming the item's key and both attributes: exit code 1, progress so far kept. Paths:
the snapshot, an S3 export import (full and incremental), replication, and writing an export.
"""

from __future__ import annotations

import time

import pytest
import yaml

from migrator.config import load_config
from migrator.config.segments import SegmentRanges
from migrator.errors import MigratorError, RenameCollision
from migrator.export.errors import ImportFileFailed
from migrator.items import to_dynamodb_json
from migrator.run import migrate
from testsupport.endpoint import put_items, scan_all, side
from testsupport.export_imports import import_config
from testsupport.jobs import assert_one_clear_line, run_job, write_config
from testsupport.replication import list_commits
from testsupport.s3_exports import (
    DYNAMODB_JSON,
    Change,
    DataFileSpec,
    create_bucket,
    dynamodb_numbers,
    full_lines,
    incremental_lines,
    write_export,
)
from testsupport.sample_data import create_sample_table, make_item, make_items

pytestmark = pytest.mark.integration

RENAMES = [{"from": "name", "to": "title"}]  # every sample item has `name`
COLLIDING = 57


def colliding_item(i: int = COLLIDING) -> dict:
    """A sample item that also holds the rename's `to`."""
    return {**make_item(i), "title": {"S": "already has the new name"}}


def key_text(i: int = COLLIDING) -> str:
    return f'{{"pk": {{"S": "user#{i % 997:04d}"}}, "sk": {{"N": "{i}"}}}}'  # make_item's key


def assert_names_the_collision(message: str, i: int = COLLIDING) -> None:
    assert key_text(i) in message, message
    assert "both attribute 'name' and attribute 'title'" in message, message


def test_snapshot_stops_naming_the_item_keeps_the_savepoint_and_resumes_once_fixed(
    dynamodb, endpoint_url, table_name, tmp_path
):
    source, target = table_name("collide-src"), table_name("collide-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, [*make_items(COLLIDING), colliding_item(), *make_items(142, start=COLLIDING + 1)])
    config = write_config(
        tmp_path,
        {"source": side(endpoint_url, source, scanSegments=4), "target": side(endpoint_url, target), "renames": RENAMES},
    )

    result = run_job(config)

    assert result.returncode == 1, result.stdout + result.stderr
    assert_one_clear_line(result, [key_text(), "both attribute 'name' and attribute 'title'", "Ways out"])
    (savepoint,) = (tmp_path / "savepoints").glob("savepoint_*.yaml")
    saved = yaml.safe_load(savepoint.read_text())
    failed_segment = int(result.stderr.split("copying scan segment ")[1].split()[0])
    assert saved["source"]["scanSegments"] == 4 and failed_segment not in SegmentRanges.parse(saved.get("skipSegments") or [])
    stored = {(i["pk"]["S"], i["sk"]["N"]): i for i in scan_all(dynamodb, target)}
    assert ("user#0057", "57") not in stored, "the colliding item was not written"

    dynamodb.put_item(TableName=source, Item=make_item(COLLIDING))  # the way out: the item without `title`
    again = run_job(config)

    assert again.returncode == 0, again.stdout + again.stderr
    copied = scan_all(dynamodb, target)
    assert len(copied) == 200
    assert all("title" in item and "name" not in item for item in copied)


def export_lines(kind: str, items: list[dict]) -> list[str]:
    """The items as a full export's lines, or as an incremental export's puts."""
    exported = [dynamodb_numbers(to_dynamodb_json(item)) for item in items]
    if kind == "full":
        return full_lines(exported, DYNAMODB_JSON)
    changes = [Change({"pk": item["pk"], "sk": item["sk"]}, item, micros=100 + n) for n, item in enumerate(exported)]
    return incremental_lines(changes, DYNAMODB_JSON)


@pytest.mark.parametrize("kind", ["full", "incremental"])
def test_export_import_stops_naming_the_item(kind, s3, dynamodb, endpoint_url, table_name, tmp_path, spark):
    target = table_name(f"collide-{kind}")
    lines = export_lines(kind, [*make_items(10), colliding_item()])
    export = write_export(s3, create_bucket(s3), [DataFileSpec(lines)], incremental=kind == "incremental")
    config = import_config(tmp_path, endpoint_url, export, target)
    document = yaml.safe_load(config.read_text())
    document["renames"] = RENAMES
    config.write_text(yaml.safe_dump(document))

    with pytest.raises(MigratorError) as refused:
        migrate(load_config(str(config)), lambda: spark)

    assert isinstance(refused.value, ImportFileFailed if kind == "full" else RenameCollision)
    assert refused.value.exit_code == 1 and not refused.value.retryable
    assert_names_the_collision(str(refused.value))
    assert list((tmp_path / "savepoints").glob("savepoint_*.yaml")), "the savepoint is kept"
    assert ("user#0057", "57") not in {(i["pk"]["S"], i["sk"]["N"]) for i in scan_all(dynamodb, target)}


def test_writing_an_export_stops_naming_the_item(dynamodb, endpoint_url, table_name, tmp_path, spark):
    source = table_name("collide-export")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, [*make_items(5), colliding_item()])
    config = write_config(tmp_path, {
        "source": side(endpoint_url, source, scanSegments=2), "renames": RENAMES,
        "target": {"type": "dynamodb-s3-export", "path": str(tmp_path / "exports")},
    })  # fmt: skip

    with pytest.raises(MigratorError) as refused:
        migrate(load_config(str(config)), lambda: spark)

    assert refused.value.exit_code == 1
    assert_names_the_collision(str(refused.value))
    assert not list((tmp_path / "exports").rglob("manifest-summary.json")), "no finished export"


def test_replication_stops_naming_the_item_without_committing_the_batch(
    dynamodb, endpoint_url, table_name, tmp_path, spark
):
    source, target = table_name("collide-live"), table_name("collide-live-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(20))
    checkpoint = tmp_path / "checkpoint"
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source),
            "target": side(endpoint_url, target, streamChanges=True),
            "checkpointLocation": str(checkpoint),
            "renames": RENAMES,
        },
    )
    deadline = time.monotonic() + 90
    written = []

    def should_stop(summary) -> bool:
        assert time.monotonic() < deadline, f"the collision never stopped replication: {summary}"
        if not written:
            put_items(dynamodb, source, [colliding_item(1000)])
            written.append(True)
        return False

    with pytest.raises(RenameCollision) as refused:
        migrate(load_config(str(config)), lambda: spark, should_stop)

    assert refused.value.exit_code == 1
    assert_names_the_collision(str(refused.value), 1000)
    assert len(scan_all(dynamodb, target)) == 20, "the snapshot was copied, the colliding change not applied"
    offsets = {p.name for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()}
    committed = {p.name for p in list_commits(checkpoint)}
    assert offsets - committed, "the batch holding the collision was not committed: a rerun replays it"
