"""The demo: seed a table on the embedded emulator, migrate it with spark-submit, check the copy.

Run it through scripts/demo.sh, which sets up the virtualenv first.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3

from emulator import EmulatorProcess
from sample_data import create_sample_table, make_items, seed

REPO = Path(__file__).resolve().parent.parent
SOURCE, TARGET = "demo_orders", "demo_orders_copy"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    args = parser.parse_args()
    with EmulatorProcess() as emulator, tempfile.TemporaryDirectory(prefix="demo-savepoints-") as savepoints:
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
        port = emulator.endpoint_url.rsplit(":", 1)[1]
        command = [
            "spark-submit",
            "--master", "local[*]",
            "--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}",
            "jobs/migrate.py", "--config", "conf/demo.yaml",
        ]  # fmt: skip
        print(f"demo: EMULATOR_PORT={port} {' '.join(command)}", flush=True)
        env = dict(os.environ, EMULATOR_PORT=port, DEMO_SAVEPOINTS=savepoints)
        result = subprocess.run(command, cwd=REPO, env=env)
        if result.returncode != 0:
            print(f"demo: the migration failed with exit code {result.returncode}", file=sys.stderr)
            return result.returncode
        return check_copy(client, args.items)


def check_copy(client, expected: int) -> int:
    """Compare every target item with the generator's, bit for bit."""
    paginator = client.get_paginator("scan")
    copied = {}
    for page in paginator.paginate(TableName=TARGET, ConsistentRead=True):
        for item in page["Items"]:
            copied[int(item["sk"]["N"])] = item
    wrong = [i for i, item in enumerate(make_items(expected)) if _normalized(copied.get(i)) != _normalized(item)]
    if len(copied) != expected or wrong:
        print(f"demo: copy differs: {len(copied):,} items, {len(wrong):,} not identical", file=sys.stderr)
        return 1
    print(f"demo: {TARGET} holds all {expected:,} items, identical to the source (sets compared as sets)")
    return 0


def _normalized(item):
    if item is None:
        return None
    return {k: {t: sorted(v) if t in ("SS", "NS", "BS") else v for t, v in value.items()} for k, value in item.items()}


if __name__ == "__main__":
    sys.exit(main())
