"""A micro-batch's shard ranges packed into a few Spark partitions of about equal records.

A partition per shard made a batch of a 2,000-shard stream about 1,450 Spark tasks, each
paying a Python worker's round trip, so the batch's apply time, and the lag, grew with the
shard count. Packing keeps each shard's range whole and in order inside one partition, which
is all the apply step needs: a key's changes in one batch all lie in one shard. A batch that
holds a backlog gets more partitions, so a task does not carry megabytes of records (Spark warns
above 1 MB a task).
"""

from __future__ import annotations

import heapq
import math
from typing import Sequence


def partition_count(records: int, at_least: int, records_per_partition: int) -> int:
    """How many partitions a batch of `records` gets: `at_least` (enough for every core), more when
    the batch is large, so that a task ships no more than about `records_per_partition` records."""
    return max(at_least, math.ceil(records / records_per_partition))


def pack(weights: Sequence[int], bins: int) -> list[list[int]]:
    """Indexes of `weights` in at most `bins` non-empty groups of about equal total weight.

    Greedy, heaviest first, each into the lightest group so far (within 4/3 of the best
    packing); each group lists its indexes in ascending order, and the groups come in the order
    of their first index, so the result is deterministic.
    """
    if bins < 1:
        raise ValueError(f"bins must be at least 1, not {bins}")
    # (total weight, members so far, group number, members): ties go to the group with fewest members
    groups: list[tuple[int, int, int, list[int]]] = [(0, 0, n, []) for n in range(min(bins, len(weights)))]
    for index in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        total, count, n, members = heapq.heappop(groups)
        members.append(index)
        heapq.heappush(groups, (total + weights[index], count + 1, n, members))
    return sorted(sorted(members) for *_, members in groups)
