"""What a copy's and an export's segment tasks share: reading one Scan segment and keeping its live items.

Runs on an executor. A segment task (`segment_copy.SegmentTask`, `segment_export.SegmentFileTask`)
is a `SegmentRead` plus where its items go; both read their segment through `live_pages`, so
the expired-item and rename rules are the same whether the items go to a table or to a file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from migrator.connection import ClientSpec
from migrator.items import Item, is_expired, rename_attributes
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.progress_channel import ProgressAddress
from migrator.source.scan import ScanCounters, scan_segment
from migrator.wire import wire_client

if TYPE_CHECKING:  # the driver's types: executors import this module without pydantic
    from migrator.config import MigratorConfig
    from migrator.snapshot.preflight import Preflight


@dataclass(frozen=True, kw_only=True)
class SegmentRead:
    """One segment of the source table, and which of its items a copy keeps; plain values only.

    Keyword-only, so the tasks built on it add their own fields in any order.
    """

    source: ClientSpec
    source_table: str
    segment: int
    total_segments: int
    renames: tuple[tuple[str, str], ...] = ()
    key_names: tuple[str, ...] = ()  # the source's key attributes: name an item in errors
    ttl_attribute: str | None = None
    copy_expired_items: bool = False
    consistent_read: bool = False
    read_units_per_second: float | None = None
    source_reports_capacity: bool = True
    progress: ProgressAddress | None = None  # where the task reports its running counts to the driver


def read_settings(config: MigratorConfig, checks: Preflight) -> dict[str, Any]:
    """The fields of a `SegmentRead` that come from the config and the checks, the same for every segment."""
    return {
        "source": config.source.client_spec("source"),
        "source_table": config.source.table,
        "renames": tuple(config.rename_map.items()),
        "key_names": checks.key_names,
        "ttl_attribute": checks.ttl_attribute,
        "copy_expired_items": config.source.copy_expired_items,
        "consistent_read": config.source.consistent_read,
        "source_reports_capacity": not config.source.strips_consumed_capacity,
    }


def live_pages(task: SegmentRead, counters: ScanCounters, start_key: Item | None = None) -> Iterator[tuple[list[Item], int]]:
    """Each Scan page of the segment from `start_key`: its items the copy keeps, renamed, and how many it skipped as expired.

    Read through the lean client at the task's share of the read rate.
    """
    renames = dict(task.renames)
    pages = scan_segment(
        wire_client(task.source), task.source_table, task.segment, task.total_segments,
        limiter=CapacityLimiter(task.read_units_per_second), counters=counters,
        consistent_read=task.consistent_read, report_capacity=task.source_reports_capacity, start_key=start_key,
    )  # fmt: skip
    for page in pages:
        now = time.time()
        live = [item for item in page if task.copy_expired_items or not is_expired(item, task.ttl_attribute, now)]
        yield [rename_attributes(item, renames, task.key_names) for item in live], len(page) - len(live)
