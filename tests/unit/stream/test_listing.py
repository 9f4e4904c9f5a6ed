"""Listing a stream's shards a page at a time, never above DescribeStream's 10 calls a second."""

from __future__ import annotations

import collections

from migrator.stream.listing import ShardListing
from migrator.stream.shards import Shard

PAGE = 100  # DescribeStream's largest page
TRIGGER_SECONDS = 0.5  # migrator.replicate.query.TRIGGER_INTERVAL
QUOTA_PER_SECOND = 10


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Stream:
    """Shards in creation order, served in pages of 100 as DescribeStream does; every call timed."""

    def __init__(self, clock: Clock, shards: int):
        self.clock = clock
        self.shards = [shard(i) for i in range(shards)]
        self.calls: list[float] = []

    def page(self, after: str | None) -> tuple[list[Shard], str | None]:
        self.calls.append(self.clock.now)
        start = 0 if after is None else next(i for i, s in enumerate(self.shards) if s.shard_id == after) + 1
        page = self.shards[start : start + PAGE]
        return page, (page[-1].shard_id if len(page) == PAGE else None)

    def busiest_second(self) -> int:
        return max(collections.Counter(int(at) for at in self.calls).values())


def shard(number: int) -> Shard:
    return Shard(f"shardId-{number:08d}-0000000000000000", None, str(10**20 + number))


def listing_of(clock: Clock) -> ShardListing:
    return ShardListing(clock=clock, sleep=clock.sleep)


def test_the_first_listing_is_whole_and_paced_within_the_quota():
    clock = Clock()
    stream = Stream(clock, 2_000)

    listed = listing_of(clock).shards(stream.page)

    assert [s.shard_id for s in listed] == [s.shard_id for s in stream.shards]
    assert len(stream.calls) == 21, "20 full pages and the empty one after them"
    assert stream.busiest_second() <= QUOTA_PER_SECOND


def test_triggers_at_2000_shards_stay_within_the_quota_and_see_new_shards_within_a_pass():
    clock = Clock()
    stream = Stream(clock, 2_000)
    listing = listing_of(clock)
    listing.shards(stream.page)
    stream.shards.append(shard(5_000))  # a split's child, appearing while the reader runs
    appeared = clock.now
    seen_at = None
    for _ in range(240):  # two minutes of triggers
        clock.now += TRIGGER_SECONDS
        listed = listing.shards(stream.page)
        if seen_at is None and listed[-1].shard_id == shard(5_000).shard_id:
            seen_at = clock.now

    assert stream.busiest_second() <= QUOTA_PER_SECOND
    assert len(stream.calls) / (clock.now - stream.calls[0]) <= 5.5, "about half the quota on average"
    assert seen_at is not None and seen_at - appeared <= 2 * 21 / 5 + TRIGGER_SECONDS, "within two passes"


def test_a_small_stream_is_listed_at_every_trigger():
    clock = Clock()
    stream = Stream(clock, 10)
    listing = listing_of(clock)
    listing.shards(stream.page)
    stream.shards.append(shard(10))

    clock.now += TRIGGER_SECONDS
    assert len(listing.shards(stream.page)) == 11
    assert len(stream.calls) == 2


def child(number: int, parent: Shard) -> Shard:
    return Shard(f"shardId-{number:08d}-1111111111111111", parent.shard_id, str(10**21 + number))


def test_a_finished_parents_children_are_planned_at_once_not_a_pass_later():
    clock = Clock()
    stream = Stream(clock, 2_000)
    listing = listing_of(clock)
    listing.shards(stream.page)
    parent = stream.shards[7]
    children = [child(1, parent), child(2, parent)]
    stream.shards += children  # the split: DescribeStream lists them only from the next pass on
    clock.now += 5  # tokens for a lookup

    assert listing.children_of(parent.shard_id, lambda p: children if p == parent.shard_id else [])
    clock.now += TRIGGER_SECONDS
    listed = listing.shards(stream.page)

    assert [s.shard_id for s in listed[-2:]] == [c.shard_id for c in children]
    assert len({s.shard_id for s in listed}) == len(listed), "each shard once"


def test_children_found_early_are_kept_until_a_pass_begun_after_them_has_listed_them():
    clock = Clock()
    stream = Stream(clock, 250)  # three pages a pass
    listing = listing_of(clock)
    listing.shards(stream.page)  # every token spent
    clock.now += 0.2  # one token: the next pass begins, one page of three
    listing.shards(stream.page)
    parent = stream.shards[0]
    early = child(1, parent)
    clock.now += 0.2
    assert listing.children_of(parent.shard_id, lambda p: [early])
    stream.shards.append(early)  # listed from now on, after the pages already fetched

    clock.now += 1  # the pass begun before the lookup completes: it may have missed the child
    after_that_pass = listing.shards(stream.page)
    for _ in range(10):  # passes begun after the lookup
        clock.now += TRIGGER_SECONDS
        listed = listing.shards(stream.page)

    assert early.shard_id in {s.shard_id for s in after_that_pass}
    assert [s.shard_id for s in listed].count(early.shard_id) == 1
    stream.shards.remove(early)  # 24 h later, expired: the lookup is long forgotten
    for _ in range(10):
        clock.now += TRIGGER_SECONDS
        listed = listing.shards(stream.page)
    assert early.shard_id not in {s.shard_id for s in listed}


def test_a_lookup_spends_a_token_and_none_is_made_without_one():
    clock = Clock()
    stream = Stream(clock, 2_000)
    listing = listing_of(clock)
    listing.shards(stream.page)  # the first listing spends every token
    lookups = []

    def children(parent: str) -> list[Shard]:
        lookups.append(clock.now)
        return []

    assert listing.children_of(stream.shards[0].shard_id, children) is False
    assert lookups == []
    for _ in range(120):
        clock.now += TRIGGER_SECONDS
        listing.shards(stream.page)
        listing.children_of(stream.shards[0].shard_id, children)
    calls = sorted(stream.calls + lookups)
    assert max(collections.Counter(int(at) for at in calls).values()) <= QUOTA_PER_SECOND
    assert lookups, "lookups are made once tokens are earned"
