"""Shared fixtures: one emulator and one Spark session for the whole run, and config helpers.

The emulator is the project's moto server (`scripts/emulator.py`) on a free port, unless
AWS_ENDPOINT_URL points at another endpoint (LocalStack from a notebook), which is then used
as is. Unit tests under tests/unit use none of these fixtures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
TEST_REGION = "us-east-1"
TEST_ACCESS_KEY = "testing-access-key"
TEST_SECRET_KEY = "testing-secret-key"


@pytest.fixture(scope="session")
def endpoint_url() -> str:
    """The AWS-compatible endpoint every integration test talks to over HTTP."""
    configured = os.environ.get("AWS_ENDPOINT_URL")
    if configured:
        yield configured
        return
    from emulator import EmulatorProcess

    with EmulatorProcess() as emulator:
        yield emulator.endpoint_url


@pytest.fixture(scope="session")
def dynamodb(endpoint_url: str):
    return dynamodb_client(endpoint_url)


def dynamodb_client(endpoint_url: str):
    return aws_client("dynamodb", endpoint_url)


def aws_client(service: str, endpoint_url: str):
    """A boto3 client of the test endpoint, with the test region and keys."""
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name=TEST_REGION,
        aws_access_key_id=TEST_ACCESS_KEY,
        aws_secret_access_key=TEST_SECRET_KEY,
    )


@pytest.fixture(scope="session")
def s3(endpoint_url: str):
    return aws_client("s3", endpoint_url)


@pytest.fixture(scope="session")
def kinesis(endpoint_url: str):
    return aws_client("kinesis", endpoint_url)


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every in-process test (startup costs ~6 s)."""
    from migrator.spark import create_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = create_session("dynamodb-migrator tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture
def table_name():
    """A fresh table name per call: tests share one emulator."""

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    return make


def endpoint_block(endpoint_url: str) -> dict[str, Any]:
    scheme, _, rest = endpoint_url.partition("://")
    host, _, port = rest.rstrip("/").partition(":")
    block: dict[str, Any] = {"host": f"{scheme}://{host}"}
    if port:
        block["port"] = int(port)
    return block


def side(endpoint_url: str, table: str, **extra: Any) -> dict[str, Any]:
    """A source or target block for a table at the test endpoint."""
    block = {
        "type": "dynamodb",
        "table": table,
        "region": TEST_REGION,
        "endpoint": endpoint_block(endpoint_url),
        "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY},
    }
    block.update(extra)
    return block


def write_config(directory: Path, document: dict[str, Any], name: str = "config.yaml") -> Path:
    document.setdefault("savepoints", {"path": str(directory / "savepoints")})
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def run_in_process(config_path: Path, spark_session):
    """Run a snapshot migration on the shared Spark session; returns its summary."""
    from migrator.config import load_config
    from migrator.run import migrate

    return migrate(load_config(str(config_path)), lambda: spark_session).snapshot


def run_job(
    config_path: Path,
    *,
    spark_submit: bool = False,
    master: str = "local[2]",
    env=None,
    timeout=600,
    job: str = "migrate.py",
    args: tuple[str, ...] = (),
):
    """Run jobs/migrate.py (or another `job`, with `args`) as a user would, as a separate process; returns CompletedProcess."""
    if spark_submit:
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", master]
        command += ["--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}"]
    else:
        command = [sys.executable]
    command += [str(REPO / "jobs" / job), "--config", str(config_path), *args]
    return subprocess.run(
        command,
        cwd=REPO,
        env=job_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(extra or {})
    return env


def scan_all(client, table: str) -> list[dict[str, Any]]:
    items, request = [], {"TableName": table, "ConsistentRead": True}
    while True:
        response = client.scan(**request)
        items.extend(response["Items"])
        if "LastEvaluatedKey" not in response:
            return items
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def table_exists(client, table: str) -> bool:
    return table in list_tables(client)


def list_tables(client) -> list[str]:
    names, request = [], {}
    while True:
        response = client.list_tables(**request)
        names += response["TableNames"]
        if "LastEvaluatedTableName" not in response:
            return names
        request["ExclusiveStartTableName"] = response["LastEvaluatedTableName"]


def put_items(client, table: str, items) -> int:
    from sample_data import seed

    return seed(client, table, items)
