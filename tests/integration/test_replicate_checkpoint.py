"""Replication end to end, in process (the shared Spark session, moto over HTTP): the checkpoint's
name and age, invalidCheckpointBehavior, and streams whose records carry no new image."""

from __future__ import annotations

import json
import logging
import time

import pytest

from migrator.replicate.checkpoint import HEARTBEAT_FILE
from migrator.config import load_config
from migrator.errors import CheckpointError
from migrator.run import migrate
from testsupport.all_types import by_key
from testsupport.endpoint import put_items, scan_all, side
from testsupport.jobs import write_config
from testsupport.replication import (
    HOURS,
    RUN_SECONDS,
    Changes,
    age_checkpoint,
    list_commits,
    until_converged,
    write_heartbeat,
)
from testsupport.sample_data import SAMPLE_ATTRIBUTES, SAMPLE_KEY_SCHEMA, create_sample_table, make_items

pytestmark = pytest.mark.integration


def test_a_stale_checkpoint_is_refused_then_restart_copies_the_table_again(dynamodb, endpoint_url, table_name, tmp_path, spark):
    source, target = table_name("stale"), table_name("stale-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    checkpoint = tmp_path / "checkpoint"
    document = {
        "source": side(endpoint_url, source),
        "target": side(endpoint_url, target, streamChanges=True),
        "checkpointLocation": str(checkpoint),
    }
    config = write_config(tmp_path, document)
    first = migrate(load_config(str(config)), lambda: spark,
                    until_converged(dynamodb, source, target, Changes(dynamodb, source, 100), checkpoint))
    assert first.replication.records > 0 and list_commits(checkpoint)

    # Stopped for 19 hours, and the source changed meanwhile.
    age_checkpoint(checkpoint, hours=19)
    put_items(dynamodb, source, make_items(5, start=200))
    before = by_key(scan_all(dynamodb, target))

    with pytest.raises(CheckpointError) as refused:
        migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, source, target))
    message = str(refused.value)
    assert str(checkpoint) in message and "19.0 h ago" in message and "18 h" in message, message
    assert "invalidCheckpointBehavior: restart" in message and "delete the checkpoint directory" in message
    assert refused.value.exit_code == 2
    assert by_key(scan_all(dynamodb, target)) == before, "the refused run wrote to the target"
    assert list_commits(checkpoint), "the refused run dropped the checkpoint"

    document["invalidCheckpointBehavior"] = "restart"
    config = write_config(tmp_path, document)
    again = migrate(load_config(str(config)), lambda: spark,
                    until_converged(dynamodb, source, target, Changes(dynamodb, source, 300), checkpoint))
    assert again.replication.reinitializations == 1
    assert "re-initialized:  1 times" in again.render()
    assert again.snapshot is not None and again.snapshot.segments_resumed == 0, "the table was not copied again"
    assert again.snapshot.written == 30 + 5 - 1 + 5, again.snapshot.render()
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))


def test_an_idle_job_keeps_its_checkpoint_fresh_with_a_heartbeat(dynamodb, endpoint_url, table_name, tmp_path, spark):
    """No change for hours means no batch and no commit: the heartbeat must say the job was reading."""
    source, target = table_name("idle"), table_name("idle-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(5))
    checkpoint = tmp_path / "checkpoint"
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source),
            "target": side(endpoint_url, target, streamChanges=True),
            "checkpointLocation": str(checkpoint),
        },
    )
    changes = Changes(dynamodb, source, 100)
    migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, source, target, changes, checkpoint))
    age_checkpoint(checkpoint, hours=19)  # the last change was 19 hours ago...
    (checkpoint / HEARTBEAT_FILE).unlink(missing_ok=True)
    (checkpoint / f".{HEARTBEAT_FILE}.crc").unlink(missing_ok=True)
    deadline = time.monotonic() + RUN_SECONDS

    def until_heartbeat(summary) -> bool:
        """Stop once the running job has written a heartbeat."""
        assert time.monotonic() < deadline, "no heartbeat while idle"
        heartbeat = checkpoint / HEARTBEAT_FILE
        return heartbeat.exists() and json.loads(heartbeat.read_text())["aliveAt"] > started

    started = time.time()

    with pytest.raises(CheckpointError):  # ...and nothing says the job was reading since
        migrate(load_config(str(config)), lambda: spark, until_heartbeat)
    write_heartbeat(checkpoint, time.time() - 17 * HOURS)
    result = migrate(load_config(str(config)), lambda: spark, until_heartbeat)  # 17 h: resumed
    assert result.replication.batches == 0, "an idle source made a batch"
    assert result.replication.reinitializations == 0


def test_app_name_names_the_checkpoint_so_two_migrators_of_one_source_each_see_every_change(
    dynamodb, endpoint_url, table_name, tmp_path, spark, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # the default location is relative: ./checkpoints/<appName>
    source = table_name("shared")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(10))
    configs = {}
    for name in ("east", "west"):
        configs[name] = write_config(
            tmp_path,
            {
                "source": side(endpoint_url, source),
                "target": side(endpoint_url, f"{source}-{name}", streamChanges=True),
                "appName": f"orders_to_{name}",
                "savepoints": {"path": str(tmp_path / f"savepoints-{name}")},
            },
            name=f"{name}.yaml",
        )
    # Each runs while the other is stopped, then resumes and catches up with what it missed.
    for start, name in ((100, "east"), (200, "west"), (300, "east"), (None, "west")):
        target = f"{source}-{name}"
        checkpoint = tmp_path / "checkpoints" / f"orders_to_{name}"
        changes = Changes(dynamodb, source, start) if start is not None else None
        migrate(load_config(str(configs[name])), lambda: spark,
                until_converged(dynamodb, source, target, changes, checkpoint))
    for name in ("east", "west"):
        assert by_key(scan_all(dynamodb, f"{source}-{name}")) == by_key(scan_all(dynamodb, source)), name
        assert list_commits(tmp_path / "checkpoints" / f"orders_to_{name}"), name
    assert not (tmp_path / "checkpoints" / f"migrator_{source}").exists()


@pytest.mark.parametrize("view_type", ["KEYS_ONLY", "OLD_IMAGE"])
def test_a_stream_without_new_images_is_applied_by_reading_the_source(
    view_type, dynamodb, endpoint_url, table_name, tmp_path, spark, caplog
):
    source, target = table_name(f"view-{view_type.lower()}"), table_name("view-copy")
    dynamodb.create_table(
        TableName=source, KeySchema=SAMPLE_KEY_SCHEMA, AttributeDefinitions=SAMPLE_ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST", StreamSpecification={"StreamEnabled": True, "StreamViewType": view_type},
    )  # fmt: skip
    put_items(dynamodb, source, make_items(10))
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, enableStream=False),  # the existing stream is used
            "target": side(endpoint_url, target, streamChanges=True),
            "checkpointLocation": str(tmp_path / "checkpoint"),
        },
    )
    caplog.set_level(logging.WARNING, "migrator.source.dynamodb_streams")
    result = migrate(load_config(str(config)), lambda: spark,
                     until_converged(dynamodb, source, target, Changes(dynamodb, source, 100), tmp_path / "checkpoint"))
    assert result.replication.puts > 0 and result.replication.deletes > 0
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))
    warnings = [r.getMessage() for r in caplog.records if view_type in r.getMessage()]
    assert warnings and "strongly consistent GetItem" in warnings[0] and "NEW_AND_OLD_IMAGES" in warnings[0]
