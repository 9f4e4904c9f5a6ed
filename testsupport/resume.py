"""An interrupted snapshot copy or validation: its size, the units it recorded (from its savepoint) and
the segments it scanned (through a recording FaultProxy)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import yaml

from migrator.config.segments import SegmentRanges
from testsupport.faultproxy import FaultProxy


ITEMS = 4_000  # the slow copy (tests/integration/conftest.py's slow_copy): its items and segments
SEGMENTS = 8


def copied_segments(savepoint_dir: Path) -> set[int]:
    for path in savepoint_dir.glob("savepoint_*.yaml"):
        document = yaml.safe_load(path.read_text())
        return set(SegmentRanges.parse(document.get("skipSegments") or []))
    return set()


def wait_for_segments(job: subprocess.Popen, savepoint_dir: Path, at_least: int, timeout: float = 180) -> set[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = copied_segments(savepoint_dir)
        if len(done) >= at_least:
            return done
        assert job.poll() is None, f"the job ended before it could be interrupted:\n{job.stdout.read()}"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} segments copied after {timeout}s")


def scanned_segments(proxy: FaultProxy, since: int = 0) -> set[int]:
    """The segments scanned through the proxy, from its `since`-th recorded request on."""
    return {json.loads(body)["Segment"] for operation, body in proxy.recorded[since:] if operation == "Scan"}


def scanned_table_segments(proxy: FaultProxy, since: int = 0) -> list[tuple[str, int]]:
    """Each Scan through the proxy as (table, segment), in order, repeats kept, from its `since`-th request on."""
    scans = [json.loads(body) for operation, body in proxy.recorded[since:] if operation == "Scan"]
    return [(scan["TableName"], scan["Segment"]) for scan in scans]


def validation_units(savepoint_dir: Path) -> tuple[set[str], set[int]]:
    """The read units and the buckets a validation's savepoint records as done; empty sets without one."""
    for path in savepoint_dir.glob("validation_*.yaml"):
        try:
            block = yaml.safe_load(path.read_text())["savepoint"]["validation"]
        except FileNotFoundError:  # the validation finished meanwhile and deleted it
            break
        return set(block["read"]), set(block["compared"])
    return set(), set()


def wait_for_validation_units(
    job: subprocess.Popen, savepoint_dir: Path, reads: int = 0, buckets: int = 0, timeout: float = 240
) -> tuple[set[str], set[int]]:
    """Until the savepoint records at least `reads` read units and `buckets` compared buckets."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        read, compared = validation_units(savepoint_dir)
        if len(read) >= reads and len(compared) >= buckets:
            return read, compared
        assert job.poll() is None, f"the validation ended before it could be interrupted:\n{job.stdout.read()}"
        time.sleep(0.05)
    raise AssertionError(f"fewer than {reads} units read or {buckets} buckets compared after {timeout}s")
