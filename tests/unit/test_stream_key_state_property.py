"""A property of Kinesis replication's per-key order, over generated streams: shards hours apart
(catching up after a long snapshot), duplicates and older changes delivered late on their shard,
and batches that read a few records of each shard at a time. Whatever the delivery, each key ends
at its newest change, as long as a late record is within the key state's window of its shard.

The batches are applied as `migrator.replicate.query` and `migrator.replicate.apply` apply them:
the key state drops keys whose newest change in the batch is not newer than the one applied,
`collapse` keeps each remaining key's newest change, and the state records the batch with the
shards still behind the tip.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from migrator.stream.collapse import collapse
from migrator.stream.key_state import KeyState, newest_per_key
from migrator.stream.records import PUT, ChangeRecord

SECOND = 1_000_000
LATE_AT_MOST_SECONDS = 1800  # how far behind its shard's newest change a late record may be


@st.composite
def shard_streams(draw) -> dict[str, list[ChangeRecord]]:
    """Per shard, its records in arrival order; keys belong to one shard, as a partition key does."""
    streams = {}
    for shard in [f"shard-{n}" for n in range(draw(st.integers(1, 3)))]:
        now = draw(st.integers(0, 6 * 3600)) * SECOND  # where this shard's changes begin: hours apart
        records: list[ChangeRecord] = []
        for sequence in range(1, draw(st.integers(1, 30)) + 1):
            recent = [r for r in records if r.order[0] >= now - LATE_AT_MOST_SECONDS * SECOND]
            if recent and draw(st.booleans()):  # a duplicate of an older change, or the change itself again
                earlier = draw(st.sampled_from(recent))
                micros, value = earlier.order[0], earlier.new_image["v"]["S"]
                key = earlier.key
            else:
                now += draw(st.integers(1, 900)) * SECOND
                micros, value = now, f"{shard}:{sequence}"
                key = (f"{shard}/k{draw(st.integers(0, 3))}",)
            records.append(change(shard, key, micros, sequence, value))
        streams[shard] = records
    return streams


def change(shard: str, key: tuple, micros: int, sequence: int, value: str) -> ChangeRecord:
    keys = {"pk": {"S": key[0]}}
    return ChangeRecord(
        key=key, keys=keys, operation=PUT, new_image={**keys, "v": {"S": value}}, shard_id=shard,
        sequence_number=str(sequence), created_at=micros / SECOND, order=(micros, 0, sequence),
    )  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(streams=shard_streams(), reads=st.lists(st.integers(0, 4), min_size=1, max_size=12))
def test_each_key_ends_at_its_newest_change_whatever_the_delivery(streams, reads):
    state, target = KeyState(), {}
    position = {shard: 0 for shard in streams}
    batch_id = 0
    while any(position[shard] < len(records) for shard, records in streams.items()):
        batch = []
        for number, (shard, records) in enumerate(streams.items()):
            count = max(1, reads[(batch_id + number) % len(reads)])  # some shards read more per batch than others
            batch += records[position[shard]:position[shard] + count]
            position[shard] += count
        behind = {shard for shard, records in streams.items() if position[shard] < len(records)}
        newest = newest_per_key((c.key, c.order) for c in batch)
        stale = state.stale_keys(newest.items())
        for applied in collapse(c for c in batch if c.key not in stale):
            target[applied.key] = applied.new_image["v"]["S"]
        shards_read = {}
        for c in batch:
            shards_read[c.shard_id] = max(c.order[0], shards_read.get(c.shard_id, 0))
        state.record(batch_id, {k: o for k, o in newest.items() if k not in stale}, shards_read, behind)
        batch_id += 1
    expected = {}
    for records in streams.values():
        for c in sorted(records, key=lambda c: c.order):
            expected[c.key] = c.new_image["v"]["S"]
    assert target == expected
