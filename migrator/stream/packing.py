"""A micro-batch's shard ranges packed into a few Spark partitions of about equal records.

A partition per shard made a batch of a 2,000-shard stream about 1,450 Spark tasks, each
paying a Python worker's round trip, so the batch's apply time, and the lag, grew with the
shard count. Packing keeps each shard's range whole and in order inside one partition, which
is all the apply step needs: a key's changes in one batch all lie in one shard.
"""

from __future__ import annotations

import heapq
from typing import Sequence


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
