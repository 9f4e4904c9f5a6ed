"""Shared fixtures: one emulator and one Spark session for the whole run, clients of the endpoint.

The emulator is the project's moto server (`testsupport/emulator.py`) on a free port, unless
AWS_ENDPOINT_URL points at another endpoint (LocalStack from a notebook), which is then used
as is. Unit tests under tests/unit use none of these fixtures. The helpers tests import
(config blocks, jobs, table reads) live in the `testsupport` package.
"""

from __future__ import annotations

import os
import uuid

import pytest

from testsupport.endpoint import aws_client, dynamodb_client


@pytest.fixture(scope="session")
def endpoint_url() -> str:
    """The AWS-compatible endpoint every integration test talks to over HTTP."""
    configured = os.environ.get("AWS_ENDPOINT_URL")
    if configured:
        yield configured
        return
    from testsupport.emulator import EmulatorProcess

    with EmulatorProcess() as emulator:
        yield emulator.endpoint_url


@pytest.fixture(scope="session")
def dynamodb(endpoint_url: str):
    return dynamodb_client(endpoint_url)


@pytest.fixture(scope="session")
def s3(endpoint_url: str):
    return aws_client("s3", endpoint_url)


@pytest.fixture(scope="session")
def kinesis(endpoint_url: str):
    return aws_client("kinesis", endpoint_url)


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every in-process test and job (startup costs ~6 s)."""
    from testsupport.spark_session import shared_session

    session = shared_session()
    yield session
    session.stop()


@pytest.fixture
def table_name():
    """A fresh table name per call: tests share one emulator."""

    def make(prefix: str = "t") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    return make


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Tell the job helpers whether this test may start a process (marked e2e), before its fixtures run."""
    import testsupport.jobs

    testsupport.jobs.current_test_is_e2e = item.get_closest_marker("e2e") is not None
