"""Kinesis change records: AWS-shaped Kinesis Data Streams for DynamoDB records become the same ChangeRecord."""

from __future__ import annotations

import copy
import json
import pickle
from datetime import datetime, timezone
from pathlib import Path

import pytest

from migrator.items import from_dynamodb_json, key_of
from migrator.stream.collapse import collapse
from migrator.stream.kinesis_records import (
    NOT_A_CHANGE,
    OTHER_TABLE,
    SkippedRecord,
    creation_micros,
    from_kinesis_record,
    kinesis_record_from_json,
)
from migrator.stream.records import DELETE, PUT

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "kinesis_records"
KEY_NAMES = ("pk", "sk")
SEQUENCE = "49656870921418592394712834556148452107356218914541518850"


def payload(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def envelope(document: dict, sequence_number: str = SEQUENCE) -> dict:
    """A GetRecords record as boto3 returns it, carrying `document` as its Data."""
    return {
        "SequenceNumber": sequence_number,
        "ApproximateArrivalTimestamp": datetime(2024, 11, 29, 9, 12, 1, tzinfo=timezone.utc),
        "Data": json.dumps(document).encode("utf-8"),
        "PartitionKey": "0AB18464EFEE6043E48DD4475DABA453",
    }


def normalize(document: dict, sequence_number: str = SEQUENCE, shard_id: str = "shardId-000000000000", depth: int = 0,
              **kwargs):
    return from_kinesis_record(envelope(document, sequence_number), KEY_NAMES, shard_id, depth, **kwargs)


def test_insert_becomes_a_put_of_the_new_image():
    document = payload("insert.json")
    change = normalize(document)
    assert change.operation == PUT
    assert change.new_image == from_dynamodb_json(document["dynamodb"]["NewImage"])
    assert change.keys == {"pk": {"S": "order#1"}, "sk": {"N": "1"}}
    assert change.key == key_of(change.keys, KEY_NAMES)
    assert change.sequence_number == SEQUENCE
    assert change.shard_id == "shardId-000000000000"
    assert change.created_at == pytest.approx(1732871520.123456)
    assert change.order == (1732871520123456, 0, int(SEQUENCE))
    assert not change.needs_lookup and not change.user_identity_is_ttl and not change.replicated


def test_modify_becomes_a_put_of_the_new_image_not_the_old_one():
    change = normalize(payload("modify.json"))
    assert change.operation == PUT and change.new_image["status"] == {"S": "paid"}


def test_remove_becomes_a_delete_without_image():
    change = normalize(payload("remove.json"))
    assert (change.operation, change.new_image, change.needs_lookup) == (DELETE, None, False)
    assert not change.user_identity_is_ttl
    assert change.key == normalize(payload("insert.json")).key


def test_ttl_remove_is_marked_as_kinesis_spells_the_identity():
    change = normalize(payload("ttl_remove.json"))
    assert change.operation == DELETE and change.user_identity_is_ttl


@pytest.mark.parametrize(
    "identity",
    [None, {}, {"type": "Service", "principalId": "replication.dynamodb.amazonaws.com"},
     {"type": "User", "principalId": "dynamodb.amazonaws.com"}],
)
def test_other_identities_are_not_ttl(identity):
    document = payload("ttl_remove.json")
    document["userIdentity"] = identity
    assert not normalize(document).user_identity_is_ttl


def test_a_change_without_a_new_image_needs_a_lookup():
    change = normalize(payload("keys_only_modify.json"))
    assert (change.operation, change.new_image, change.needs_lookup) == (PUT, None, True)
    assert change.keys == {"pk": {"S": "order#2"}, "sk": {"N": "7"}}


def test_all_types_arrive_bit_exact_in_wire_form():
    document = payload("all_types_insert.json")
    image = normalize(document).new_image
    assert image == from_dynamodb_json(document["dynamodb"]["NewImage"])
    assert image["n38"] == {"N": "12345678901234567890123456789012345678"}
    assert image["n38_neg_frac"] == {"N": "-0.1234567890123456789012345678901234567"}
    assert image["n_max"] == {"N": "9.9999999999999999999999999999999999999E+125"}
    assert image["b"] == {"B": b"\x00\x01\x02\xfd\xfe\xff"}
    assert image["bs"] == {"BS": [b"\x00", b"\xff\xee", b""]}
    assert image["m"]["M"]["nested"]["M"]["list"]["L"][0] == {"B": b"\x80"}
    assert image["s"] == {"S": "h\u00e9llo \u2603 \U0001f680"}


def test_the_wire_form_record_decodes_to_the_same_change():
    wire = json.loads((FIXTURES / "get_records_insert.json").read_text(encoding="utf-8"))
    record = kinesis_record_from_json(wire)
    assert isinstance(record["Data"], bytes)
    assert record["ApproximateArrivalTimestamp"] == datetime.fromtimestamp(1732871520.456, tz=timezone.utc)
    change = from_kinesis_record(record, KEY_NAMES, "shardId-000000000000", 0)
    assert change == normalize(payload("insert.json"), wire["SequenceNumber"])
    assert wire["Data"].startswith("eyJ")  # input untouched


def test_records_are_not_altered():
    record = envelope(payload("all_types_insert.json"))
    before = copy.deepcopy(record)
    from_kinesis_record(record, KEY_NAMES, "s", 0)
    assert record == before


# ---- the creation time ----


@pytest.mark.parametrize(
    ("fields", "micros"),
    [
        ({"ApproximateCreationDateTime": 1732871520123456, "ApproximateCreationDateTimePrecision": "MICROSECOND"},
         1732871520123456),
        ({"ApproximateCreationDateTime": 1732871520123, "ApproximateCreationDateTimePrecision": "MILLISECOND"},
         1732871520123000),
        ({"ApproximateCreationDateTime": 1732871520123}, 1732871520123000),  # no precision field: milliseconds
        ({"ApproximateCreationDateTime": 1732871520123456}, 1732871520123456),  # ... unless it is microseconds
        ({"ApproximateCreationDateTime": 1732871520123.0}, 1732871520123000),
    ],
)
def test_creation_time_is_exact_microseconds_whatever_the_precision(fields, micros):
    assert creation_micros(fields) == micros


def test_a_millisecond_record_orders_among_microsecond_ones():
    before = normalize(payload("insert.json"))  # ...520.123456
    millis = normalize(payload("millisecond_modify.json"))  # ...580.000
    after = normalize(payload("modify.json"))  # ...580.000001
    assert before.order < millis.order < after.order
    assert millis.created_at == 1732871580.0


@pytest.mark.parametrize("value", [None, "1732871520123", True, -1, 1.5])
def test_a_creation_time_that_is_no_epoch_number_is_refused(value):
    document = payload("insert.json")
    document["dynamodb"]["ApproximateCreationDateTime"] = value
    with pytest.raises(ValueError, match=f"Kinesis record {SEQUENCE} of shard s: ApproximateCreationDateTime"):
        normalize(document, shard_id="s")


def test_a_missing_creation_time_is_refused():
    document = payload("insert.json")
    del document["dynamodb"]["ApproximateCreationDateTime"]
    with pytest.raises(ValueError, match="ApproximateCreationDateTime"):
        normalize(document)


def test_an_unknown_precision_is_refused():
    document = payload("insert.json")
    document["dynamodb"]["ApproximateCreationDateTimePrecision"] = "NANOSECOND"
    with pytest.raises(ValueError, match="NANOSECOND"):
        normalize(document)


# ---- order: by creation time, then lineage depth, then sequence number ----


def with_time(name: str, micros: int) -> dict:
    document = payload(name)
    document["dynamodb"]["ApproximateCreationDateTime"] = micros
    return document


def test_a_later_change_wins_even_when_kinesis_delivers_it_first():
    # Out of order across shards: the newer MODIFY arrives with a smaller sequence number.
    newer = normalize(with_time("modify.json", 2_000_000), sequence_number="100", shard_id="shardId-000000000001")
    older = normalize(with_time("remove.json", 1_000_000), sequence_number="900", shard_id="shardId-000000000002")
    assert older.order < newer.order
    assert collapse([newer, older]) == [newer]
    assert collapse([older, newer]) == [newer]


def test_a_duplicate_delivery_collapses_to_one_identical_change():
    first = normalize(payload("modify.json"), sequence_number="100")
    again = normalize(payload("modify.json"), sequence_number="250")  # the same change, put twice
    [kept] = collapse([again, first])
    assert (kept.operation, kept.new_image) == (first.operation, first.new_image)


def test_a_stale_duplicate_after_a_newer_change_is_ignored():
    insert = normalize(payload("insert.json"), sequence_number="100")
    remove = normalize(payload("remove.json"), sequence_number="200")
    replayed_insert = normalize(payload("insert.json"), sequence_number="300")
    assert collapse([insert, remove, replayed_insert]) == [remove]


def test_equal_times_fall_back_to_lineage_then_sequence_number():
    parent = normalize(with_time("insert.json", 5_000), sequence_number="900", depth=0)
    child = normalize(with_time("remove.json", 5_000), sequence_number="100", depth=1)
    later_in_child = normalize(with_time("modify.json", 5_000), sequence_number="200", depth=1)
    assert parent.order < child.order < later_in_child.order


# ---- replicated writes and other tables ----


def test_a_write_by_the_replication_service_is_marked_replicated():
    document = payload("modify.json")
    document["userIdentity"] = {"type": "Service", "principalId": "replication.dynamodb.amazonaws.com"}
    change = normalize(document)
    assert change.replicated and not change.user_identity_is_ttl


@pytest.mark.parametrize(("origin", "replicated"), [("us-east-1", True), ("eu-west-1", False)])
def test_a_legacy_global_tables_item_is_compared_with_the_records_region(origin, replicated):
    document = payload("modify.json")  # awsRegion eu-west-1
    document["dynamodb"]["NewImage"]["aws:rep:updateregion"] = {"S": origin}
    assert normalize(document).replicated is replicated
    assert normalize(document, region="us-east-1").replicated is (origin != "us-east-1")


def test_a_change_of_another_table_is_skipped():
    document = payload("insert.json")
    document["tableName"] = "Invoices"
    with pytest.raises(SkippedRecord, match="a change of table 'Invoices', not 'Orders'") as caught:
        normalize(document, table="Orders")
    assert caught.value.kind == OTHER_TABLE
    assert normalize(document).operation == PUT  # no table given: taken


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe not utf-8", b"not json", b"[1, 2]", json.dumps({"orderId": 7}).encode(),
     json.dumps({"eventSource": "aws:dynamodb"}).encode(),
     json.dumps({"eventSource": "aws:s3", "dynamodb": {}}).encode()],
)
def test_a_payload_that_is_no_dynamodb_change_is_skipped_not_fatal(data):
    record = envelope(payload("insert.json"))
    record["Data"] = data
    with pytest.raises(SkippedRecord) as caught:
        from_kinesis_record(record, KEY_NAMES, "s", 0)
    assert caught.value.kind == NOT_A_CHANGE


def test_the_foreign_payload_fixture_is_skipped():
    record = kinesis_record_from_json(json.loads((FIXTURES / "get_records_foreign_payload.json").read_text()))
    with pytest.raises(SkippedRecord, match="eventSource is None"):
        from_kinesis_record(record, KEY_NAMES, "s", 0, table="Orders")


def test_skipped_records_pickle_back_from_executors():
    error = SkippedRecord("Kinesis record 1 of shard s: the data is not JSON text", NOT_A_CHANGE)
    again = pickle.loads(pickle.dumps(error))
    assert (type(again), str(again), again.kind) == (SkippedRecord, str(error), NOT_A_CHANGE)


# ---- a DynamoDB change that cannot be read is an error, never a skip ----


def test_an_unknown_event_name_is_refused_with_the_record_named():
    document = payload("insert.json")
    document["eventName"] = "UPSERT"
    with pytest.raises(ValueError, match=f"{SEQUENCE} of shard s: unknown eventName 'UPSERT'") as caught:
        normalize(document, shard_id="s")
    assert not isinstance(caught.value, SkippedRecord)


def test_keys_missing_a_key_attribute_are_refused():
    with pytest.raises(ValueError, match="lacks the key attribute") as caught:
        from_kinesis_record(envelope(payload("insert.json")), ("pk", "other"), "s", 0)
    assert not isinstance(caught.value, SkippedRecord)
