"""The snapshot under faults: throttling, 5xx and dropped connections still give an exact copy."""

from __future__ import annotations

import pytest

from testsupport.all_types import assert_same_items
from testsupport.endpoint import put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import migrate_on_session, run_job, write_config
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 2_000


def test_copy_is_exact_under_injected_faults(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("faulty"), table_name("faulty-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    with FaultProxy(endpoint_url, fault_rate=0.15, operations={"Scan", "BatchWriteItem"}, seed=7) as proxy:
        config = write_config(
            tmp_path,
            {
                "source": side(proxy.endpoint_url, source, scanSegments=4),
                "target": side(proxy.endpoint_url, target),
            },
        )
        summary = migrate_on_session(config, spark)
        injected = proxy.counts

    assert all(injected[kind] > 0 for kind in ("throughput", "throttling", "http500", "http503", "drop")), injected
    assert summary.retries >= sum(injected[k] for k in ("throughput", "throttling", "http500", "http503", "drop"))
    assert summary.written == summary.scanned == ITEMS
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))


THROTTLED_SECONDS = 60


@pytest.mark.parametrize("answer", ["error", "unprocessed"])
def test_snapshot_waits_out_a_minute_of_throttled_writes(dynamodb, endpoint_url, table_name, tmp_path, answer):
    """Every BatchWriteItem is throttled for a minute (ProvisionedThroughputExceededException, or
    every item left unprocessed): the job slows down, says so, never gives a segment up, and
    finishes the copy once the throttling stops."""
    source, target = table_name("throttled"), table_name("throttled-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:
        proxy.throttle("BatchWriteItem", THROTTLED_SECONDS, answer=answer)
        config = write_config(
            tmp_path,
            {
                "source": side(endpoint_url, source, scanSegments=4),
                "target": side(proxy.endpoint_url, target),
            },
        )
        job = run_job(config)
        counts = proxy.counts
        throttled_for = proxy.last_throttled - proxy.first_throttled

    output = job.stdout + job.stderr
    assert job.returncode == 0, output[-4000:]
    assert counts["throttled"] > 0 and throttled_for >= THROTTLED_SECONDS - 5, (counts, throttled_for)
    assert "retrying the segment" not in output, "throttling made a segment fail:\n" + output[-4000:]
    assert "throttled: writing to target table" in output and "target.throttlingGiveUpMinutes" in output, output[-4000:]
    assert_same_items(make_items(ITEMS), scan_all(dynamodb, target))
