"""Whole-file writes on a Hadoop filesystem (HDFS, S3A, ...), through the driver's JVM.

A file written in place can be read half written after a crash (HDFS shows a file's bytes as
they arrive), so small state files (savepoints, the checkpoint's heartbeat and per-batch key
state) are written under a temporary name and renamed into place. Hadoop's rename does not
replace an existing file, so the old one is first renamed aside (`<name>.previous`), the new
one renamed in, and the aside one deleted; `readable` gives the aside one while the new one is
not there yet, so a stop between the two renames loses nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

PREVIOUS_SUFFIX = ".previous"


def write_atomically(fs: Any, path: Any, text: str) -> None:
    """Replace the file at `path` (a Hadoop Path) with `text`, whole; OSError when Hadoop refuses a rename."""
    temporary = path.suffix(f".{uuid.uuid4().hex[:8]}.tmp")  # beside it: a rename within one folder
    aside = path.suffix(PREVIOUS_SUFFIX)
    stream = fs.create(temporary, True)  # parent folders are made as needed
    try:
        stream.write(text.encode("utf-8"))
    finally:
        stream.close()
    try:
        if fs.exists(path):
            fs.delete(aside, False)
            _rename(fs, path, aside)
        _rename(fs, temporary, path)
        fs.delete(aside, False)
    except BaseException:
        fs.delete(temporary, False)
        raise


def readable(fs: Any, path: Any) -> Any | None:
    """The file to read for `path`: itself, its set-aside copy while a replace is unfinished, or None."""
    if fs.exists(path):
        return path
    aside = path.suffix(PREVIOUS_SUFFIX)
    return aside if fs.exists(aside) else None


def delete(fs: Any, path: Any) -> None:
    """Delete the file and any set-aside copy of it."""
    fs.delete(path, False)
    fs.delete(path.suffix(PREVIOUS_SUFFIX), False)


def _rename(fs: Any, source: Any, destination: Any) -> None:
    if not fs.rename(source, destination):
        raise OSError(f"Hadoop refused to rename {source.toString()} to {destination.toString()}")


def java_reason(exc: Any) -> str:
    """A py4j error's Java exception, class and message, on one line: `java.net.ConnectException: Call From ...`."""
    try:
        text = str(exc.java_exception.toString())
    except Exception:  # the JVM is gone: py4j's own text
        text = str(exc)
    return " ".join(text.split("\n")[0].split()) or type(exc).__name__
