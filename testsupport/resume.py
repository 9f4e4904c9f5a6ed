"""An interrupted snapshot copy: its size, and the segments it copied (from its savepoint) or scanned
(through a recording FaultProxy)."""

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
