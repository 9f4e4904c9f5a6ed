"""The emulator's Kinesis extensions, over HTTP with boto3, against the formats AWS documents.

testsupport/moto_kinesis_destination.py: DynamoDB's Kinesis streaming destination (enable,
describe, disable, one record per item change). testsupport/moto_kinesis_resharding.py: puts
routed to open shards after a split or merge, parents keeping their records, and the end of
a closed shard. These test the moto extensions themselves, so they always start the project's
emulator, never an endpoint from AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import json
import re
import time
import uuid

import boto3
import pytest
from botocore.exceptions import ClientError

from migrator.stream.kinesis_records import from_kinesis_record
from migrator.stream.records import DELETE, PUT
from testsupport.emulator import EmulatorProcess

REGION = "us-east-1"
KEYS = {"region_name": REGION, "aws_access_key_id": "test", "aws_secret_access_key": "test"}
RECORD_FIELDS = ["awsRegion", "eventID", "eventName", "userIdentity", "recordFormat", "tableName", "dynamodb",
                 "eventSource"]
MAX_HASH_KEY = 2**128 - 1


@pytest.fixture(scope="module")
def emulator():
    with EmulatorProcess() as emu:
        yield emu


@pytest.fixture(scope="module")
def dynamodb(emulator):
    return boto3.client("dynamodb", endpoint_url=emulator.endpoint_url, **KEYS)


@pytest.fixture(scope="module")
def kinesis(emulator):
    return boto3.client("kinesis", endpoint_url=emulator.endpoint_url, **KEYS)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_table(dynamodb, range_key: bool = True) -> str:
    name = unique("orders")
    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    attributes = [{"AttributeName": "pk", "AttributeType": "S"}]
    if range_key:
        schema.append({"AttributeName": "sk", "KeyType": "RANGE"})
        attributes.append({"AttributeName": "sk", "AttributeType": "N"})
    dynamodb.create_table(TableName=name, KeySchema=schema, AttributeDefinitions=attributes,
                          BillingMode="PAY_PER_REQUEST")  # fmt: skip
    return name


def create_stream(kinesis, shards: int = 1) -> str:
    name = unique("changes")
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    return kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]


def enable(dynamodb, table: str, stream_arn: str, precision: str = "MICROSECOND") -> dict:
    return dynamodb.enable_kinesis_streaming_destination(
        TableName=table, StreamArn=stream_arn,
        EnableKinesisStreamingConfiguration={"ApproximateCreationDateTimePrecision": precision},
    )  # fmt: skip


def shard_records(kinesis, stream_arn: str, shard_id: str) -> list[dict]:
    iterator = kinesis.get_shard_iterator(StreamARN=stream_arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON")
    return kinesis.get_records(StreamARN=stream_arn, ShardIterator=iterator["ShardIterator"])["Records"]


def records(kinesis, stream_arn: str) -> list[dict]:
    """Every record of every shard, shard by shard in sequence order."""
    found = []
    for shard in kinesis.list_shards(StreamARN=stream_arn)["Shards"]:
        found += shard_records(kinesis, stream_arn, shard["ShardId"])
    return found


def changes(kinesis, stream_arn: str) -> list[dict]:
    return [json.loads(record["Data"]) for record in records(kinesis, stream_arn)]


@pytest.fixture
def table(dynamodb):
    return create_table(dynamodb)


@pytest.fixture
def streamed(dynamodb, kinesis, table):
    """A table whose changes go to a fresh one-shard stream, at microsecond precision."""
    stream_arn = create_stream(kinesis)
    enable(dynamodb, table, stream_arn)
    return table, stream_arn


def item(pk: str, sk: int = 1, **attributes) -> dict:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}, **attributes}


# ---- the API actions ----


def test_a_table_starts_without_destinations(dynamodb, table):
    described = dynamodb.describe_kinesis_streaming_destination(TableName=table)
    assert described["TableName"] == table
    assert described["KinesisDataStreamDestinations"] == []


def test_enable_answers_enabling_then_describe_shows_active(dynamodb, kinesis, table):
    stream_arn = create_stream(kinesis)
    answer = enable(dynamodb, table, stream_arn)
    assert answer["TableName"] == table and answer["StreamArn"] == stream_arn
    assert answer["DestinationStatus"] == "ENABLING"
    assert answer["EnableKinesisStreamingConfiguration"] == {"ApproximateCreationDateTimePrecision": "MICROSECOND"}
    [destination] = dynamodb.describe_kinesis_streaming_destination(TableName=table)["KinesisDataStreamDestinations"]
    assert destination["StreamArn"] == stream_arn
    assert destination["DestinationStatus"] == "ACTIVE"
    assert destination["ApproximateCreationDateTimePrecision"] == "MICROSECOND"


def test_a_second_enable_is_refused_while_one_destination_is_active(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    for arn in (stream_arn, create_stream(kinesis)):
        with pytest.raises(ClientError) as caught:
            enable(dynamodb, table, arn)
        assert caught.value.response["Error"]["Code"] == "ValidationException"
        assert "must be DISABLED or ENABLE_FAILED" in caught.value.response["Error"]["Message"]


def test_a_stream_that_does_not_exist_is_refused(dynamodb, table):
    missing = f"arn:aws:kinesis:{REGION}:123456789012:stream/{unique('missing')}"
    with pytest.raises(ClientError) as caught:
        enable(dynamodb, table, missing)
    assert caught.value.response["Error"]["Code"] == "ValidationException"
    assert dynamodb.describe_kinesis_streaming_destination(TableName=table)["KinesisDataStreamDestinations"] == []


def test_a_table_that_does_not_exist_is_refused(dynamodb, kinesis):
    with pytest.raises(ClientError) as caught:
        enable(dynamodb, unique("missing"), create_stream(kinesis))
    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_disable_stops_the_records_and_enable_starts_them_again(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    dynamodb.put_item(TableName=table, Item=item("a"))
    answer = dynamodb.disable_kinesis_streaming_destination(TableName=table, StreamArn=stream_arn)
    assert answer["DestinationStatus"] == "DISABLING"
    [destination] = dynamodb.describe_kinesis_streaming_destination(TableName=table)["KinesisDataStreamDestinations"]
    assert destination["DestinationStatus"] == "DISABLED"
    dynamodb.put_item(TableName=table, Item=item("b"))
    enable(dynamodb, table, stream_arn)
    dynamodb.put_item(TableName=table, Item=item("c"))
    assert [c["dynamodb"]["Keys"]["pk"]["S"] for c in changes(kinesis, stream_arn)] == ["a", "c"]


def test_disable_of_an_inactive_destination_is_refused(dynamodb, kinesis, table):
    with pytest.raises(ClientError) as caught:
        dynamodb.disable_kinesis_streaming_destination(TableName=table, StreamArn=create_stream(kinesis))
    assert "must be ACTIVE" in caught.value.response["Error"]["Message"]


# ---- the records ----


def test_each_change_is_one_record_in_the_documented_format(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    before_us = time.time_ns() // 1000
    dynamodb.put_item(TableName=table, Item=item("a", status={"S": "new"}))
    dynamodb.put_item(TableName=table, Item=item("a", status={"S": "paid"}))
    dynamodb.delete_item(TableName=table, Key=item("a"))
    after_us = time.time_ns() // 1000

    found = records(kinesis, stream_arn)
    documents = [json.loads(record["Data"]) for record in found]
    assert [d["eventName"] for d in documents] == ["INSERT", "MODIFY", "REMOVE"]
    for document in documents:
        assert list(document) == RECORD_FIELDS
        assert document["awsRegion"] == REGION and document["tableName"] == table
        assert document["eventSource"] == "aws:dynamodb" and document["recordFormat"] == "application/json"
        assert document["userIdentity"] is None
        assert re.fullmatch(r"[0-9a-f-]{36}", document["eventID"])
        change = document["dynamodb"]
        assert change["Keys"] == item("a")
        assert change["ApproximateCreationDateTimePrecision"] == "MICROSECOND"
        assert before_us <= change["ApproximateCreationDateTime"] <= after_us
        assert isinstance(change["SizeBytes"], int) and change["SizeBytes"] > 0
    insert, modify, remove = (d["dynamodb"] for d in documents)
    assert insert["NewImage"] == item("a", status={"S": "new"}) and "OldImage" not in insert
    assert modify["NewImage"]["status"] == {"S": "paid"} and modify["OldImage"]["status"] == {"S": "new"}
    assert remove["OldImage"]["status"] == {"S": "paid"} and "NewImage" not in remove
    times = [d["dynamodb"]["ApproximateCreationDateTime"] for d in documents]
    assert times == sorted(times)
    # One item, one partition key: 32 upper-case hex digits, like the records AWS puts.
    assert len({record["PartitionKey"] for record in found}) == 1
    assert re.fullmatch(r"[0-9A-F]{32}", found[0]["PartitionKey"])


def test_millisecond_precision_is_honoured(dynamodb, kinesis, table):
    stream_arn = create_stream(kinesis)
    enable(dynamodb, table, stream_arn, precision="MILLISECOND")
    before_ms = time.time_ns() // 1_000_000
    dynamodb.put_item(TableName=table, Item=item("a"))
    after_ms = time.time_ns() // 1_000_000
    [change] = changes(kinesis, stream_arn)
    assert change["dynamodb"]["ApproximateCreationDateTimePrecision"] == "MILLISECOND"
    assert before_ms <= change["dynamodb"]["ApproximateCreationDateTime"] <= after_ms


def test_update_item_gives_insert_then_modify_and_one_record_each(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    update = {"UpdateExpression": "SET n = :n", "ExpressionAttributeValues": {":n": {"N": "1"}}}
    dynamodb.update_item(TableName=table, Key=item("a"), **update)  # creates the item
    update["ExpressionAttributeValues"] = {":n": {"N": "2"}}
    dynamodb.update_item(TableName=table, Key=item("a"), **update)
    insert, modify = changes(kinesis, stream_arn)
    assert insert["eventName"] == "INSERT" and insert["dynamodb"]["NewImage"] == item("a", n={"N": "1"})
    assert "OldImage" not in insert["dynamodb"]
    assert modify["eventName"] == "MODIFY"
    assert modify["dynamodb"]["OldImage"]["n"] == {"N": "1"} and modify["dynamodb"]["NewImage"]["n"] == {"N": "2"}


def test_writes_that_change_nothing_put_no_record(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    dynamodb.put_item(TableName=table, Item=item("a", n={"N": "1"}))
    dynamodb.put_item(TableName=table, Item=item("a", n={"N": "1"}))  # the same item again
    dynamodb.delete_item(TableName=table, Key=item("missing"))
    assert [c["eventName"] for c in changes(kinesis, stream_arn)] == ["INSERT"]


def test_batch_and_transaction_writes_put_one_record_per_item(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    dynamodb.put_item(TableName=table, Item=item("old"))
    dynamodb.batch_write_item(RequestItems={table: [
        {"PutRequest": {"Item": item("b1")}},
        {"PutRequest": {"Item": item("b2")}},
        {"DeleteRequest": {"Key": item("old")}},
    ]})  # fmt: skip
    dynamodb.transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "Item": item("t1")}},
        {"Delete": {"TableName": table, "Key": item("b1")}},
    ])  # fmt: skip
    seen = [(c["eventName"], c["dynamodb"]["Keys"]["pk"]["S"]) for c in changes(kinesis, stream_arn)]
    assert seen == [("INSERT", "old"), ("INSERT", "b1"), ("INSERT", "b2"), ("REMOVE", "old"),
                    ("INSERT", "t1"), ("REMOVE", "b1")]  # fmt: skip


def test_every_type_and_a_binary_key_arrive_as_written(dynamodb, kinesis):
    table = unique("binary")
    dynamodb.create_table(
        TableName=table, KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "B"}], BillingMode="PAY_PER_REQUEST",
    )  # fmt: skip
    stream_arn = create_stream(kinesis)
    enable(dynamodb, table, stream_arn)
    written = {
        "id": {"B": b"\xde\xad\xbe\xef"},
        "n38": {"N": "12345678901234567890123456789012345678"},
        "bs": {"BS": [b"\x00", b"\xff"]},
        "m": {"M": {"l": {"L": [{"S": "h\u00e9llo"}, {"NULL": True}, {"BOOL": False}]}, "ns": {"NS": ["1", "-1E-130"]}}},
    }
    dynamodb.put_item(TableName=table, Item=written)
    [record] = records(kinesis, stream_arn)
    change = from_kinesis_record(record, ("id",), "shardId-000000000000", 0, table=table, region=REGION)
    assert change.operation == PUT and change.new_image == written
    document = json.loads(record["Data"])
    assert document["dynamodb"]["Keys"] == {"id": {"B": "3q2+7w=="}}  # DynamoDB JSON: binary as base64


def test_the_migrator_reads_the_records_as_the_changes_made(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    dynamodb.put_item(TableName=table, Item=item("a", v={"N": "1"}))
    dynamodb.delete_item(TableName=table, Key=item("a"))
    put, delete = [from_kinesis_record(r, ("pk", "sk"), "shardId-000000000000", 0, table=table)
                   for r in records(kinesis, stream_arn)]  # fmt: skip
    assert (put.operation, put.new_image, put.needs_lookup) == (PUT, item("a", v={"N": "1"}), False)
    assert delete.operation == DELETE and put.order < delete.order


def test_two_tables_can_stream_into_one_stream(dynamodb, kinesis):
    stream_arn = create_stream(kinesis)
    first, second = create_table(dynamodb), create_table(dynamodb)
    for name in (first, second):
        enable(dynamodb, name, stream_arn)
        dynamodb.put_item(TableName=name, Item=item("a"))
    assert [c["tableName"] for c in changes(kinesis, stream_arn)] == [first, second]


def test_changes_spread_over_shards_by_item_and_stay_in_order_per_item(dynamodb, kinesis, table):
    stream_arn = create_stream(kinesis, shards=4)
    enable(dynamodb, table, stream_arn)
    for version in range(3):
        for index in range(20):
            dynamodb.put_item(TableName=table, Item=item(f"k{index}", v={"N": str(version)}))
    shards = kinesis.list_shards(StreamARN=stream_arn)["Shards"]
    per_shard = {s["ShardId"]: [json.loads(r["Data"]) for r in shard_records(kinesis, stream_arn, s["ShardId"])]
                 for s in shards}  # fmt: skip
    assert sum(1 for found in per_shard.values() if found) > 1
    for found in per_shard.values():
        for index in range(20):
            versions = [d["dynamodb"]["NewImage"]["v"]["N"] for d in found if d["dynamodb"]["Keys"]["pk"]["S"] == f"k{index}"]
            assert versions in ([], ["0", "1", "2"])


# ---- resharding (testsupport/moto_kinesis_resharding.py) ----


def put(kinesis, stream_arn: str, key: str, explicit_hash_key: str | None = None) -> str:
    extra = {"ExplicitHashKey": explicit_hash_key} if explicit_hash_key else {}
    return kinesis.put_record(StreamARN=stream_arn, Data=key.encode(), PartitionKey=key, **extra)["ShardId"]


def test_after_a_split_puts_go_to_the_children_and_the_parent_keeps_its_records(kinesis):
    stream_arn = create_stream(kinesis)
    assert put(kinesis, stream_arn, "before") == "shardId-000000000000"
    kinesis.split_shard(StreamARN=stream_arn, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(2**127))
    landed = {put(kinesis, stream_arn, f"after-{i}") for i in range(30)}
    assert landed == {"shardId-000000000001", "shardId-000000000002"}
    shards = {s["ShardId"]: s for s in kinesis.list_shards(StreamARN=stream_arn)["Shards"]}
    assert "EndingSequenceNumber" in shards["shardId-000000000000"]["SequenceNumberRange"]
    assert shards["shardId-000000000001"]["ParentShardId"] == "shardId-000000000000"
    assert [r["Data"] for r in shard_records(kinesis, stream_arn, "shardId-000000000000")] == [b"before"]
    children = shard_records(kinesis, stream_arn, "shardId-000000000001") + shard_records(
        kinesis, stream_arn, "shardId-000000000002")
    assert sorted(r["Data"] for r in children) == sorted(f"after-{i}".encode() for i in range(30))


def test_a_closed_shard_read_to_its_end_has_no_next_iterator_and_names_its_children(kinesis):
    stream_arn = create_stream(kinesis)
    put(kinesis, stream_arn, "before")
    iterator = kinesis.get_shard_iterator(StreamARN=stream_arn, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]  # fmt: skip
    kinesis.split_shard(StreamARN=stream_arn, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(2**127))
    answer = kinesis.get_records(StreamARN=stream_arn, ShardIterator=iterator)
    assert [r["Data"] for r in answer["Records"]] == [b"before"]
    assert answer.get("NextShardIterator") is None
    assert sorted(child["ShardId"] for child in answer["ChildShards"]) == ["shardId-000000000001", "shardId-000000000002"]
    assert {tuple(child["ParentShards"]) for child in answer["ChildShards"]} == {("shardId-000000000000",)}


def test_an_open_shard_keeps_handing_out_iterators(kinesis):
    stream_arn = create_stream(kinesis)
    iterator = kinesis.get_shard_iterator(StreamARN=stream_arn, ShardId="shardId-000000000000",
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]  # fmt: skip
    answer = kinesis.get_records(StreamARN=stream_arn, ShardIterator=iterator)
    assert answer["NextShardIterator"] and "ChildShards" not in answer


def test_after_a_merge_puts_go_to_the_one_child(kinesis):
    stream_arn = create_stream(kinesis, shards=2)
    first = {put(kinesis, stream_arn, f"before-{i}") for i in range(20)}
    assert first == {"shardId-000000000000", "shardId-000000000001"}
    kinesis.merge_shards(StreamARN=stream_arn, ShardToMerge="shardId-000000000000",
                         AdjacentShardToMerge="shardId-000000000001")  # fmt: skip
    assert {put(kinesis, stream_arn, f"after-{i}") for i in range(20)} == {"shardId-000000000002"}
    merged = {s["ShardId"]: s for s in kinesis.list_shards(StreamARN=stream_arn)["Shards"]}["shardId-000000000002"]
    assert (merged["ParentShardId"], merged["AdjacentParentShardId"]) == ("shardId-000000000000", "shardId-000000000001")
    assert len(shard_records(kinesis, stream_arn, "shardId-000000000002")) == 20  # nothing copied from the parents
    parents = shard_records(kinesis, stream_arn, "shardId-000000000000") + shard_records(
        kinesis, stream_arn, "shardId-000000000001")
    assert len(parents) == 20


def test_shards_that_are_not_adjacent_are_not_merged(kinesis):
    stream_arn = create_stream(kinesis, shards=3)
    with pytest.raises(ClientError) as caught:
        kinesis.merge_shards(StreamARN=stream_arn, ShardToMerge="shardId-000000000000",
                             AdjacentShardToMerge="shardId-000000000002")  # fmt: skip
    assert caught.value.response["Error"]["Code"] == "InvalidArgumentException"


def test_the_highest_hash_key_finds_its_shard(kinesis):
    stream_arn = create_stream(kinesis, shards=2)
    assert put(kinesis, stream_arn, "edge", explicit_hash_key=str(MAX_HASH_KEY)) == "shardId-000000000001"


def test_table_changes_follow_a_split_into_the_children(dynamodb, kinesis, streamed):
    table, stream_arn = streamed
    dynamodb.put_item(TableName=table, Item=item("a", v={"N": "1"}))
    kinesis.split_shard(StreamARN=stream_arn, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(2**127))
    dynamodb.put_item(TableName=table, Item=item("a", v={"N": "2"}))
    parent = shard_records(kinesis, stream_arn, "shardId-000000000000")
    children = shard_records(kinesis, stream_arn, "shardId-000000000001") + shard_records(
        kinesis, stream_arn, "shardId-000000000002")
    assert [json.loads(r["Data"])["eventName"] for r in parent] == ["INSERT"]
    assert [json.loads(r["Data"])["eventName"] for r in children] == ["MODIFY"]
