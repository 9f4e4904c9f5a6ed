"""`--summary-json FILE`: how a run ended, as JSON, for schedulers and CI pipelines.

Written whole (a reader never sees half a file) when the command ends, however it ends: done,
failed, bad input, interrupted. Each phase that finished is there with its counts, under the
names the printed summary uses, in camelCase.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from typing import Any

# A phase summary's clock readings (time.monotonic): meaningless outside the process.
_CLOCK_FIELDS = frozenset({"started", "finished"})


def problem_writing(path: str) -> str | None:
    """Why `path` cannot take a file written by this process, or None when it can."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return "it is a directory"
    if not os.path.isdir(folder):
        return f"its folder {folder} does not exist"
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        return "permission denied"
    return None


def write_whole(path: str, document: Any) -> None:
    """`document` as indented JSON at `path`, whole or not at all; OSError when it cannot be written."""
    partial = f"{path}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    os.replace(partial, path)


def phase_json(summary: Any) -> dict[str, Any]:
    """A phase's summary dataclass as JSON: its counts, seconds and rate, camelCase keys."""
    document: dict[str, Any] = {}
    for field in dataclasses.fields(summary):
        if field.name not in _CLOCK_FIELDS:
            document[_camel(field.name)] = _plain(getattr(summary, field.name))
    for derived in ("seconds", "items_per_second"):
        if hasattr(summary, derived):
            document[_camel(derived)] = round(float(getattr(summary, derived)), 3)
    return document


def _plain(value: Any) -> Any:
    if isinstance(value, Counter):
        return dict(sorted(value.items()))
    if isinstance(value, (frozenset, set, tuple)):
        return sorted(value) if isinstance(value, (frozenset, set)) else list(value)
    return value


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)
