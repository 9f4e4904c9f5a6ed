"""Stream offsets: canonical JSON, per-shard positions, and refusal of another format or stream."""

from __future__ import annotations

import json
import pickle

import pytest

from migrator.errors import CheckpointError
from migrator.stream.offsets import OFFSET_FORMAT, ShardPosition, StreamOffset
from migrator.stream.shards import Shard

ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders/stream/2024-11-29T09:12:00.000"
OTHER_ARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/Orders/stream/2024-11-30T10:00:00.000"
SEQ_40 = "1" + "0" * 39
SEQ_21 = "9" * 21


def shard(shard_id: str, parent: str | None = None) -> Shard:
    return Shard(shard_id, parent, "100")


def sample() -> StreamOffset:
    return (
        StreamOffset.empty(ARN)
        .with_shards([shard("shardId-b"), shard("shardId-a"), shard("shardId-c", parent="shardId-a")])
        .advance("shardId-a", SEQ_40)
        .finish("shardId-a")
        .advance("shardId-b", SEQ_21)
    )


def test_round_trip_through_json():
    offset = sample()
    assert StreamOffset.from_json(offset.to_json(), ARN) == offset
    assert StreamOffset.from_dict(json.loads(offset.to_json()), ARN) == offset


def test_json_is_canonical_and_keeps_sequence_numbers_as_strings():
    assert sample().to_json() == (
        '{"shards":{'
        f'"shardId-a":{{"finished":true,"sequence_number":"{SEQ_40}"}},'
        f'"shardId-b":{{"finished":false,"sequence_number":"{SEQ_21}"}},'
        '"shardId-c":{"finished":false,"sequence_number":null}},'
        f'"stream_arn":"{ARN}","version":{OFFSET_FORMAT}}}'
    )


def test_json_does_not_depend_on_the_order_shards_were_added():
    forward = StreamOffset(OFFSET_FORMAT, ARN, {"a": ShardPosition("1"), "b": ShardPosition(), "c": ShardPosition()})
    backward = StreamOffset(OFFSET_FORMAT, ARN, {"c": ShardPosition(), "b": ShardPosition(), "a": ShardPosition("1")})
    assert forward.to_json() == backward.to_json()
    assert forward == backward
    # Spark's worker serializes the dict with plain json.dumps: insertion order must be canonical too.
    assert json.dumps(forward.to_dict()) == json.dumps(backward.to_dict())
    assert list(backward.shards) == ["a", "b", "c"]


def test_the_callers_dict_cannot_change_the_offset():
    positions = {"a": ShardPosition()}
    offset = StreamOffset(OFFSET_FORMAT, ARN, positions)
    positions["b"] = ShardPosition()
    assert list(offset.shards) == ["a"]


def test_offsets_are_frozen_hashable_and_picklable():
    offset = sample()
    with pytest.raises(AttributeError):
        offset.stream_arn = OTHER_ARN  # type: ignore[misc]
    assert hash(offset) == hash(StreamOffset.from_json(offset.to_json(), ARN))
    assert pickle.loads(pickle.dumps(offset)) == offset


def test_with_shards_adds_new_shards_at_trim_horizon_and_keeps_known_positions():
    offset = sample().with_shards([shard("shardId-a"), shard("shardId-d", parent="shardId-b")])
    assert offset.shards["shardId-d"] == ShardPosition(None, False)
    assert offset.shards["shardId-a"] == ShardPosition(SEQ_40, True)
    assert offset.shards["shardId-b"] == ShardPosition(SEQ_21, False)
    assert sample().with_shards([shard("shardId-a")]) == sample()


def test_advance_and_finish_return_new_offsets():
    before = StreamOffset.empty(ARN).with_shards([shard("s")])
    after = before.advance("s", "200")
    assert before.shards["s"] == ShardPosition()
    assert after.shards["s"] == ShardPosition("200", False)
    finished = after.finish("s")
    assert finished.shards["s"] == ShardPosition("200", True)
    assert finished.finish("s") == finished
    assert finished.finished == frozenset({"s"})


def test_advance_compares_sequence_numbers_as_numbers():
    offset = StreamOffset.empty(ARN).with_shards([shard("s")]).advance("s", SEQ_21)
    assert offset.advance("s", SEQ_40).shards["s"].sequence_number == SEQ_40  # lexically smaller, numerically larger
    assert offset.advance("s", SEQ_21) == offset  # replaying a batch re-applies the same position
    with pytest.raises(ValueError, match="cannot move back"):
        offset.advance("s", "1" * 21)


def test_unknown_and_finished_shards_cannot_advance():
    with pytest.raises(ValueError, match="not in the offset"):
        StreamOffset.empty(ARN).advance("nope", "1")
    with pytest.raises(ValueError, match="not in the offset"):
        StreamOffset.empty(ARN).finish("nope")
    with pytest.raises(ValueError, match="finished"):
        sample().advance("shardId-a", SEQ_40 + "0")


def test_a_trigger_moves_every_shard_it_read_in_one_offset():
    offset = sample()
    moved = offset.with_positions({
        "shardId-b": offset.shards["shardId-b"].advanced("shardId-b", SEQ_40, range_first="30"),
        "shardId-c": ShardPosition(finished=True),
    })  # fmt: skip

    assert moved == offset.advance("shardId-b", SEQ_40, range_first="30").finish("shardId-c")
    assert list(moved.shards) == ["shardId-a", "shardId-b", "shardId-c"], "still sorted"
    assert offset.with_positions({}) is offset
    with pytest.raises(ValueError, match="shards nope are not in the offset"):
        offset.with_positions({"nope": ShardPosition()})
    with pytest.raises(ValueError, match="cannot move back"):
        offset.shards["shardId-b"].advanced("shardId-b", "1")


def test_finished_shards_are_kept_by_id_alone_once_their_batch_is_done():
    offset = sample()  # a finished at SEQ_40, b at SEQ_21
    spent = offset.without_spent_positions()

    assert spent.shards["shardId-a"] == ShardPosition(finished=True)
    assert spent.shards["shardId-b"] == offset.shards["shardId-b"]
    assert spent.finished == offset.finished and spent.behind == offset.behind
    assert json.loads(spent.to_json())["shards"]["shardId-a"] == {"finished": True}
    assert spent.without_spent_positions() is spent
    assert StreamOffset.from_json(spent.to_json(), ARN) == spent


def test_lost_and_trimmed_shards():
    offset = sample()  # a finished, b and c not
    listed = [shard("shardId-c", parent="shardId-a")]
    assert offset.lost_shards(listed) == ["shardId-b"]
    assert offset.lost_shards([shard("shardId-a"), shard("shardId-b"), shard("shardId-c")]) == []
    # a finished shard that no listed shard names as its parent is gone for good: dropped
    pruned = offset.without_trimmed([shard("shardId-c", parent="shardId-z")])
    assert list(pruned.shards) == ["shardId-b", "shardId-c"]
    assert offset.without_trimmed([shard("shardId-a")]) == offset


def test_a_finished_parent_left_out_of_a_listing_stays_finished_while_its_child_is_listed():
    offset = sample()  # a finished, c its child
    kept = offset.without_trimmed([shard("shardId-b"), shard("shardId-c", parent="shardId-a")])
    assert kept.shards["shardId-a"].finished
    relisted = kept.with_shards([shard("shardId-a"), shard("shardId-b"), shard("shardId-c", parent="shardId-a")])
    assert relisted.shards["shardId-a"].finished  # not back at TRIM_HORIZON


def test_an_advance_records_the_first_record_of_its_read():
    offset = sample().advance("shardId-b", "9" * 22, range_first="9" * 21 + "8")
    assert offset.shards["shardId-b"].range_first == "9" * 21 + "8"
    assert StreamOffset.from_json(offset.to_json(), ARN) == offset
    assert offset.advance("shardId-b", "9" * 23).shards["shardId-b"].range_first is None


def test_another_stream_is_refused_with_what_happened_and_the_fix():
    with pytest.raises(CheckpointError) as raised:
        StreamOffset.from_json(sample().to_json(), OTHER_ARN)
    message = str(raised.value)
    assert ARN in message and OTHER_ARN in message
    assert "delete the checkpoint directory" in message
    assert "delete the checkpoint directory and the savepoint" in message
    assert raised.value.retryable is False and raised.value.exit_code == 2


def test_another_format_version_is_refused():
    document = sample().to_dict()
    document["version"] = OFFSET_FORMAT + 1
    with pytest.raises(CheckpointError, match=f"format version {OFFSET_FORMAT + 1}"):
        StreamOffset.from_dict(document, ARN)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        "{}",
        json.dumps({"version": 1, "stream_arn": ARN}),
        json.dumps({"version": 1, "stream_arn": ARN, "shards": []}),
        json.dumps({"version": 1, "stream_arn": ARN, "shards": {"s": {"finished": False}}}),
        json.dumps({"version": 1, "stream_arn": ARN, "shards": {"s": {"sequence_number": 12, "finished": False}}}),
        json.dumps({"version": 1, "stream_arn": ARN, "shards": {"s": {"sequence_number": "1e5", "finished": False}}}),
        json.dumps({"version": 1, "stream_arn": ARN, "shards": {"s": {"sequence_number": None, "finished": "no"}}}),
    ],
)
def test_damaged_offsets_are_checkpoint_errors(text):
    with pytest.raises(CheckpointError, match="damaged|format version"):
        StreamOffset.from_json(text, ARN)


def test_empty_offset_round_trips():
    empty = StreamOffset.empty(ARN)
    assert empty.to_json() == f'{{"shards":{{}},"stream_arn":"{ARN}","version":{OFFSET_FORMAT}}}'
    assert StreamOffset.from_json(empty.to_json(), ARN) == empty


def test_a_kinesis_offset_keeps_its_start_and_a_dynamodb_streams_offset_has_none():
    from migrator.stream.offsets import StreamOffset

    offset = StreamOffset.empty("arn:k", "2026-11-29T10:00:00.000001+00:00")
    document = offset.to_dict()
    assert document["start_at"] == "2026-11-29T10:00:00.000001+00:00"
    assert StreamOffset.from_dict(document, "arn:k") == offset
    assert "start_at" not in StreamOffset.empty("arn:d").to_dict()  # DynamoDB Streams offsets keep their form


def test_a_shard_at_the_tip_is_not_behind_and_the_flag_round_trips_only_when_set():
    offset = sample().with_tip("shardId-b", True)
    assert offset.shards["shardId-b"] == ShardPosition(SEQ_21, False, True)
    assert offset.behind == frozenset({"shardId-c"})  # a is finished, b at the tip
    assert StreamOffset.from_json(offset.to_json(), ARN) == offset
    assert '"at_tip":true' in offset.to_json() and sample().to_json().count("at_tip") == 0
    assert offset.with_tip("shardId-b", True) is offset
