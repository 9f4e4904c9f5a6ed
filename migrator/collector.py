"""Python's cyclic garbage collector, paused while a large tree of containers is built.

Parsing JSON builds dicts and lists by the hundred thousand: a Scan page of 1 MB, a bucket of a
validation's work file. The collector runs every 700 new containers, and now and then walks every
container alive, so it walked such a tree many times while it was built: parsing cost two to five
times as much with it on (docs/benchmarks.md). A parsed tree holds no cycle, so pausing the
collector frees nothing later than reference counting does. The pause is process-wide: another
thread's allocations skip the collector too, for as long as the pause lasts.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off inside the block, and on again after it, unless it was off already."""
    if not gc.isenabled():  # paused by another thread's block, or by the process itself
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
