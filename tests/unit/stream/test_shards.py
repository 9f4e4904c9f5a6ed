"""Shard lineage: parents before children, deterministic, trimmed parents count as consumed."""

from __future__ import annotations

import itertools
import random

import pytest

from migrator.stream.shards import Shard, depth, lineage_order, readable_shards


def shard(shard_id: str, start: int | str, parent: str | None = None, end: int | str | None = None) -> Shard:
    return Shard(shard_id, parent, str(start), None if end is None else str(end))


def ids(shards) -> list[str]:
    return [s.shard_id for s in shards]


# A split: the root closed at 199, and its partition's two halves carry on.
ROOT = shard("shardId-root", 100, end=199)
LEFT = shard("shardId-left", 200, parent="shardId-root")
RIGHT = shard("shardId-right", 201, parent="shardId-root")
SPLIT = [ROOT, LEFT, RIGHT]

# Three generations: root → a → (a1, a2), plus an unrelated root with a child.
THREE_GENERATIONS = [
    shard("g0", 10, end=19),
    shard("g1-a", 20, parent="g0", end=29),
    shard("g1-b", 21, parent="g0"),
    shard("g2-a1", 30, parent="g1-a"),
    shard("g2-a2", 31, parent="g1-a"),
    shard("other-root", 15, end=40),
    shard("other-child", 41, parent="other-root"),
]


def assert_parents_first(ordered: list[Shard]) -> None:
    position = {s.shard_id: i for i, s in enumerate(ordered)}
    for s in ordered:
        if s.parent_id in position:
            assert position[s.parent_id] < position[s.shard_id], f"{s.parent_id} must precede {s.shard_id}"


# ---- Shard.from_description ----


def test_from_description_reads_an_open_shard():
    described = Shard.from_description({
        "ShardId": "shardId-00000001541626099285-f35f62ef",
        "SequenceNumberRange": {"StartingSequenceNumber": "1100000000017454423009"},
    })
    assert described == Shard("shardId-00000001541626099285-f35f62ef", None, "1100000000017454423009", None)
    assert not described.closed


def test_from_description_reads_a_closed_child_shard():
    described = Shard.from_description({
        "ShardId": "shardId-child",
        "ParentShardId": "shardId-parent",
        "SequenceNumberRange": {
            "StartingSequenceNumber": "1200000000017454423009",
            "EndingSequenceNumber": "1200000000017454423999",
        },
    })
    assert described.parent_id == "shardId-parent"
    assert described.ending_sequence == "1200000000017454423999"
    assert described.closed


def test_from_description_without_a_starting_sequence_is_refused():
    with pytest.raises(ValueError, match="shardId-x"):
        Shard.from_description({"ShardId": "shardId-x", "SequenceNumberRange": {}})


def test_shard_is_frozen_and_hashable():
    with pytest.raises(AttributeError):
        ROOT.shard_id = "other"  # type: ignore[misc]
    assert len({ROOT, shard("shardId-root", 100, end=199)}) == 1


# ---- lineage_order ----


def test_split_orders_the_parent_before_both_children():
    assert ids(lineage_order([RIGHT, LEFT, ROOT])) == ["shardId-root", "shardId-left", "shardId-right"]


def test_chain_of_single_children_is_read_in_generation_order():
    # Each shard closes and is succeeded by one child (as when a partition's shard rolls over).
    chain = [shard("c3", 400, parent="c2"), shard("c1", 200, parent="c0", end=299),
             shard("c0", 100, end=199), shard("c2", 300, parent="c1", end=399)]
    assert ids(lineage_order(chain)) == ["c0", "c1", "c2", "c3"]


def test_child_precedes_by_lineage_even_when_its_starting_sequence_is_lower():
    # Hand-built inconsistency: lineage wins over sequence numbers.
    assert ids(lineage_order([shard("child", 5, parent="parent"), shard("parent", 900, end=999)])) == ["parent", "child"]


def test_trimmed_parent_makes_its_children_roots():
    orphans = [shard("b", 300, parent="gone"), shard("a", 200, parent="gone"), shard("c", 250)]
    assert ids(lineage_order(orphans)) == ["a", "c", "b"]


def test_three_generations_keep_every_parent_first():
    ordered = lineage_order(THREE_GENERATIONS)
    assert_parents_first(ordered)
    assert ids(ordered) == ["g0", "other-root", "g1-a", "g1-b", "g2-a1", "g2-a2", "other-child"]


def test_order_is_the_same_for_every_input_permutation():
    expected = ids(lineage_order(THREE_GENERATIONS))
    for permutation in itertools.permutations(THREE_GENERATIONS[:6]):
        assert ids(lineage_order([*permutation, THREE_GENERATIONS[6]])) == expected
    rng = random.Random(3)
    for _ in range(200):
        shuffled = THREE_GENERATIONS[:]
        rng.shuffle(shuffled)
        assert ids(lineage_order(shuffled)) == expected


def test_ties_in_starting_sequence_break_by_shard_id():
    assert ids(lineage_order([shard("b", 7), shard("a", 7), shard("c", 7)])) == ["a", "b", "c"]


def test_forty_digit_sequence_numbers_compare_as_numbers_not_strings():
    short = shard("z-short", "9" * 21)  # 21 digits, lexically after "1..." but numerically smaller
    long = shard("a-long", "1" + "0" * 39)  # 40 digits
    longer_by_one = shard("m-long", "1" + "0" * 38 + "1")
    assert ids(lineage_order([long, longer_by_one, short])) == ["z-short", "a-long", "m-long"]
    assert sorted(["9" * 21, "1" + "0" * 39]) == ["1" + "0" * 39, "9" * 21]  # what a string sort would do


def test_a_shard_listed_twice_appears_once_in_its_closed_form():
    open_form = shard("s", 10)
    closed_form = shard("s", 10, end=20)
    for listing in ([open_form, closed_form], [closed_form, open_form]):
        assert lineage_order(listing) == [closed_form]


def test_a_cycle_is_refused_rather_than_looping():
    with pytest.raises(ValueError, match="cycle"):
        lineage_order([shard("x", 1, parent="y"), shard("y", 2, parent="x")])


def test_empty_listing():
    assert lineage_order([]) == []
    assert readable_shards([], set()) == []
    assert depth([]) == {}


# ---- readable_shards ----


def test_children_of_a_split_wait_until_the_parent_is_finished():
    assert ids(readable_shards(SPLIT, set())) == ["shardId-root"]
    assert ids(readable_shards(SPLIT, {"shardId-root"})) == ["shardId-left", "shardId-right"]
    assert ids(readable_shards(SPLIT, {"shardId-root", "shardId-left"})) == ["shardId-right"]
    assert readable_shards(SPLIT, {"shardId-root", "shardId-left", "shardId-right"}) == []


def test_children_of_a_trimmed_parent_are_readable_at_once():
    assert ids(readable_shards([LEFT, RIGHT], set())) == ["shardId-left", "shardId-right"]


def test_only_one_generation_at_a_time_along_a_lineage():
    assert ids(readable_shards(THREE_GENERATIONS, set())) == ["g0", "other-root"]
    assert ids(readable_shards(THREE_GENERATIONS, {"g0"})) == ["other-root", "g1-a", "g1-b"]
    assert ids(readable_shards(THREE_GENERATIONS, {"g0", "g1-a", "other-root"})) == [
        "g1-b", "g2-a1", "g2-a2", "other-child"
    ]


def test_finished_ids_no_longer_listed_are_ignored():
    assert ids(readable_shards(SPLIT, {"shardId-root", "long-gone"})) == ["shardId-left", "shardId-right"]


def test_readable_shards_do_not_depend_on_input_order():
    finished = {"g0"}
    expected = ids(readable_shards(THREE_GENERATIONS, finished))
    assert ids(readable_shards(list(reversed(THREE_GENERATIONS)), finished)) == expected


# ---- depth ----


def test_depth_of_a_split():
    assert depth(SPLIT) == {"shardId-root": 0, "shardId-left": 1, "shardId-right": 1}


def test_depth_of_three_generations():
    assert depth(THREE_GENERATIONS) == {
        "g0": 0, "g1-a": 1, "g1-b": 1, "g2-a1": 2, "g2-a2": 2, "other-root": 0, "other-child": 1,
    }


def test_depth_counts_from_the_oldest_listed_ancestor():
    assert depth([shard("g2", 30, parent="g1"), shard("g1", 20, parent="trimmed", end=29)]) == {"g1": 0, "g2": 1}


def test_a_merged_kinesis_shard_waits_for_both_parents_and_is_deeper_than_either():
    from migrator.stream.shards import Shard, depth, lineage_order, readable_shards

    a = Shard("a", None, "1", "10")
    b = Shard("b", None, "2", "20")
    a1 = Shard("a1", "a", "30", "40")
    merged = Shard("m", "a1", "50", adjacent_parent_id="b")
    listed = [merged, b, a1, a]
    assert [s.shard_id for s in lineage_order(listed)] == ["a", "b", "a1", "m"]
    assert depth(listed) == {"a": 0, "b": 0, "a1": 1, "m": 2}
    assert [s.shard_id for s in readable_shards(listed, {"a", "a1"})] == ["b"]
    assert [s.shard_id for s in readable_shards(listed, {"a", "a1", "b"})] == ["m"]
    assert [s.shard_id for s in readable_shards([merged, a1], {"a1"})] == ["m"]  # b trimmed: consumed


def test_kinesis_list_shards_entries_carry_the_adjacent_parent():
    from migrator.stream.shards import Shard

    shard = Shard.from_description(
        {"ShardId": "m", "ParentShardId": "a", "AdjacentParentShardId": "b", "SequenceNumberRange": {"StartingSequenceNumber": "7"}}
    )
    assert shard.parent_ids == ("a", "b") and not shard.closed
