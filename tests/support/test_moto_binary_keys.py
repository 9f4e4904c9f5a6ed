"""Binary keys in the emulator, over HTTP with boto3, on a table with a hash and a range key of type B.

Its change records name the key as the item holds it, in the table's DynamoDB stream
(moto_stream_binary_keys) and in its Kinesis destination (moto_kinesis_destination), and a
parallel Scan splits it into segments (moto_scan_binary_segments). The soak found the first two
wrong: moto's REMOVE records named a key no item had, so deletions never reached a target (seed
1), and every segmented Scan of a binary hash key was answered HTTP 500 (seed 100). These test
the extensions themselves, so they always start the project's emulator."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest

from testsupport.emulator import EmulatorProcess

KEYS = {"region_name": "us-east-1", "aws_access_key_id": "test", "aws_secret_access_key": "test"}
KEY = {"pk": {"B": b"\x00\xff"}, "sk": {"B": b"\xde\xad\xbe\xef"}}
KEY_JSON = {"pk": {"B": "AP8="}, "sk": {"B": "3q2+7w=="}}  # DynamoDB JSON: binary as base64


@pytest.fixture(scope="module")
def emulator():
    with EmulatorProcess() as emu:
        yield emu


def client(emulator, service: str):
    return boto3.client(service, endpoint_url=emulator.endpoint_url, **KEYS)


def binary_keyed_table(dynamodb) -> str:
    name = f"binary-keys-{uuid.uuid4().hex[:8]}"
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "B"}, {"AttributeName": "sk", "AttributeType": "B"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )  # fmt: skip
    return name


def change_the_item(dynamodb, table: str) -> None:
    dynamodb.put_item(TableName=table, Item={**KEY, "v": {"N": "1"}})
    dynamodb.update_item(
        TableName=table, Key=KEY, UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": {"N": "2"}}
    )
    dynamodb.delete_item(TableName=table, Key=KEY)


def test_dynamodb_stream_records_name_the_binary_key_written(emulator):
    dynamodb, streams = client(emulator, "dynamodb"), client(emulator, "dynamodbstreams")
    table = binary_keyed_table(dynamodb)
    change_the_item(dynamodb, table)

    arn = dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    [shard] = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert [r["dynamodb"]["Keys"] for r in records] == [KEY] * 3


def test_kinesis_destination_records_name_the_binary_key_written(emulator):
    dynamodb, kinesis = client(emulator, "dynamodb"), client(emulator, "kinesis")
    table = binary_keyed_table(dynamodb)
    name = f"changes-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=name, ShardCount=1)
    stream_arn = kinesis.describe_stream(StreamName=name)["StreamDescription"]["StreamARN"]
    dynamodb.enable_kinesis_streaming_destination(TableName=table, StreamArn=stream_arn)
    change_the_item(dynamodb, table)

    [shard] = kinesis.list_shards(StreamARN=stream_arn)["Shards"]
    iterator = kinesis.get_shard_iterator(StreamARN=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON")
    answer = kinesis.get_records(StreamARN=stream_arn, ShardIterator=iterator["ShardIterator"])
    documents = [json.loads(r["Data"]) for r in answer["Records"]]
    assert [d["eventName"] for d in documents] == ["INSERT", "MODIFY", "REMOVE"]
    assert [d["dynamodb"]["Keys"] for d in documents] == [KEY_JSON] * 3


def test_a_parallel_scan_of_a_binary_hash_key_splits_the_table_into_disjoint_segments(emulator):
    dynamodb = client(emulator, "dynamodb")
    table = binary_keyed_table(dynamodb)
    written = {(n.to_bytes(4, "big") + b"\xff", bytes([n % 3])) for n in range(60)}
    for pk, sk in written:
        dynamodb.put_item(TableName=table, Item={"pk": {"B": pk}, "sk": {"B": sk}})

    segments = []
    for segment in range(3):
        request = {"TableName": table, "Segment": segment, "TotalSegments": 3, "Limit": 7}
        keys = []
        while True:
            page = dynamodb.scan(**request)
            keys += [(i["pk"]["B"], i["sk"]["B"]) for i in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        segments.append(set(keys))
    assert set.union(*segments) == written and sum(map(len, segments)) == len(written)
    assert all(segments), "every segment holds some of the 60 keys"
