"""The one local Spark session a test process shares: the `spark` fixture's, and the in-process jobs'
(startup costs ~6 s).

The session's JVM, and the Python workers it starts, write to a file of their own instead of the
test process's stderr, so a job run in process gets back everything a process would have printed:
`jvm_output()` reads what they wrote from an offset on.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

_JVM_OUTPUT = Path(tempfile.mkdtemp(prefix="migrator-tests-")) / "spark-stderr.log"


@functools.cache
def shared_session():
    from migrator.spark import create_session

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    saved = os.dup(2)
    written = os.open(_JVM_OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(written, 2)  # the JVM inherits fd 2 when it is launched, and keeps it
        return create_session("dynamodb-migrator tests", master="local[2]")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(written)


def jvm_output_size() -> int:
    return _JVM_OUTPUT.stat().st_size if _JVM_OUTPUT.exists() else 0


def jvm_output(since: int) -> str:
    """What the session's JVM and its Python workers printed from byte `since` on."""
    if not _JVM_OUTPUT.exists():
        return ""
    with _JVM_OUTPUT.open("rb") as output:
        output.seek(since)
        return output.read().decode("utf-8", errors="replace")
