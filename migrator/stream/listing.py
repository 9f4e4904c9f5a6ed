"""The stream's shards as the driver plans with them: listed a page at a time, within the API's quota.

A listing is paginated: DynamoDB Streams' DescribeStream returns at most 100 shards a call and
allows 10 calls a second per stream ("Amazon DynamoDB Streams quotas"; Kinesis' ListShards
returns 1,000 a call by default). Listed whole at every trigger (two a second), a stream of 500
shards already takes 10 DescribeStream calls a second, and one of 2,000 takes 40, in bursts of 21.
So calls are paced by a token bucket (`CALLS_PER_SECOND`, at most `BURST_CALLS` at once: never
more than their sum in any second), and each trigger fetches the pages its tokens pay for and
plans with the last complete pass. At 2,000 shards a pass takes about 4 s: a split's children
are planned from the pass after they appear.
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

PageFetcher = Callable[[Any], tuple[list[Shard], Any]]  # cursor (None: the first page) → shards, next cursor


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
        return self.complete

    def _fetch(self, fetch: PageFetcher) -> bool:
        """One page; True when it completed a pass."""
        self._tokens -= 1
        page, self._cursor = fetch(self._cursor)
        self._pass += page
        if self._cursor is not None:
            return False
        self.complete, self._pass = self._pass, []
        return True

    def _earn(self) -> None:
        now = self.clock()
        if math.isnan(self._earned_at):
            self._tokens = self.burst_calls
        else:
            self._tokens = min(self.burst_calls, self._tokens + (now - self._earned_at) * self.calls_per_second)
        self._earned_at = now
