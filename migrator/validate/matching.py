"""The validator's work on executors: scan a side's segments, then classify and repair each key of the join.

Both tables are scanned segment by segment, paced like the snapshot's Scan (`scan_segment`
with the task's share of the side's read rate). Source items are renamed as the migration
renames them, so they meet the target's items under the target's names, and those the
migration skips as expired are marked so. Keys meet in a Spark full outer join on the
canonical key (numbers by value), so neither table is gathered on the driver.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable, Iterator

from migrator.connection import ClientSpec
from migrator.items import Item, is_expired, rename_attributes
from migrator.ratelimit import CapacityLimiter
from migrator.snapshot.prune import canonical_key
from migrator.source.scan import ScanCounters, scan_segment
from migrator.target.pipeline import PipelinedWriter
from migrator.task_boundary import errors_returned
from migrator.validate.compare import differing_attributes
from migrator.validate.report import DIFFERENT, EXTRA, MISSING, Sample, Tally
from migrator.wire import wire_client

# What a side's scan yields for one item: (canonical key, (item under the target's names, expired)).
Entry = tuple[Item, bool]


@dataclass(frozen=True)
class SideScan:
    """How to scan one side: plain values only, shipped to the executors."""

    spec: ClientSpec
    table: str
    total_segments: int
    read_units_per_second: float | None
    report_capacity: bool
    key_names: tuple[str, ...]  # as this side names them
    renames: tuple[tuple[str, str], ...] = ()  # the source's renames; none for the target
    ttl_attribute: str | None = None  # the source's TTL attribute when expired items are skipped
    consistent_read: bool = False


@dataclass(frozen=True)
class KeyCheck:
    """How to judge and repair the keys of one partition of the join."""

    target: ClientSpec
    target_table: str
    key_names: tuple[str, ...]  # the target's key attributes
    tolerance: float
    failures_to_fetch: int
    copy_missing: bool
    repair_differences: bool
    delete_extra: bool
    batch_size: int
    write_units_per_second: float | None
    report_capacity: bool

    @property
    def repairs(self) -> bool:
        return self.copy_missing or self.repair_differences or self.delete_extra


def scan_side(scan: SideScan, segments: Iterable[int]) -> Iterator[tuple[str, Entry]]:
    """Every item of these segments under the target's names, by canonical key, marked when expired."""
    renames = dict(scan.renames)
    target_key_names = tuple(renames.get(name, name) for name in scan.key_names)
    limiter = CapacityLimiter(scan.read_units_per_second)
    for segment in segments:
        pages = scan_segment(
            wire_client(scan.spec), scan.table, segment, scan.total_segments, limiter=limiter,
            counters=ScanCounters(), consistent_read=scan.consistent_read, report_capacity=scan.report_capacity,
        )  # fmt: skip
        for page in pages:
            now = time.time()
            for item in page:
                expired = is_expired(item, scan.ttl_attribute, now)
                renamed = rename_attributes(item, renames, scan.key_names)
                yield canonical_key({name: renamed[name] for name in target_key_names}), (renamed, expired)


def check_keys(check: KeyCheck, pairs: Iterable[tuple[str, tuple[Entry | None, Entry | None]]]) -> Iterator[Tally]:
    """Classify each key of the join (missing, extra, different, equal, expired), repair what is asked; one Tally.

    Never raises (`migrator.task_boundary`): a failed repair comes back as the Tally's error.
    """
    tally = Tally(check.failures_to_fetch)
    with errors_returned("checking keys") as caught:
        if check.repairs:
            with _writer(check) as writer:
                _classify(check, pairs, tally, writer)
        else:
            _classify(check, pairs, tally, None)
    tally.error = caught.error
    yield tally


def _writer(check: KeyCheck) -> PipelinedWriter:
    return PipelinedWriter(
        check.target, check.target_table, batch_size=check.batch_size,
        limiter=CapacityLimiter(check.write_units_per_second), report_capacity=check.report_capacity,
    )  # fmt: skip


def _classify(check: KeyCheck, pairs, tally: Tally, writer: PipelinedWriter | None) -> None:
    for order, (source, target) in pairs:
        tally.source_items += source is not None
        tally.target_items += target is not None
        if source is not None and source[1]:  # expired: the migration skips it, so neither missing nor compared
            tally.skipped_expired += 1
        elif source is None:
            _found(check, tally, Sample(order, EXTRA, _key(check, target[0])))
            if writer is not None and check.delete_extra:
                writer.delete(_key(check, target[0]))
                tally.repaired[EXTRA] += 1
        elif target is None:
            _found(check, tally, Sample(order, MISSING, _key(check, source[0])))
            if writer is not None and check.copy_missing:
                writer.put(source[0])
                tally.repaired[MISSING] += 1
        else:
            differing = differing_attributes(source[0], target[0], check.tolerance)
            if not differing:
                tally.equal += 1
                continue
            _found(check, tally, Sample(order, DIFFERENT, _key(check, source[0]), tuple(differing)))
            if writer is not None and check.repair_differences:
                writer.put(source[0])
                tally.repaired[DIFFERENT] += 1


def _found(check: KeyCheck, tally: Tally, sample: Sample) -> None:
    setattr(tally, sample.kind, getattr(tally, sample.kind) + 1)
    tally.sample(sample)


def _key(check: KeyCheck, item: Item) -> Item:
    return {name: item[name] for name in check.key_names}
