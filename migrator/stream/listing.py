"""The stream's shards as the driver plans with them: listed a page at a time, within the API's quota.

A listing is paginated: DynamoDB Streams' DescribeStream returns at most 100 shards a call and
allows 10 calls a second per stream ("Amazon DynamoDB Streams quotas"; Kinesis' ListShards
returns 1,000 a call by default). Listed whole at every trigger (two a second), a stream of 500
shards already takes 10 DescribeStream calls a second, and one of 2,000 takes 40, in bursts of 21.
So calls are paced by a token bucket (`CALLS_PER_SECOND`, at most `BURST_CALLS` at once: never
more than their sum in any second), and each trigger fetches the pages its tokens pay for and
plans with the last complete pass. At 2,000 shards a pass takes about 4 s, so a split's children
would wait for the pass after they appear: when the reader finds a parent's end, it asks for that
parent's children at once (`children_of`, DescribeStream's ShardFilter CHILD_SHARDS, paid from
the same tokens), and they are planned beside the last pass until a pass begun after the lookup
has listed them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from migrator.stream.shards import Shard

# Half of DescribeStream's 10 calls a second, in bursts of up to as many: any second holds at most
# 10. The quota is the stream's, not the reader's: the rest is left to other readers (a Lambda
# trigger, the KCL, a second migrator).
CALLS_PER_SECOND = 5.0
BURST_CALLS = 5.0
# Passes begun after a child's early lookup that may miss it before it is left to the listing alone.
EARLY_CHILD_PASSES = 5

PageFetcher = Callable[[Any], tuple[list[Shard], Any]]  # cursor (None: the first page) → shards, next cursor
ChildFetcher = Callable[[str], list[Shard]]  # parent shard id → its children


def all_pages(fetch: PageFetcher) -> list[Shard]:
    """Every shard, page after page to the last, at once (outside the streaming query's triggers)."""
    shards, cursor = fetch(None)
    while cursor is not None:
        page, cursor = fetch(cursor)
        shards += page
    return shards


@dataclass
class ShardListing:
    """Complete passes over the stream's shard list, each page paid for by a token."""

    calls_per_second: float = CALLS_PER_SECOND
    burst_calls: float = BURST_CALLS
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    complete: list[Shard] | None = None  # the last complete pass
    _pass: list[Shard] = field(default_factory=list)
    _cursor: Any = None
    _tokens: float = math.nan
    _earned_at: float = math.nan
    _passes_begun: int = 0
    _early: dict[str, tuple[Shard, int]] = field(default_factory=dict)  # id → (child, passes begun before it)

    def shards(self, fetch: PageFetcher) -> list[Shard]:
        """The shards to plan with: the first call lists them whole (waiting for tokens); later
        calls fetch the pages the tokens earned since pay for, and return the last complete pass."""
        self._earn()
        if self.complete is None:
            while self.complete is None:
                if self._tokens < 1:
                    self.sleep((1 - self._tokens) / self.calls_per_second)
                    self._earn()
                self._fetch(fetch)
            return self.complete
        while self._tokens >= 1:
            if self._fetch(fetch):
                break  # a pass is complete: plan with it; the next one starts at the next trigger
        return self._with_early(self.complete)

    def children_of(self, parent_id: str, fetch_children: ChildFetcher) -> bool:
        """Look up a finished parent's children now, if a token pays for it; True when looked up."""
        self._earn()
        if self._tokens < 1:
            return False  # the passes will list them
        self._tokens -= 1
        for shard in fetch_children(parent_id):
            if shard.shard_id not in self._early:
                self._early[shard.shard_id] = (shard, self._passes_begun)
        return True

    def _with_early(self, complete: list[Shard]) -> list[Shard]:
        if not self._early:
            return complete
        listed = {s.shard_id for s in complete}
        return complete + [shard for shard, _ in self._early.values() if shard.shard_id not in listed]

    def _fetch(self, fetch: PageFetcher) -> bool:
        """One page; True when it completed a pass."""
        if self._cursor is None:
            self._passes_begun += 1
        self._tokens -= 1
        page, self._cursor = fetch(self._cursor)
        self._pass += page
        if self._cursor is not None:
            return False
        self.complete, self._pass = self._pass, []
        self._forget_listed_children()
        return True

    def _forget_listed_children(self) -> None:
        """Drop the children looked up early that a pass begun after the lookup has listed (or that
        `EARLY_CHILD_PASSES` such passes missed: a listing is no consistent snapshot, but a shard the
        stream still has comes back within a few)."""
        listed = {s.shard_id for s in self.complete or []}
        self._early = {
            shard_id: (shard, begun) for shard_id, (shard, begun) in self._early.items()
            if self._passes_begun <= begun or (shard_id not in listed and self._passes_begun - begun < EARLY_CHILD_PASSES)
        }  # fmt: skip

    def _earn(self) -> None:
        now = self.clock()
        if math.isnan(self._earned_at):
            self._tokens = self.burst_calls
        else:
            self._tokens = min(self.burst_calls, self._tokens + (now - self._earned_at) * self.calls_per_second)
        self._earned_at = now
