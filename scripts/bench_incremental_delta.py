#!/usr/bin/env python
"""Driver memory of an incremental S3 export merged into a Delta table: peak RSS while N changed keys are merged.

    .venv/bin/python scripts/bench_incremental_delta.py [--keys 200000] [--files 8] [--payload-bytes 200]
        [--checkout DIR]

One emulator (testsupport/emulator.py) holds an incremental export (DYNAMODB_JSON, --files gzip data files) of
--keys puts, each key once; `spark-submit --master local[2] jobs/migrate.py` imports it into a new local Delta
table (one MERGE), sampled from /proc every 0.2 s as scripts/bench_snapshot.py samples its jobs: peak RSS of the
driver JVM (in local mode also the executors' JVM side), the Python driver (which plans and commits the MERGE) and
the Python workers (which write its files). The table is read back: it must hold --keys rows, else exit 1.

--checkout runs the job of another checkout of this repository (its jobs/ and migrator/, put first on PYTHONPATH
for the driver and the workers), e.g. the commit before staging, extracted with
`git archive <commit> | tar -x -C DIR`: the figures before and after, on the same export and machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # testsupport
sys.path.insert(0, str(REPO / "scripts"))  # bench_snapshot's /proc sampling

import boto3  # noqa: E402
import yaml  # noqa: E402
from bench_snapshot import JVM, PY_DRIVER, WORKERS, Job, mib  # noqa: E402
from deltalake import DeltaTable  # noqa: E402

from migrator.spark import LOCAL_DRIVER_JAVA_OPTIONS  # noqa: E402
from testsupport.emulator import EmulatorProcess  # noqa: E402
from testsupport.s3_exports import DYNAMODB_JSON, Change, DataFileSpec, create_bucket, incremental_lines, write_export  # noqa: E402

REGION, ACCESS_KEY, SECRET_KEY = "us-east-1", "bench-access-key", "bench-secret-key"
DESCRIPTION = {"attributeDefinitions": [{"name": "pk", "type": "S"}], "keySchema": [{"name": "pk", "type": "HASH"}]}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--payload-bytes", type=int, default=200)
    parser.add_argument("--checkout", type=Path, default=REPO, help="the checkout whose job runs (default: this one)")
    return parser.parse_args()


def write_incremental_export(endpoint_url: str, keys: int, files: int, payload_bytes: int):
    s3 = boto3.client("s3", endpoint_url=endpoint_url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                      aws_secret_access_key=SECRET_KEY)  # fmt: skip
    payload = "x" * payload_bytes
    changes = [Change({"pk": {"S": f"key-{n:08d}"}},
                      {"pk": {"S": f"key-{n:08d}"}, "n": {"N": str(n)}, "payload": {"S": payload}}, micros=n + 1)
               for n in range(keys)]  # fmt: skip
    specs = [DataFileSpec(incremental_lines(changes[part::files], DYNAMODB_JSON)) for part in range(files)]
    return write_export(s3, create_bucket(s3), specs, output_format=DYNAMODB_JSON, incremental=True)


def write_config(workdir: Path, endpoint_url: str, export) -> Path:
    reach = {"region": REGION, "endpoint": {"host": endpoint_url.rsplit(":", 1)[0], "port": int(endpoint_url.rsplit(":", 1)[1])},
             "credentials": {"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}}  # fmt: skip
    config = {
        "source": {"type": "dynamodb-s3-export", "bucket": export.bucket, "manifestKey": export.summary_key,
                   "tableDescription": DESCRIPTION, **reach},
        "target": {"type": "delta", "path": str(workdir / "lake")},
        "savepoints": {"path": str(workdir / "savepoints")},
    }  # fmt: skip
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def spark_submit(checkout: Path, config: Path) -> list[str]:
    log4j = f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}"
    return [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
            "--driver-java-options", f"{log4j} {LOCAL_DRIVER_JAVA_OPTIONS}",
            str(checkout / "jobs" / "migrate.py"), "--config", str(config)]  # fmt: skip


def main() -> int:
    args = parse_args()
    checkout = args.checkout.resolve()
    if checkout != REPO:  # the driver and the workers import that checkout's migrator
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    print(f"checkout {checkout}; {args.keys:,} changed keys in {args.files} files, payload {args.payload_bytes} B; "
          f"load {'{:.2f} {:.2f} {:.2f}'.format(*os.getloadavg())}")  # fmt: skip
    with EmulatorProcess() as emulator, tempfile.TemporaryDirectory(prefix="bench-incremental-") as folder:
        workdir = Path(folder)
        export = write_incremental_export(emulator.endpoint_url, args.keys, args.files, args.payload_bytes)
        job = Job(workdir / "job.log")
        started = time.monotonic()
        code = job.run(spark_submit(checkout, write_config(workdir, emulator.endpoint_url, export)), cwd=checkout)
        seconds = time.monotonic() - started
        output = (workdir / "job.log").read_text(errors="replace")
        merged = [line for line in output.splitlines() if "merging the newest record of each key" in line]
        print(f"exit {code} after {seconds:.1f} s; {merged[0].strip() if merged else 'no MERGE line'}")
        if code != 0:
            print(output[-3000:])
            return 1
        rows = DeltaTable(str(workdir / "lake")).to_pyarrow_table(columns=["pk"]).num_rows
        print(f"table rows {rows:,}: {'OK' if rows == args.keys else 'MISMATCH'}")
        print("peak RSS: " + ", ".join(f"{kind} {mib(job.peak_rss[kind])}" for kind in (JVM, PY_DRIVER, WORKERS)))
        print(json.dumps({"keys": args.keys, "seconds": round(seconds, 1), **job.peak_rss}))
        return 0 if rows == args.keys else 1


if __name__ == "__main__":
    sys.exit(main())
