"""Replication under throttling and at the configured rates: a minute of throttled writes is waited
out, writes keep to writeThroughput × throughputWritePercent and source lookups (KEYS_ONLY streams)
to readThroughput × throughputReadPercent.

Rates are measured where the target sees them: the fault proxy timestamps each request as it arrives.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from migrator.config import load_config
from migrator.run import migrate
from testsupport.all_types import by_key
from testsupport.endpoint import put_items, scan_all, side
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import drain, start_job, wait_for_output, write_config
from testsupport.replication import wait_until_converged
from testsupport.sample_data import SAMPLE_ATTRIBUTES, SAMPLE_KEY_SCHEMA, create_sample_table, make_item, make_items

pytestmark = pytest.mark.integration

THROTTLED_SECONDS = 60
RUN_SECONDS = 180
# The shortest stretch of requests a rate is measured over. When the job stalls for a moment (the
# GIL, a GC pause, a loaded machine), requests already paid for in the limiter leave together once
# it resumes: a stretch that starts with them counts their units over less time, by the stall over
# the stretch's length. 10 s keeps a 0.6 s stall to about 6% (5 s, to 12%); the runs
# last 16 s (writes) and 20 s (lookups) at the configured rates.
MEASURED_SECONDS = 10.0


@pytest.mark.e2e
def test_replication_waits_out_a_minute_of_throttled_writes(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("throttled-live"), table_name("throttled-live-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(100))
    with FaultProxy(endpoint_url, fault_rate=0.0) as proxy:
        config = write_config(
            tmp_path,
            {
                "source": side(endpoint_url, source),
                "target": side(proxy.endpoint_url, target, streamChanges=True),
                "checkpointLocation": str(tmp_path / "checkpoint"),
            },
        )
        lines: list[str] = []
        job = start_job(config)
        wait_for_output(job, "replicating changes of", lines)
        reader = drain(job, lines)  # from now on: an undrained pipe fills (64 KiB) and blocks the job
        proxy.throttle("BatchWriteItem", THROTTLED_SECONDS)  # from replication's first write on
        put_items(dynamodb, source, make_items(300, start=1000))
        for number in range(0, 100, 10):
            gone = make_item(number)
            dynamodb.delete_item(TableName=source, Key={"pk": gone["pk"], "sk": gone["sk"]})
        wait_until_converged(dynamodb, source, target, timeout=THROTTLED_SECONDS + 120)
        still_running = job.poll() is None
        counts, throttled_for = proxy.counts, proxy.last_throttled - proxy.first_throttled
        os.killpg(job.pid, signal.SIGINT)
        exit_code = job.wait(timeout=60)
        reader.join(timeout=10)

    output = "".join(lines)
    assert still_running and exit_code == 0, output[-4000:]
    assert counts["throttled"] > 0 and throttled_for >= THROTTLED_SECONDS - 5, (counts, throttled_for)
    assert "throttled: writing to target table" in output and "target.throttlingGiveUpMinutes" in output


def test_replication_writes_at_the_configured_rate(dynamodb, endpoint_url, table_name, tmp_path, spark):
    source, target = table_name("paced-writes"), table_name("paced-writes-copy")
    create_sample_table(dynamodb, source)
    write_units = 100 * 0.5  # writeThroughput × throughputWritePercent
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True, clock=time.monotonic) as proxy:
        config = write_config(
            tmp_path,
            {
                "source": side(endpoint_url, source),
                "target": side(
                    proxy.endpoint_url, target, streamChanges=True, skipInitialSnapshotTransfer=True,
                    writeThroughput=100, throughputWritePercent=0.5,
                    removeConsumedCapacity=True,  # moto reports one unit per BatchWriteItem, whatever it holds
                ),
                "checkpointLocation": str(tmp_path / "checkpoint"),
            },
        )  # fmt: skip
        changes = lambda: put_items(dynamodb, source, make_items(800))  # noqa: E731: 16 s of writes at the rate
        migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, source, target, changes))
        writes = [(arrived, body) for operation, body, arrived, _ in proxy.recorded if operation == "BatchWriteItem"]

    units = [(arrived, write_units_of(body)) for arrived, body in writes]
    assert sum(u for _, u in units) == 800
    assert measured_rate(units) == pytest.approx(write_units, rel=0.1)


def test_replication_paces_source_lookups_at_the_read_share(dynamodb, endpoint_url, table_name, tmp_path, spark):
    source, target = table_name("paced-lookups"), table_name("paced-lookups-copy")
    dynamodb.create_table(
        TableName=source, KeySchema=SAMPLE_KEY_SCHEMA, AttributeDefinitions=SAMPLE_ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST", StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
    )  # fmt: skip
    # readThroughput × throughputReadPercent: below what one shard's lookups reach on the emulator (about
    # 15/s, one GetItem at a time), so the pacing, not the emulator's latency, sets the rate.
    read_units = 20 * 0.5
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True, clock=time.monotonic) as proxy:
        config = write_config(
            tmp_path,
            {
                "source": side(
                    proxy.endpoint_url, source, enableStream=False, readThroughput=20, throughputReadPercent=0.5,
                    removeConsumedCapacity=True,  # moto reports half a unit for every GetItem, even a consistent one
                ),
                "target": side(endpoint_url, target, streamChanges=True, skipInitialSnapshotTransfer=True),
                "checkpointLocation": str(tmp_path / "checkpoint"),
            },
        )  # fmt: skip
        changes = lambda: put_items(dynamodb, source, make_items(200))  # noqa: E731: 20 s of lookups at the rate
        migrate(load_config(str(config)), lambda: spark, until_converged(dynamodb, source, target, changes))
        lookups = [(arrived, body) for operation, body, arrived, _ in proxy.recorded if operation == "GetItem"]

    assert all(json.loads(body)["ConsistentRead"] for _, body in lookups)
    units = [(arrived, 1) for arrived, _ in lookups]  # a strongly consistent read of an item under 4 KB
    assert len(units) >= 200
    assert measured_rate(units) == pytest.approx(read_units, rel=0.1)


def until_converged(client, source: str, target: str, write_changes):
    """A should_stop for migrate(): make the changes once replication runs, then stop when the
    target equals the source; fail after RUN_SECONDS."""
    deadline = time.monotonic() + RUN_SECONDS
    written = []

    def should_stop(summary) -> bool:
        if not written:
            write_changes()
            written.append(True)
            return False
        assert time.monotonic() < deadline, f"not converged in {RUN_SECONDS} s: {summary}"
        return by_key(scan_all(client, source)) == by_key(scan_all(client, target))

    return should_stop


def write_units_of(body: bytes) -> int:
    """Write units of a BatchWriteItem: one per put of an item under 1 KB (its JSON is larger than its size)."""
    (requests,) = json.loads(body)["RequestItems"].values()
    for request in requests:
        assert len(json.dumps(request["PutRequest"]["Item"])) < 1024
    return len(requests)


def measured_rate(requests: list[tuple[float, int]]) -> float:
    """The highest rate over any stretch of at least MEASURED_SECONDS between two requests'
    arrivals: the units of the requests after the first, over the time between them.

    A limiter pays for a request before sending it, so at the rate each request arrives when
    its units are paid for: between two requests, exactly the later ones' units. Gaps between
    micro-batches (no changes to write) only lower a stretch's rate, so the highest is the
    rate while the job had a backlog.
    """
    requests = sorted(requests)
    best = 0.0
    for first in range(len(requests)):
        units = 0
        for last in range(first + 1, len(requests)):
            units += requests[last][1]
            seconds = requests[last][0] - requests[first][0]
            if seconds >= MEASURED_SECONDS:
                best = max(best, units / seconds)
    assert best > 0, f"no stretch of {MEASURED_SECONDS} s to measure: {requests}"
    return best


def test_a_short_stall_does_not_make_a_paced_run_look_too_fast():
    """The measure itself: 25-unit requests every 0.5 s (50 units/s) for 16 s; a 0.6 s stall holds
    the requests due at 5.0 s and 5.5 s until 5.6 s, when both leave (56 units/s over 5 s stretches)."""
    paced = [(index * 0.5, 25) for index in range(33)]
    paced[10] = paced[11] = (5.6, 25)
    assert measured_rate(paced) == pytest.approx(50, rel=0.1)
