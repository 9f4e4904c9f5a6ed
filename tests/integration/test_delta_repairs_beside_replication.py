"""A validation repairing a Delta table while a replication into it runs (spark-submit, moto's DynamoDB Streams
over HTTP, a local table): both merge into the table, each batch and each bucket as one commit, and a commit
that loses to the other's is merged again on the new version (`migrator.target.delta`). New items are put on
the source throughout, so replication batches are merged while the repairs are; the planted differences are
on keys the writer never touches (a repair beside a replication may overwrite a newer change of its key with
the item it read: docs/validation.md says to repair when replication has caught up)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from testsupport.endpoint import put_items, scan_all
from testsupport.sample_data import create_sample_table, make_item, make_items

from tests.integration.test_delta_replication import same_items
from tests.integration.test_delta_replication_kill import APP_NAME, SECONDS, delta_replication, local_lake, started
from tests.integration.test_validate_delta import ALL_REPAIRS, delta_config, plant, validate

pytestmark = pytest.mark.integration


class NewItems(threading.Thread):
    """Puts items never seen before on the source, one after another, until stopped."""

    def __init__(self, dynamodb, table: str, first: int):
        super().__init__(daemon=True)
        self.dynamodb, self.table, self.next, self.stop = dynamodb, table, first, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            put_items(self.dynamodb, self.table, [make_item(self.next)])
            self.next += 1


@pytest.mark.e2e
def test_a_validation_repairs_a_delta_table_while_replication_merges_into_it(dynamodb, endpoint_url, table_name, tmp_path):
    source = table_name("delta-beside")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(40))
    lake = local_lake(tmp_path)
    job, lines = started(delta_replication(tmp_path, endpoint_url, source, lake, True))
    wait_until_the_table_equals_the_source(dynamodb, source, lake, job, lines)
    plant(lake.path, None, scan_all(dynamodb, source))  # a row gone, one changed, one extra

    writer = NewItems(dynamodb, source, first=1000)
    writer.start()
    try:
        config = delta_config(tmp_path, endpoint_url, source, lake.path, "repair", recheckSeconds=2, **ALL_REPAIRS)
        code, report, output = validate(config, tmp_path)
    finally:
        writer.stop.set()
        writer.join(timeout=30)

    assert code == 0, output
    assert report["repaired"]["missing"] >= 1 and report["repaired"]["different"] >= 1, report
    assert report["repaired"]["extra"] == 1, report  # only the planted row: the source never held its key
    assert writer.next > 1000 + 5, "the writer put too few items for batches to be merged beside the repairs"
    assert job.poll() is None, "the replication stopped:\n" + "".join(lines[-60:])
    wait_until_the_table_equals_the_source(dynamodb, source, lake, job, lines)  # planted keys too: repaired
    merges = [commit for commit in lake.commits() if commit["operation"] == "MERGE"]
    repairs = [txn for commit in merges for txn in commit["txn"] if "-repair-" in txn["appId"]]
    batches = [txn["version"] for commit in merges for txn in commit["txn"] if txn["appId"] == APP_NAME]
    assert repairs and batches == sorted(set(batches)), f"a batch was merged twice: {batches}"

    os.killpg(job.pid, signal.SIGINT)
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])


def wait_until_the_table_equals_the_source(dynamodb, source: str, lake, job, lines: list[str]) -> None:
    deadline = time.monotonic() + SECONDS
    while not same_items(scan_all(dynamodb, source), lake.items()):
        assert time.monotonic() < deadline and job.poll() is None, "not converged:\n" + "".join(lines[-60:])
        time.sleep(0.5)
