"""Each key's last applied Kinesis change: stale and repeated changes across batches, bounded memory."""

from __future__ import annotations

from migrator.stream import key_state
from migrator.stream.key_state import WINDOW_SECONDS, KeyState

SECOND = 1_000_000


def order(seconds: float, sequence: int = 1, depth: int = 0) -> tuple:
    return (int(seconds * SECOND), depth, sequence)


def test_a_key_whose_batch_newest_is_not_newer_than_the_applied_one_is_stale():
    state = KeyState()
    state.record(0, {"a": order(100), "b": order(100)})
    batch = {"a": order(99), "b": order(101), "c": order(1)}
    assert state.stale_keys(batch.items()) == {"a"}
    assert state.stale_keys([("a", order(100))]) == {"a"}  # an exact repeat of the applied change


def test_record_never_moves_a_key_back():
    state = KeyState()
    state.record(0, {"a": order(100)})
    state.record(1, {"a": order(50)})
    assert state.last["a"] == order(100)


def test_equal_times_fall_back_to_depth_then_sequence():
    state = KeyState()
    state.record(0, {"a": order(100, sequence=5)})
    assert state.stale_keys([("a", order(100, sequence=4))]) == {"a"}
    assert state.stale_keys([("a", order(100, sequence=6))]) == set()
    assert state.stale_keys([("a", order(100, sequence=1, depth=1))]) == set()  # a child shard's record


def test_keys_older_than_the_window_are_forgotten_with_their_batch_files():
    state = KeyState()
    assert state.record(0, {"old": order(0)}) == []
    assert state.record(1, {"mid": order(WINDOW_SECONDS / 2)}) == []
    expired = state.record(2, {"new": order(WINDOW_SECONDS + 1)})
    assert expired == [0]
    assert set(state.last) == {"mid", "new"}
    assert set(state.newest_by_batch) == {1, 2}


def test_newest_per_key_and_json_round_trip_keep_long_sequence_numbers():
    long_sequence = int("4" * 56)
    newest = key_state.newest_per_key([("a", order(1)), ("a", order(3)), ("a", order(2)), ("b", (5, 0, long_sequence))])
    assert newest == {"a": order(3), "b": (5, 0, long_sequence)}
    assert key_state.from_json(key_state.to_json(newest)) == (newest, {})


def test_a_lagging_shard_keeps_its_keys_while_another_shard_runs_hours_ahead():
    # Catching up after a long snapshot: shard A is five hours behind shard B. A key applied
    # from A must be remembered while A can still deliver an older change of it.
    state = KeyState()
    five_hours = 5 * 3600
    state.record(0, {"k": order(100)}, shards_read={"A": order(100)[0]}, behind={"A"})
    state.record(1, {"x": order(100 + five_hours)}, shards_read={"B": order(100 + five_hours)[0]}, behind={"A"})
    assert state.stale_keys([("k", order(99))]) == {"k"}  # A's delayed duplicate is still dropped


def test_keys_are_forgotten_once_no_shard_behind_can_deliver_older_changes():
    state = KeyState()
    state.record(0, {"k": order(100)}, shards_read={"A": order(100)[0]}, behind={"A"})
    late = 100 + WINDOW_SECONDS + 1
    # A reaches the stream's tip (or is read to its end): the window runs from the newest change again.
    expired = state.record(1, {"x": order(late)}, shards_read={"B": order(late)[0]}, behind=set())
    assert expired == [0]
    assert set(state.last) == {"x"}


def test_a_shard_behind_that_delivered_nothing_yet_holds_the_window_at_the_replay_start():
    state = KeyState()
    late = 100 + WINDOW_SECONDS + 1
    state.record(0, {"k": order(100)}, shards_read={"A": order(100)[0]}, behind=set())
    state.record(1, {"x": order(late)}, shards_read={"B": order(late)[0]}, behind={"C"}, floor=order(50)[0])
    assert set(state.last) == {"k", "x"}


def test_batch_files_carry_the_shards_read_and_old_files_still_load():
    applied, shards = {"a": order(3)}, {"A": order(3)[0]}
    assert key_state.from_json(key_state.to_json(applied, shards)) == (applied, shards)
    old_format = '{"a":[3000000,0,"1"]}'  # written before files named the shards
    assert key_state.from_json(old_format) == ({"a": order(3)}, {})
    state = KeyState()
    state.load(7, key_state.to_json(applied, shards))
    assert state.last == applied and state.shard_newest == shards and state.newest_by_batch == {7: order(3)[0]}


def test_shards_gone_from_the_offset_are_forgotten():
    state = KeyState()
    state.record(0, {"k": order(1)}, shards_read={"A": order(1)[0], "B": order(1)[0]})
    state.forget_shards_except({"B", "C"})
    assert state.shard_newest == {"B": order(1)[0]}
