"""Shard lineage of DynamoDB Streams and Kinesis: which shards to read, in which order, as pure functions.

A stream's shards form a forest: when DynamoDB splits a table partition, the shard of that
partition is closed and two child shards name it as `ParentShardId`. Records of one key are
ordered within a shard, and every record of the parent precedes every record of its
children, so a child is read only after its parent is fully consumed. ("DynamoDB Streams
and shards", DynamoDB Developer Guide: "it's important to process the parent shard before
processing a child shard".) Stream records live 24 hours; a shard whose records have all
expired disappears from DescribeStream, so a parent that is no longer listed counts as
consumed.

Kinesis streams reshard the same way, and also merge: a merged shard has two parents,
`ParentShardId` and `AdjacentParentShardId`, and is read only once both are consumed
("Resharding a stream", Kinesis Data Streams Developer Guide).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Iterable, Mapping


@dataclass(frozen=True)
class Shard:
    """One shard as DescribeStream lists it; sequence numbers stay the decimal strings AWS sent."""

    shard_id: str
    parent_id: str | None
    starting_sequence: str
    ending_sequence: str | None = None
    adjacent_parent_id: str | None = None  # a Kinesis merge's second parent

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> "Shard":
        """Build from one element of DescribeStream's `StreamDescription.Shards` (or Kinesis ListShards' `Shards`)."""
        shard_id = description["ShardId"]
        numbers = description.get("SequenceNumberRange") or {}
        starting = numbers.get("StartingSequenceNumber")
        if starting is None:
            raise ValueError(f"shard {shard_id} has no StartingSequenceNumber in its description")
        return cls(
            shard_id=shard_id,
            parent_id=description.get("ParentShardId") or None,
            starting_sequence=starting,
            ending_sequence=numbers.get("EndingSequenceNumber"),
            adjacent_parent_id=description.get("AdjacentParentShardId") or None,
        )

    @property
    def parent_ids(self) -> tuple[str, ...]:
        """One parent after a split, two after a Kinesis merge, none for an original shard."""
        return tuple(p for p in (self.parent_id, self.adjacent_parent_id) if p is not None)

    @property
    def closed(self) -> bool:
        """A closed shard has an ending sequence number and receives no more records."""
        return self.ending_sequence is not None

    @property
    def sort_key(self) -> tuple[int, str]:
        """Ties between shards break by starting sequence number, as a number, then by id.

        Sequence numbers are decimal strings of 21 to 40 digits (API reference,
        `SequenceNumber`), so comparing them as strings would put "9..." after "10...".
        """
        return int(self.starting_sequence), self.shard_id


def lineage_order(shards: Iterable[Shard]) -> list[Shard]:
    """Every shard once, each parent before its children; the same order for any input order.

    Among shards whose parents are placed (or not listed), the one with the lowest starting
    sequence number comes first, then the lowest id.
    """
    by_id = _by_id(shards)
    children: dict[str, list[Shard]] = {}
    waiting_for: dict[str, int] = {}  # shard -> how many of its listed parents are not placed yet
    ready: list[tuple[tuple[int, str], Shard]] = []
    for shard in by_id.values():
        parents = _listed_parents(shard, by_id)
        if not parents:
            ready.append((shard.sort_key, shard))
        waiting_for[shard.shard_id] = len(parents)
        for parent in parents:
            children.setdefault(parent.shard_id, []).append(shard)
    heapq.heapify(ready)
    ordered: list[Shard] = []
    while ready:
        _, shard = heapq.heappop(ready)
        ordered.append(shard)
        for child in children.pop(shard.shard_id, ()):
            waiting_for[child.shard_id] -= 1
            if waiting_for[child.shard_id] == 0:
                heapq.heappush(ready, (child.sort_key, child))
    if len(ordered) != len(by_id):
        stuck = sorted(set(by_id) - {shard.shard_id for shard in ordered})
        raise ValueError(f"shard lineage has a cycle through {', '.join(stuck)}")
    return ordered


def readable_shards(shards: Iterable[Shard], finished: set[str] | frozenset[str]) -> list[Shard]:
    """Shards that may be read now, in lineage order: not finished, every parent finished or not listed."""
    by_id = _by_id(shards)
    return [
        shard for shard in lineage_order(by_id.values())
        if shard.shard_id not in finished
        and all(parent in finished or parent not in by_id for parent in shard.parent_ids)
    ]


def depth(shards: Iterable[Shard]) -> dict[str, int]:
    """Each shard's generation among the listed shards: 0 for a shard without a listed parent.

    Records of one key in a parent and its child compare by (depth, sequence number): the
    parent's records come first whatever their sequence numbers say. A merged shard is one
    deeper than the deeper of its parents.
    """
    by_id = _by_id(shards)
    depths: dict[str, int] = {}
    for shard in lineage_order(by_id.values()):
        parents = _listed_parents(shard, by_id)
        depths[shard.shard_id] = 1 + max(depths[p.shard_id] for p in parents) if parents else 0
    return depths


def _by_id(shards: Iterable[Shard]) -> dict[str, Shard]:
    """Shards by id; a shard listed twice (pages merged across calls) keeps its closed form."""
    by_id: dict[str, Shard] = {}
    for shard in shards:
        known = by_id.get(shard.shard_id)
        if known is None or (shard.closed and not known.closed):
            by_id[shard.shard_id] = shard
    return by_id


def _listed_parents(shard: Shard, by_id: Mapping[str, Shard]) -> list[Shard]:
    return [by_id[parent] for parent in shard.parent_ids if parent in by_id]
