"""invalidCheckpointBehavior: restart copies the table again into the existing target: the items the
source deleted while the job was stopped must go from the target too, even when the stream no longer
holds those deletions (Kinesis mode replays from the restart's own instant), and a stop during that
clean-up must not lose it.

In process on the shared Spark session (moto over HTTP with the Kinesis destination extension),
except the run stopped with SIGTERM, which runs through spark-submit as a user runs it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from testsupport.all_types import by_key
from testsupport.endpoint import put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import drain, start_job, write_config
from testsupport.kinesis_runs import create_stream, run, until_converged, write_changes
from testsupport.replication import age_checkpoint
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 30
GONE = 5  # items deleted in the source while the job is stopped


def deletions_owed(savepoints: Path) -> list[Path]:
    return list(savepoints.glob("*.deletions-owed"))


def stopped_then_restarted(dynamodb, kinesis, endpoint_url, target_endpoint, table_name, tmp_path, spark):
    """A first run until converged, items deleted in the source while stopped, the checkpoint aged past
    the stream's retention; returns the restart's config and the tables."""
    source, target = table_name("restart"), table_name("restart-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    document = {
        "source": side(endpoint_url, source, scanSegments=2),
        "target": side(target_endpoint, target, streamChanges={"type": "kinesis", "streamArn": create_stream(kinesis)}),
        "checkpointLocation": str(tmp_path / "checkpoint"),
    }
    # Changes while replicating: a batch is committed, so the checkpoint says when the job was last alive.
    converged = until_converged(dynamodb, source, target, [write_changes(dynamodb, source, 100)], checkpoint=tmp_path / "checkpoint")
    run(write_config(tmp_path, document), spark, converged)

    for item in make_items(GONE):
        dynamodb.delete_item(TableName=source, Key={"pk": item["pk"], "sk": item["sk"]})
    age_checkpoint(tmp_path / "checkpoint", hours=19)  # past the 24 h stream's limit of 18 h
    document["invalidCheckpointBehavior"] = "restart"
    return write_config(tmp_path, document, name="restart.yaml"), source, target


def test_restart_deletes_from_the_target_the_items_the_source_deleted_while_stopped(
    dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark
):
    config, source, target = stopped_then_restarted(dynamodb, kinesis, endpoint_url, endpoint_url, table_name, tmp_path, spark)

    result = run(config, spark, lambda summary: True)  # the clean-up comes before replication starts

    assert result.replication.reinitializations == 1
    assert len(scan_all(dynamodb, target)) == len(scan_all(dynamodb, source)), "deleted items were resurrected"
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))
    assert result.snapshot.deleted_from_target == GONE, result.snapshot.render()
    assert f"items deleted:   {GONE}" in result.snapshot.render()
    assert not deletions_owed(tmp_path / "savepoints")


@pytest.mark.e2e
def test_a_stop_during_the_clean_up_redoes_it_on_the_next_run(dynamodb, kinesis, endpoint_url, table_name, tmp_path, spark):
    with FaultProxy(endpoint_url, fault_rate=0.0) as target_proxy:
        config, source, target = stopped_then_restarted(
            dynamodb, kinesis, endpoint_url, target_proxy.endpoint_url, table_name, tmp_path, spark
        )
        held = target_proxy.hold_next("BatchWriteItem", containing=b"DeleteRequest")
        lines: list[str] = []
        job = start_job(config)
        reader = drain(job, lines)
        assert held.wait(timeout=240), "".join(lines[-60:])  # the clean-up is deleting: stop the job now
        os.kill(job.pid, signal.SIGTERM)
        assert job.wait(timeout=60) == 143, "".join(lines[-60:])
        target_proxy.release_held()  # hung up on once the job is gone: that delete never lands
        reader.join(timeout=10)
        output = "".join(lines)
        assert "Traceback" not in output and "py4j" not in output.lower(), output[-4000:]
        assert "the clean-up" in output or "rerun" in output, output[-4000:]

        savepoints = tmp_path / "savepoints"
        assert deletions_owed(savepoints), "nothing says the clean-up is unfinished"
        assert list(savepoints.glob("savepoint_*.yaml")), "the savepoint of the re-copy is kept"
        assert len(scan_all(dynamodb, target)) > len(scan_all(dynamodb, source))

        rerun = run(config, spark, lambda summary: True)

    assert rerun.snapshot.segments_resumed == 2, "the re-copy was finished: not copied again"
    assert by_key(scan_all(dynamodb, target)) == by_key(scan_all(dynamodb, source))
    assert not deletions_owed(savepoints)
