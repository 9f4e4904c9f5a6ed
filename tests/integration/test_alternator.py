"""Alternator as a target and a source, through local nodes standing for a cluster
(testsupport.alternator_cluster): requests spread over the live nodes the seed lists, a node
that goes away is dropped, and Alternator's differences from DynamoDB are handled."""

from __future__ import annotations

import json
import threading
import time

import pytest

from migrator import aws
from migrator.config import load_config
from migrator.errors import ConfigError
from migrator.run import migrate
from migrator.task_boundary import errors_returned
from testsupport.all_types import assert_same_items
from testsupport.alternator_cluster import AlternatorCluster
from testsupport.endpoint import list_tables, put_items, reaching, scan_all, side
from testsupport.jobs import migrate_on_session, run_job, write_config
from testsupport.planted import EXPECTED_SAMPLES, RENAMES, plant
from testsupport.replication import Changes, until_converged
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

# Three nodes in dc1 (racks r1, r1, r2) and one in dc2; the seed, node 0, is in dc1.
PLACES = [("dc1", "r1"), ("dc1", "r1"), ("dc1", "r2"), ("dc2", "r1")]
ITEMS = 3_000


def alternator(cluster: AlternatorCluster, table: str, **extra) -> dict:
    """A `type: alternator` block reaching the cluster's seed; node lists refreshed every 200 ms."""
    return {"type": "alternator", "table": table, **reaching(cluster.endpoint_url),
            "activeRefreshIntervalMs": 200, **extra}  # fmt: skip


def refreshing_node_lists() -> int:
    """How many Alternator node lists this process is refreshing in the background now."""
    return sum(1 for thread in threading.enumerate() if thread.name == "alternator-node-refresh" and thread.is_alive())


def sample_tables(dynamodb, table_name, name: str, items: list[dict]) -> tuple[str, str]:
    """A source table of sample items, and the name of its copy."""
    source, target = table_name(name), table_name(f"{name}-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, items)
    return source, target


def test_copy_to_alternator_spreads_over_live_nodes_and_drops_a_stopped_one(
    dynamodb, endpoint_url, spark, table_name, tmp_path
):
    """Writes go to the seed datacenter's three nodes (never dc2's), gzipped; node 2 stops after
    its fifth write (or the few in flight then): later requests go to the others, and the copy is exact."""
    source, target = sample_tables(dynamodb, table_name, "to-alternator", make_items(ITEMS))
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        stopped = cluster.stop_after(2, "BatchWriteItem", 5)
        config = write_config(
            tmp_path,
            {"source": side(endpoint_url, source, scanSegments=4),
             "target": alternator(cluster, target, compression=True)},
        )  # fmt: skip
        summary = migrate_on_session(config, spark)
        writes = [node["BatchWriteItem"] for node in cluster.requests]
        discoveries = list(cluster.discoveries)
        gzip_bodies = cluster.gzip_bodies
        refreshing_after_the_run = refreshing_node_lists()

    # Writes in flight when node 2 stopped were served too; after that it got none, the others went on.
    assert stopped.is_set() and 5 <= writes[2] < min(writes[0], writes[1]) / 2, writes
    assert writes[3] == 0, writes
    assert gzip_bodies >= sum(writes), (gzip_bodies, writes)  # every batch of 25 sample items is over 1 KB
    assert discoveries[0] > 1, discoveries  # the list was refreshed from the seed during the copy
    # Requests sent to the stopped node before the next refresh were retried on another node; once
    # dropped, it got none: far fewer retries than the third of later writes it would have drawn.
    assert summary.retries < (writes[0] + writes[1]) / 6, (summary.retries, writes)
    assert summary.written == summary.scanned == ITEMS
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))
    # The process outlives the run (a notebook): nothing goes on asking the cluster for its nodes.
    assert refreshing_after_the_run == 0


def test_alternator_source_scans_the_rack_it_is_given(dynamodb, endpoint_url, spark, table_name, tmp_path):
    """A source in dc1's rack r1: its Scans spread over nodes 0 and 1, the rack's two nodes, only."""
    source, target = sample_tables(dynamodb, table_name, "from-alternator", make_items(ITEMS))
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        config = write_config(
            tmp_path,
            {"source": alternator(cluster, source, scanSegments=8, datacenter="dc1", rack="r1"),
             "target": side(endpoint_url, target)},
        )  # fmt: skip
        summary = migrate_on_session(config, spark)
        scans = [node["Scan"] for node in cluster.requests]

    assert scans[0] > 0 and scans[1] > 0 and scans[2] == scans[3] == 0, scans
    assert summary.written == summary.scanned == ITEMS
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))


def test_alternator_differences_batches_of_100_no_capacity_reported(
    dynamodb, endpoint_url, spark, table_name, tmp_path
):
    """Nodes that refuse ReturnConsumedCapacity INDEXES and report no ConsumedCapacity, asked for
    TOTAL (removeConsumedCapacity: false) and sent batches of 100: 200 items of under 1 KB are
    estimated at 200 WCU, so at 100 WCU × 0.5 with a one-second burst the copy takes 2.5 s or more."""
    source, target = sample_tables(dynamodb, table_name, "alternator-paced", make_items(200, payload_bytes=100))
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        config = write_config(
            tmp_path,
            {"source": alternator(cluster, source, scanSegments=1, removeConsumedCapacity=False),
             "target": alternator(cluster, target, maxItemsPerBatch=100, removeConsumedCapacity=False,
                                  writeThroughput=100, throughputWritePercent=0.5)},
        )  # fmt: skip
        summary = migrate_on_session(config, spark)
        asked, stripped, largest = cluster.capacity_asked, cluster.capacity_stripped, cluster.largest_batch

    assert largest == 100
    assert asked > 0 and stripped > 0, (asked, stripped)  # the Scans' ConsumedCapacity was removed
    assert summary.seconds >= 2.5 - 0.1
    assert summary.written == 200
    assert_same_items(make_items(200, payload_bytes=100), scan_all(dynamodb, target))


def test_a_datacenter_without_nodes_is_one_config_error_before_anything_is_written(
    dynamodb, endpoint_url, spark, table_name, tmp_path
):
    source, target = sample_tables(dynamodb, table_name, "no-such-dc", make_items(10))
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        config = write_config(
            tmp_path,
            {"source": side(endpoint_url, source), "target": alternator(cluster, target, datacenter="dc9")},
        )
        with pytest.raises(ConfigError) as refused:
            migrate_on_session(config, spark)
        served = sum(sum(node.values()) for node in cluster.requests)

    assert refused.value.exit_code == 2 and refused.value.key_path == "target.datacenter"
    assert "no live Alternator node in datacenter 'dc9'" in str(refused.value) and "\n" not in str(refused.value)
    assert served == 0 and target not in list_tables(dynamodb)


def test_validation_against_alternator_reads_over_its_nodes(dynamodb, endpoint_url, tmp_path):
    """The validator's Scans and re-reads of an Alternator target (asked for TOTAL, given no capacity)
    spread over the nodes, and its report is the one the planted differences give on DynamoDB."""
    stamp = str(time.time_ns())[-8:]
    source, target = f"alt-val-src-{stamp}", f"alt-val-dst-{stamp}"
    plant(dynamodb, source, target)
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        config = write_config(
            tmp_path,
            {"source": side(endpoint_url, source, scanSegments=3),
             "target": alternator(cluster, target, scanSegments=3, removeConsumedCapacity=False),
             "renames": [{"from": k, "to": v} for k, v in RENAMES.items()]},
        )  # fmt: skip
        report = tmp_path / "report.json"
        result = run_job(config, job="validate.py", args=("--report", str(report)))
        reads = [node["Scan"] + node["GetItem"] for node in cluster.requests]
        asked = cluster.capacity_asked

    assert result.returncode == 1, result.stdout + result.stderr[-3000:]
    assert json.loads(report.read_text()) == {
        "sourceItems": 14, "targetItems": 12, "equal": 6, "missing": 2, "extra": 1, "different": 4,
        "duplicate": 0, "skippedExpired": 2, "samples": EXPECTED_SAMPLES, "repaired": {"missing": 0, "different": 0, "extra": 0, "duplicate": 0},
    }  # fmt: skip
    assert sum(1 for count in reads[:3] if count > 0) >= 2 and reads[3] == 0, reads
    assert asked > 0


def test_replication_to_alternator_applies_changes_over_its_nodes(dynamodb, endpoint_url, spark, table_name, tmp_path):
    """Snapshot, then DynamoDB Streams changes applied to an Alternator target: the changes' writes
    spread over the nodes too, and the target converges to the source."""
    source, target = sample_tables(dynamodb, table_name, "alt-stream", make_items(300))
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        config = write_config(
            tmp_path,
            {"source": side(endpoint_url, source, scanSegments=2),
             "target": alternator(cluster, target, streamChanges=True),
             "checkpointLocation": str(tmp_path / "checkpoint")},
        )  # fmt: skip
        after_snapshot: list[list[int]] = []

        def writes() -> list[int]:
            return [node["BatchWriteItem"] for node in cluster.requests]

        converged = until_converged(dynamodb, source, target, Changes(dynamodb, source, 1_000))

        def should_stop(summary) -> bool:
            if not after_snapshot:
                after_snapshot.append(writes())  # the first call comes once the snapshot is done
            return converged(summary)

        summary = migrate(load_config(str(config)), lambda: spark, should_stop)
        applied = [now - before for now, before in zip(writes(), after_snapshot[0])]
        refreshing_after_the_run = refreshing_node_lists()

    assert summary.replication.records > 0
    assert sum(1 for count in applied[:3] if count > 0) >= 1 and applied[3] == 0, applied
    assert sum(1 for count in writes()[:3] if count > 0) >= 2, writes()
    assert refreshing_after_the_run == 0  # stopped with the replication, in a process that goes on


def test_a_tasks_end_pauses_node_discovery_and_a_later_tasks_client_resumes_it(endpoint_url, tmp_path):
    """An executor's Python worker outlives its tasks: refreshing the node list stops when a task
    ends, so nothing polls the cluster (or a later listener at its address); the next task's client
    starts it again, asking the seed at once."""
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        config = write_config(tmp_path, {"source": side(endpoint_url, "src"), "target": alternator(cluster, "dst")})
        spec = load_config(str(config)).config.target.client_spec("target")
        with errors_returned("a task") as caught:
            aws.client(spec).list_tables()
            during_the_task = refreshing_node_lists()
        after_the_task = refreshing_node_lists()
        asked = cluster.discoveries[0]

        aws.client(spec).list_tables()  # a later task's requests
        in_the_next_task = refreshing_node_lists()
        deadline = time.monotonic() + 10
        while cluster.discoveries[0] == asked and time.monotonic() < deadline:
            time.sleep(0.01)
        asked_again = cluster.discoveries[0] > asked
        aws.pause_node_discovery()

    assert caught.error is None
    assert (during_the_task, after_the_task, in_the_next_task) == (1, 0, 1)
    assert asked_again
