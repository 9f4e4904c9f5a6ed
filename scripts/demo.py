"""The demo: seed a table on the embedded emulator, migrate it with spark-submit, replicate live changes.

Run it through scripts/demo.sh, which sets up the virtualenv first. The job copies the
snapshot, then replays the source's DynamoDB Stream; the demo writes live changes, waits
until the target equals the source, and stops the job with Ctrl+C (SIGINT), as a user would.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # testsupport: the emulator and sample data

import boto3  # noqa: E402

from migrator.spark import LOCAL_DRIVER_JAVA_OPTIONS  # noqa: E402
from testsupport.emulator import EmulatorProcess  # noqa: E402
from testsupport.sample_data import create_sample_table, make_item, make_items, seed  # noqa: E402
SOURCE, TARGET = "demo_orders", "demo_orders_copy"
CONVERGE_TIMEOUT_SECONDS = 300


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--changes", type=int, default=300, help="live puts, updates and deletes")
    args = parser.parse_args()
    with EmulatorProcess() as emulator, tempfile.TemporaryDirectory(prefix="demo-") as workdir:
        print(f"demo: emulator running at {emulator.endpoint_url}", flush=True)
        client = boto3.client(
            "dynamodb",
            endpoint_url=emulator.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="demo",
            aws_secret_access_key="demo",
        )
        create_sample_table(client, SOURCE)
        started = time.monotonic()
        seeded = seed(client, SOURCE, make_items(args.items))
        print(f"demo: seeded {seeded:,} items of every attribute type into {SOURCE} in {time.monotonic() - started:.1f}s")
        job = start_job(emulator.endpoint_url, workdir)
        try:
            return replicate_and_stop(client, job, args.items, args.changes)
        finally:
            if job.poll() is None:
                job.kill()


def start_job(endpoint_url: str, workdir: str) -> subprocess.Popen:
    port = endpoint_url.rsplit(":", 1)[1]
    command = [
        "spark-submit",
        "--master", "local[*]",
        "--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'} {LOCAL_DRIVER_JAVA_OPTIONS}",
        "jobs/migrate.py", "--config", "conf/demo.yaml",
    ]  # fmt: skip
    print(f"demo: EMULATOR_PORT={port} {' '.join(command)}", flush=True)
    env = dict(os.environ, EMULATOR_PORT=port, DEMO_SAVEPOINTS=f"{workdir}/savepoints", DEMO_CHECKPOINTS=f"{workdir}/checkpoint")
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # Ctrl+C is sent to the job's process group, as a terminal would
    )  # fmt: skip


def replicate_and_stop(client, job: subprocess.Popen, items: int, changes: int) -> int:
    for line in job.stdout:  # the job's own output, until replication has started
        print(line, end="", flush=True)
        if "replicating changes of" in line:
            break
    else:
        print(f"demo: the migration ended with exit code {job.wait()}", file=sys.stderr)
        return 1
    # Keep relaying the job's output, so its pipe never fills and blocks it.
    relay = threading.Thread(target=lambda: [print(line, end="", flush=True) for line in job.stdout], daemon=True)
    relay.start()
    print(f"demo: writing {changes} live changes to {SOURCE} while the job replicates", flush=True)
    write_changes(client, items, changes)
    converged = wait_until_equal(client)
    print("demo: sending Ctrl+C (SIGINT) to the job", flush=True)
    os.killpg(job.pid, signal.SIGINT)
    job.wait(timeout=120)
    relay.join(timeout=10)
    if job.returncode != 0 or not converged:
        print(f"demo: failed (exit code {job.returncode}, target equal to source: {converged})", file=sys.stderr)
        return 1
    print(f"demo: {TARGET} equals {SOURCE} item for item, live changes included; the job exited 0")
    return 0


def write_changes(client, items: int, changes: int) -> None:
    """Puts of new items, updates of copied ones, deletes: the same keys changed several times."""
    chooser = random.Random(7)
    for change in range(changes):
        number = chooser.randrange(0, items + 100)
        item = make_item(number)
        if chooser.random() < 0.25:
            client.delete_item(TableName=SOURCE, Key={"pk": item["pk"], "sk": item["sk"]})
        else:
            item["version"] = {"N": str(change)}
            client.put_item(TableName=SOURCE, Item=item)


def wait_until_equal(client) -> bool:
    deadline = time.monotonic() + CONVERGE_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if snapshot_of(client, SOURCE) == snapshot_of(client, TARGET):
            return True
        time.sleep(2)
    return False


def snapshot_of(client, table: str) -> dict:
    """Every item by key, set members sorted (DynamoDB does not keep their order)."""
    items = {}
    for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            items[(item["pk"]["S"], item["sk"]["N"])] = {
                name: {kind: sorted(v) if kind in ("SS", "NS", "BS") else v for kind, v in value.items()}
                for name, value in item.items()
            }
    return items


if __name__ == "__main__":
    sys.exit(main())
