"""Sets of scan segments as `skipSegments` and `copiedSegments` hold them: numbers and `first-last` ranges.

A savepoint is rewritten whole after every finished segment (S3 and most Hadoop filesystems
cannot append). Listed one number per line, a table of 100,000 segments would rewrite a file of
up to a megabyte 100,000 times: the bytes and the time grow with the square of the segment
count. Segments finish nearly in order (the runner submits them in order, a bounded number at
once), so the finished ones are a few ranges, and a rewrite costs as many entries as there are
gaps (docs/snapshot.md, "A savepoint at scale"). ScyllaDB Migrator's plain numbers still load.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Set
from typing import Any

RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


class SegmentRanges(Set):
    """An immutable set of segment numbers, held as sorted, disjoint, non-adjacent (first, last) ranges."""

    __slots__ = ("_ranges", "_count")

    def __init__(self, ranges: tuple[tuple[int, int], ...] = ()):
        self._ranges = ranges  # callers pass them sorted and merged: use `of` or `parse` otherwise
        self._count = sum(last - first + 1 for first, last in ranges)

    @classmethod
    def of(cls, segments: Iterable[int]) -> "SegmentRanges":
        if isinstance(segments, SegmentRanges):
            return segments
        return cls(_merged((s, s) for s in segments))

    _from_iterable = of  # what Set's operators build their results with

    @classmethod
    def parse(cls, entries: Iterable[Any]) -> "SegmentRanges":
        """From a YAML list of numbers and `first-last` strings; ValueError names the first bad entry."""
        return cls(_merged(_as_range(entry) for entry in entries))

    def __contains__(self, segment: object) -> bool:
        if not isinstance(segment, int):
            return False
        index = bisect.bisect_right(self._ranges, (segment, float("inf"))) - 1
        return index >= 0 and self._ranges[index][1] >= segment

    def __iter__(self) -> Iterator[int]:
        for first, last in self._ranges:
            yield from range(first, last + 1)

    def __len__(self) -> int:
        return self._count

    __hash__ = Set._hash

    def __or__(self, other: Any) -> "SegmentRanges":
        if isinstance(other, SegmentRanges):  # merged range by range, not number by number
            return SegmentRanges(_merged([*self._ranges, *other._ranges]))
        return super().__or__(other)

    __ror__ = __or__

    def __repr__(self) -> str:
        return f"SegmentRanges({self.as_yaml()!r})"

    def with_segment(self, segment: int) -> "SegmentRanges":
        """This set and `segment`, in time proportional to the ranges, not the segments."""
        if segment in self:
            return self
        ranges = self._ranges
        index = bisect.bisect_left(ranges, (segment,))  # the first range after segment
        joins_before = index > 0 and ranges[index - 1][1] == segment - 1
        joins_after = index < len(ranges) and ranges[index][0] == segment + 1
        first = ranges[index - 1][0] if joins_before else segment
        last = ranges[index][1] if joins_after else segment
        return SegmentRanges((*ranges[: index - joins_before], (first, last), *ranges[index + joins_after :]))

    def as_yaml(self) -> list[int | str]:
        """A number for a lone segment, `first-last` for a run of them."""
        return [first if first == last else f"{first}-{last}" for first, last in self._ranges]


def expand(entries: Any) -> Any:
    """A config's segment list with its `first-last` ranges spelled out; anything else is left for pydantic."""
    if not isinstance(entries, list):
        return entries
    expanded: list[Any] = []
    for entry in entries:
        if isinstance(entry, str) and RANGE.match(entry):
            first, last = _as_range(entry)
            expanded.extend(range(first, last + 1))
        else:
            expanded.append(entry)
    return expanded


def _as_range(entry: Any) -> tuple[int, int]:
    if isinstance(entry, int) and not isinstance(entry, bool) and entry >= 0:
        return entry, entry
    match = RANGE.match(entry) if isinstance(entry, str) else None
    if match is None:
        raise ValueError(f"{entry!r} is neither a segment number nor a range written first-last (0-99)")
    first, last = int(match[1]), int(match[2])
    if first > last:
        raise ValueError(f"the range {entry!r} ends before it starts: write it {last}-{first}")
    return first, last


def _merged(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return tuple(merged)
