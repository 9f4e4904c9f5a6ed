"""Collapsing a micro-batch: the last change per key by lineage and sequence, stable and idempotent."""

from __future__ import annotations

import itertools
import random

from migrator.items import key_of
from migrator.stream.collapse import collapse, drop_filtered, key_repr
from migrator.stream.records import DELETE, PUT, ChangeRecord

KEY_NAMES = ("pk",)


def change(pk: str, sequence: int, operation: str = PUT, depth: int = 0, shard: str = "shard-a",
           value: str | None = None, ttl: bool = False, lookup: bool = False,
           replicated: bool = False) -> ChangeRecord:
    keys = {"pk": {"S": pk}}
    image = None
    if operation == PUT and not lookup:
        image = {**keys, "v": {"S": value if value is not None else f"{pk}@{sequence}"}}
    return ChangeRecord(
        key=key_of(keys, KEY_NAMES), keys=keys, operation=operation, new_image=image, shard_id=shard,
        sequence_number=str(sequence), created_at=1_700_000_000.0 + sequence, order=(depth, sequence),
        user_identity_is_ttl=ttl, needs_lookup=lookup, replicated=replicated,
    )


def final_state(changes: list[ChangeRecord]) -> dict[str, dict | None]:
    """What replaying every change in order leaves in the table: the reference for collapse."""
    table: dict[str, dict | None] = {}
    for c in sorted(changes, key=lambda c: c.order):
        table[c.keys["pk"]["S"]] = c.new_image if c.operation == PUT else None
    return table


def test_interleaved_keys_keep_each_keys_last_change():
    changes = [change("a", 1), change("b", 2), change("a", 3, DELETE), change("c", 4), change("b", 5),
               change("a", 6, value="back"), change("c", 7, DELETE)]
    collapsed = collapse(changes)
    assert [(c.keys["pk"]["S"], c.operation, c.sequence_number) for c in collapsed] == [
        ("a", PUT, "6"), ("b", PUT, "5"), ("c", DELETE, "7")
    ]
    assert collapsed[0].new_image["v"] == {"S": "back"}
    assert {c.keys["pk"]["S"]: (c.new_image if c.operation == PUT else None) for c in collapsed} == final_state(changes)


def test_a_put_after_a_delete_resurrects_and_a_delete_after_a_put_deletes():
    assert collapse([change("k", 1, DELETE), change("k", 2)])[0].operation == PUT
    assert collapse([change("k", 1), change("k", 2, DELETE)])[0].operation == DELETE


def test_input_order_does_not_matter_only_the_records_order():
    changes = [change("k", 30), change("k", 10, DELETE), change("k", 20)]
    for permutation in itertools.permutations(changes):
        assert collapse(permutation) == [changes[0]]


def test_child_shard_beats_parent_shard_whatever_the_sequence_numbers():
    # The key was updated in the parent, then (after the split) in the child; the child's
    # sequence number happens to be lower. Lineage decides: the child's change is later.
    in_parent = change("k", 900, depth=0, shard="parent", value="old")
    in_child = change("k", 500, depth=1, shard="child", value="new")
    assert collapse([in_child, in_parent]) == [in_child]
    assert collapse([in_parent, in_child]) == [in_child]
    deleted_in_grandchild = change("k", 100, DELETE, depth=2, shard="grandchild")
    assert collapse([in_child, deleted_in_grandchild, in_parent]) == [deleted_in_grandchild]


def test_sequence_numbers_compare_as_numbers():
    short = change("k", int("9" * 21), value="earlier")
    long = change("k", int("1" + "0" * 39), value="later")
    assert collapse([long, short]) == [long]


def test_duplicates_count_once():
    once = [change("a", 1), change("b", 2, DELETE), change("a", 3)]
    twice = once + [change("a", 1), change("a", 3), change("b", 2, DELETE)]
    assert collapse(twice) == collapse(once)
    assert len(collapse(twice)) == 2


def test_collapse_is_idempotent():
    rng = random.Random(7)
    changes = [
        change(f"k{rng.randrange(20)}", sequence, rng.choice([PUT, DELETE]), depth=rng.randrange(3),
               shard=f"s{rng.randrange(4)}")
        for sequence in range(500)
    ]
    once = collapse(changes)
    assert collapse(once) == once
    assert len({c.key for c in once}) == len(once)
    assert {c.keys["pk"]["S"]: (c.new_image if c.operation == PUT else None) for c in once} == final_state(changes)


def test_output_order_is_by_key_and_stable():
    changes = [change(pk, i) for i, pk in enumerate(["m", "z", "a", "é", "b"])]
    expected = [c.keys["pk"]["S"] for c in collapse(changes)]
    assert expected == sorted(expected, key=lambda pk: key_repr(key_of({"pk": {"S": pk}}, KEY_NAMES)))
    rng = random.Random(1)
    for _ in range(20):
        rng.shuffle(changes)
        assert [c.keys["pk"]["S"] for c in collapse(changes)] == expected


def test_keys_of_every_type_sort_without_error():
    binary = {"pk": {"B": b"\x00\xff"}}
    number = {"pk": {"N": "12345678901234567890123456789012345678"}}
    changes = [
        ChangeRecord(key=key_of(keys, KEY_NAMES), keys=keys, operation=DELETE, new_image=None, shard_id="s",
                     sequence_number=str(i), created_at=0.0, order=(0, i))
        for i, keys in enumerate([binary, number, {"pk": {"S": "x"}}])
    ]
    assert len(collapse(changes)) == 3
    assert key_repr(changes[0].key) == '[[["B","AP8="]]]'


def test_lookups_collapse_like_any_other_change():
    assert collapse([change("k", 1), change("k", 2, lookup=True)])[0].needs_lookup
    assert collapse([change("k", 1, lookup=True), change("k", 2, DELETE)])[0].operation == DELETE


def test_collapse_of_nothing_is_nothing():
    assert collapse([]) == []


# ---- drop_filtered ----


def test_ttl_deletes_are_dropped_only_when_asked():
    changes = [change("a", 1), change("a", 2, DELETE, ttl=True), change("b", 3, DELETE)]
    assert drop_filtered(changes, skip_ttl_deletes=False) == changes
    assert drop_filtered(changes, skip_ttl_deletes=True) == [changes[0], changes[2]]


def test_dropping_before_collapsing_keeps_the_put_the_ttl_delete_followed():
    changes = [change("a", 1, value="kept"), change("a", 2, DELETE, ttl=True)]
    assert collapse(drop_filtered(changes, skip_ttl_deletes=True)) == [changes[0]]
    assert collapse(drop_filtered(changes, skip_ttl_deletes=False)) == [changes[1]]


def test_replicated_writes_are_dropped_only_when_asked():
    changes = [change("a", 1), change("a", 2, replicated=True), change("b", 3, DELETE, replicated=True)]
    assert drop_filtered(changes, skip_ttl_deletes=False) == changes
    assert drop_filtered(changes, skip_ttl_deletes=False, skip_replicated=True) == [changes[0]]
    # The local write stays the key's last state: the other region's later write is its own migrator's.
    assert collapse(drop_filtered(changes, skip_ttl_deletes=False, skip_replicated=True)) == [changes[0]]
