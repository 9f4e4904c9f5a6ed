"""Change records: AWS-shaped DynamoDB Streams records become one normalized, wire-form change."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from migrator.items import from_dynamodb_json, key_of
from migrator.stream.records import (
    DELETE,
    PUT,
    ChangeRecord,
    from_dynamodb_stream_record,
    stream_record_from_json,
)

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "stream_records"
KEY_NAMES = ("pk", "sk")


def load(name: str) -> dict:
    """A fixture as boto3 returns it: binary decoded from base64."""
    return stream_record_from_json(json.loads((FIXTURES / name).read_text(encoding="utf-8")))


def raw(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def normalize(name: str, shard_id: str = "shardId-1", depth: int = 0, key_names=KEY_NAMES) -> ChangeRecord:
    record = load(name)
    return from_dynamodb_stream_record(record, key_names, shard_id, depth, record["dynamodb"]["StreamViewType"])


def test_insert_becomes_a_put_of_the_new_image():
    change = normalize("insert.json")
    document = raw("insert.json")["dynamodb"]
    assert change.operation == PUT
    assert change.new_image == from_dynamodb_json(document["NewImage"])
    assert change.keys == {"pk": {"S": "order#1"}, "sk": {"N": "1"}}
    assert change.key == key_of(change.keys, KEY_NAMES)
    assert change.sequence_number == "111100000000017454423009"
    assert change.created_at == 1732871520.0
    assert change.order == (0, 111100000000017454423009)
    assert change.shard_id == "shardId-1"
    assert not change.needs_lookup and not change.user_identity_is_ttl


def test_modify_becomes_a_put_of_the_new_image_not_the_old_one():
    change = normalize("modify.json")
    assert change.operation == PUT
    assert change.new_image["status"] == {"S": "paid"}
    assert not change.needs_lookup


def test_remove_becomes_a_delete_without_image():
    change = normalize("remove.json")
    assert change.operation == DELETE
    assert change.new_image is None
    assert not change.needs_lookup
    assert not change.user_identity_is_ttl
    assert change.key == normalize("insert.json").key


def test_ttl_remove_is_marked():
    change = normalize("ttl_remove.json")
    assert change.operation == DELETE
    assert change.user_identity_is_ttl


def test_ttl_identity_spelled_as_in_lambda_events_is_marked_too():
    record = load("ttl_remove.json")
    record["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_AND_OLD_IMAGES").user_identity_is_ttl


@pytest.mark.parametrize(
    "identity",
    [None, {}, {"Type": "Service", "PrincipalId": "replication.dynamodb.amazonaws.com"},
     {"Type": "User", "PrincipalId": "dynamodb.amazonaws.com"}],
)
def test_other_identities_are_not_ttl(identity):
    record = load("ttl_remove.json")
    record["userIdentity"] = identity
    assert not from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_AND_OLD_IMAGES").user_identity_is_ttl


def test_keys_only_modify_needs_a_lookup():
    change = normalize("keys_only_modify.json")
    assert change.operation == PUT
    assert change.new_image is None
    assert change.needs_lookup
    assert change.keys == {"pk": {"S": "order#2"}, "sk": {"N": "7"}}


def test_old_image_insert_needs_a_lookup():
    change = normalize("old_image_insert.json")
    assert (change.operation, change.new_image, change.needs_lookup) == (PUT, None, True)


@pytest.mark.parametrize("view_type", ["KEYS_ONLY", "OLD_IMAGE"])
def test_new_image_is_ignored_for_view_types_that_do_not_promise_one(view_type):
    change = from_dynamodb_stream_record(load("modify.json"), KEY_NAMES, "s", 0, view_type)
    assert change.needs_lookup and change.new_image is None


@pytest.mark.parametrize("view_type", ["KEYS_ONLY", "OLD_IMAGE", "NEW_IMAGE", "NEW_AND_OLD_IMAGES"])
def test_remove_is_a_delete_under_every_view_type(view_type):
    change = from_dynamodb_stream_record(load("remove.json"), KEY_NAMES, "s", 0, view_type)
    assert (change.operation, change.new_image, change.needs_lookup) == (DELETE, None, False)


def test_missing_new_image_under_an_image_view_type_falls_back_to_a_lookup():
    record = load("modify.json")
    del record["dynamodb"]["NewImage"]
    change = from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_AND_OLD_IMAGES")
    assert change.needs_lookup and change.new_image is None


def test_all_types_arrive_bit_exact_in_wire_form():
    change = normalize("all_types_insert.json")
    image = change.new_image
    assert image == from_dynamodb_json(raw("all_types_insert.json")["dynamodb"]["NewImage"])
    assert image["n38"] == {"N": "12345678901234567890123456789012345678"}
    assert image["n38_neg_frac"] == {"N": "-0.1234567890123456789012345678901234567"}
    assert image["n_max"] == {"N": "9.9999999999999999999999999999999999999E+125"}
    assert image["b"] == {"B": b"\x00\x01\x02\xfd\xfe\xff"}
    assert image["bs"] == {"BS": [b"\x00", b"\xff\xee", b""]}
    assert image["m"]["M"]["nested"]["M"]["list"]["L"][0] == {"B": b"\x80"}
    assert image["l"]["L"][4] == {"M": {"deep": {"BS": [b"\x10"]}}}
    assert image["s"] == {"S": "h\u00e9llo \u2603 \U0001f680"}
    assert change.keys["sk"] == {"N": "12345678901234567890123456789012345678"}
    assert change.order == (0, 4421584500000000017450439091)


def test_binary_key_is_decoded_and_hashable():
    change = normalize("binary_key_modify.json", key_names=("id",))
    assert change.keys == {"id": {"B": b"\xde\xad\xbe\xef"}}
    assert change.key == ((("B", b"\xde\xad\xbe\xef"),),)
    assert hash(change.key) == hash(key_of({"id": {"B": bytearray(b"\xde\xad\xbe\xef")}}, ("id",)))


def test_records_are_not_altered():
    record = load("all_types_insert.json")
    before = copy.deepcopy(record)
    normalize_record = from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_IMAGE")
    assert record == before
    assert normalize_record.new_image is not record["dynamodb"]["NewImage"]


def test_depth_leads_the_order():
    parent = from_dynamodb_stream_record(load("modify.json"), KEY_NAMES, "parent", 0, "NEW_IMAGE")
    child = from_dynamodb_stream_record(load("insert.json"), KEY_NAMES, "child", 1, "NEW_IMAGE")
    assert int(child.sequence_number) < int(parent.sequence_number)
    assert parent.order < child.order


@pytest.mark.parametrize(
    "created",
    [datetime(2024, 11, 29, 9, 12, tzinfo=timezone.utc), 1732871520, 1732871520.0, "1732871520",
     "2024-11-29T09:12:00+00:00"],
)
def test_creation_time_from_boto3_datetime_or_wire_epoch_seconds(created):
    record = load("insert.json")
    record["dynamodb"]["ApproximateCreationDateTime"] = created
    assert from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_IMAGE").created_at == 1732871520.0


def test_unknown_event_name_is_refused_with_the_record_named():
    record = load("insert.json")
    record["eventName"] = "UPSERT"
    with pytest.raises(ValueError, match=r"111100000000017454423009 of shard s: unknown eventName 'UPSERT'"):
        from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_IMAGE")


def test_unknown_view_type_is_refused():
    with pytest.raises(ValueError, match="StreamViewType"):
        from_dynamodb_stream_record(load("insert.json"), KEY_NAMES, "s", 0, "NEW")


def test_keys_missing_a_key_attribute_are_refused():
    with pytest.raises(ValueError, match="lacks the key attribute"):
        from_dynamodb_stream_record(load("insert.json"), ("pk", "other"), "s", 0, "NEW_IMAGE")


def test_missing_creation_time_is_refused():
    record = load("insert.json")
    del record["dynamodb"]["ApproximateCreationDateTime"]
    with pytest.raises(ValueError, match="ApproximateCreationDateTime"):
        from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_IMAGE")


def test_change_record_refuses_inconsistent_states():
    common = dict(key=(), keys={}, shard_id="s", sequence_number="1", created_at=0.0, order=(0, 1))
    with pytest.raises(ValueError):
        ChangeRecord(operation="UPSERT", new_image=None, needs_lookup=True, **common)
    with pytest.raises(ValueError):
        ChangeRecord(operation=DELETE, new_image={"pk": {"S": "x"}}, **common)
    with pytest.raises(ValueError):
        ChangeRecord(operation=PUT, new_image=None, needs_lookup=False, **common)
    with pytest.raises(ValueError):
        ChangeRecord(operation=PUT, new_image={"pk": {"S": "x"}}, needs_lookup=True, **common)


def test_change_records_are_frozen_and_hashable():
    change = normalize("insert.json")
    with pytest.raises(AttributeError):
        change.operation = DELETE  # type: ignore[misc]
    assert change == normalize("insert.json")
    assert len({change, normalize("insert.json")}) == 1


def test_stream_record_from_json_decodes_only_attribute_maps():
    document = raw("binary_key_modify.json")
    record = stream_record_from_json(document)
    assert record["dynamodb"]["Keys"] == {"id": {"B": b"\xde\xad\xbe\xef"}}
    assert record["dynamodb"]["SequenceNumber"] == document["dynamodb"]["SequenceNumber"]
    assert document["dynamodb"]["Keys"] == {"id": {"B": "3q2+7w=="}}  # input untouched


# ---- global tables: writes replicated from another region ----

REPLICATION = {"Type": "Service", "PrincipalId": "replication.dynamodb.amazonaws.com"}


@pytest.mark.parametrize("name", ["insert.json", "modify.json", "remove.json"])
def test_a_write_by_the_replication_service_is_marked_replicated(name):
    record = load(name)
    record["userIdentity"] = REPLICATION
    change = from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_AND_OLD_IMAGES", region="us-east-1")
    assert change.replicated
    assert not change.user_identity_is_ttl


def test_the_replication_identity_spelled_as_in_lambda_events_is_marked_too():
    record = load("modify.json")
    record["userIdentity"] = {"type": "Service", "principalId": "replication.dynamodb.amazonaws.com"}
    assert from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_AND_OLD_IMAGES").replicated


@pytest.mark.parametrize(("origin", "replicated"), [("eu-west-1", True), ("us-east-1", False)])
def test_a_legacy_global_tables_item_says_which_region_wrote_it(origin, replicated):
    record = load("modify.json")
    record["dynamodb"]["NewImage"]["aws:rep:updateregion"] = {"S": origin}
    change = from_dynamodb_stream_record(record, KEY_NAMES, "s", 0, "NEW_AND_OLD_IMAGES", region="us-east-1")
    assert change.replicated is replicated


@pytest.mark.parametrize("name", ["insert.json", "modify.json", "remove.json", "ttl_remove.json"])
def test_local_writes_and_ttl_deletions_are_not_replicated(name):
    assert not normalize(name).replicated
