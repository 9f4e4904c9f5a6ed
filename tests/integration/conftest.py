"""Fixtures shared by integration modules: the every-type table tests only read, a copy slow enough
to interrupt, a recording proxy in front of the emulator, and HDFS on the local disk. The root
conftest.py has the emulator and Spark."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from testsupport.all_types import create_all_types_table
from testsupport.endpoint import put_items, side
from testsupport.faultproxy import FaultProxy
from testsupport.hdfs import HDFS_ON_LOCAL_DISK
from testsupport.jobs import write_config
from testsupport.resume import ITEMS, SEGMENTS
from testsupport.sample_data import create_sample_table, make_items


@pytest.fixture(scope="session")
def all_types_table(dynamodb) -> str:
    """A table (pk S, sk N) holding every item of `all_types_items`, created once per worker: tests only read it."""
    return create_all_types_table(dynamodb, f"all-types-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def slow_copy(dynamodb, endpoint_url, table_name, tmp_path):
    """A source table and a config copying it one segment at a time, slow enough to interrupt:
    reads paced to 20 RCU/s (estimated from item sizes) take about 2 s a segment."""
    source, target = table_name("resume"), table_name("resume-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))

    def config(endpoint: str, name: str) -> Path:
        return write_config(
            tmp_path,
            {
                "source": side(
                    endpoint, source, scanSegments=SEGMENTS, maxMapTasks=1,
                    readThroughput=40, throughputReadPercent=0.5, removeConsumedCapacity=True,
                ),  # fmt: skip
                "target": side(endpoint, target),
                "savepoints": {"path": str(tmp_path / "savepoints")},
            },
            name=name,
        )

    return source, target, config, tmp_path / "savepoints"


@pytest.fixture
def recording_proxy(endpoint_url):
    """Both runs of a test reach the emulator through one proxy: a savepoint belongs to one endpoint."""
    with FaultProxy(endpoint_url, fault_rate=0.0, record=True) as proxy:
        yield proxy


@pytest.fixture
def hdfs_on_local_disk(spark):
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in HDFS_ON_LOCAL_DISK.items():
        conf.set(key, value)
    yield
    for key in HDFS_ON_LOCAL_DISK:
        conf.unset(key)
