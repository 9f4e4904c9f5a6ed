"""Prove the scripted DynamoDB Streams server speaks the real API over HTTP (boto3's
dynamodbstreams client parses every answer), and that its topologies and faults behave
as the AWS API reference documents, because the stream tests of issue 3 build on it."""

from __future__ import annotations

import base64
import threading
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError

from testsupport.streamserver import ScriptedStreamServer, make_shard_id

REGION = "us-east-1"
# "total_max_attempts": 1 is a single attempt (botocore's "max_attempts" counts retries).
NO_RETRIES = {"total_max_attempts": 1, "mode": "standard"}
KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]

A, B, C, D, E = (make_shard_id(x) for x in "abcde")
RECORD_FIELDS = {"eventID", "eventName", "eventVersion", "eventSource", "awsRegion", "dynamodb", "userIdentity"}


def streams_client(server: ScriptedStreamServer, retries=NO_RETRIES):
    return boto3.Session().client(
        "dynamodbstreams",
        endpoint_url=server.endpoint_url,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries=dict(retries), connect_timeout=5, read_timeout=10),
    )


def key(pk: str, sk: int = 0) -> dict:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}}


def item(pk: str, sk: int = 0, **attrs) -> dict:
    return {**key(pk, sk), **attrs}


def insert(server, shard, pk, sk=0, **attrs) -> str:
    return server.put(shard, "INSERT", key(pk, sk), new_image=item(pk, sk, **attrs))


@pytest.fixture
def server():
    with ScriptedStreamServer(table_name="orders", key_schema=KEY_SCHEMA) as srv:
        yield srv


@pytest.fixture
def client(server):
    return streams_client(server)


def iterator(client, server, shard, kind="TRIM_HORIZON", seq=None) -> str:
    extra = {"SequenceNumber": seq} if seq is not None else {}
    response = client.get_shard_iterator(
        StreamArn=server.stream_arn, ShardId=shard, ShardIteratorType=kind, **extra
    )
    return response["ShardIterator"]


def read_all(client, it: str, limit: int | None = None, max_calls: int = 100) -> tuple[list[dict], list[dict]]:
    """Follow NextShardIterator until it is absent or a page is empty; (records, responses)."""
    records, responses = [], []
    for _ in range(max_calls):
        response = client.get_records(ShardIterator=it, **({"Limit": limit} if limit else {}))
        responses.append(response)
        records += response["Records"]
        it = response.get("NextShardIterator")
        if it is None or not response["Records"]:
            break
    return records, responses


def seqs(records: list[dict]) -> list[str]:
    return [r["dynamodb"]["SequenceNumber"] for r in records]


def describe(client, server, **kwargs) -> dict:
    return client.describe_stream(StreamArn=server.stream_arn, **kwargs)["StreamDescription"]


def error_code(excinfo) -> str:
    return excinfo.value.response["Error"]["Code"]


def status(excinfo) -> int:
    return excinfo.value.response["ResponseMetadata"]["HTTPStatusCode"]


# -- stream and shard listing ------------------------------------------------


def test_list_streams_by_table(server, client):
    streams = client.list_streams(TableName="orders")["Streams"]
    assert streams == [
        {"StreamArn": server.stream_arn, "TableName": "orders", "StreamLabel": server.stream_label}
    ]
    assert client.list_streams(TableName="other")["Streams"] == []
    assert client.list_streams()["Streams"][0]["StreamArn"] == server.stream_arn


def test_describe_stream_pages_with_limit_and_exclusive_start(server, client):
    for shard in (A, B, C, D, E):
        server.add_shard(shard)
    pages, start = [], {}
    for _ in range(10):
        description = client.describe_stream(StreamArn=server.stream_arn, Limit=2, **start)["StreamDescription"]
        pages.append([s["ShardId"] for s in description["Shards"]])
        if "LastEvaluatedShardId" not in description:
            break
        assert description["LastEvaluatedShardId"] == pages[-1][-1]
        start = {"ExclusiveStartShardId": description["LastEvaluatedShardId"]}
    assert pages == [[A, B], [C, D], [E]]

    description = client.describe_stream(StreamArn=server.stream_arn)["StreamDescription"]
    assert description["StreamStatus"] == "ENABLED"
    assert description["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert description["TableName"] == "orders"
    assert description["KeySchema"] == KEY_SCHEMA
    assert description["CreationRequestDateTime"].timestamp() == server.created_at  # parsed: a datetime
    assert "LastEvaluatedShardId" not in description
    for shard in description["Shards"]:
        numbers = shard["SequenceNumberRange"]
        assert numbers["StartingSequenceNumber"].isdigit() and len(numbers["StartingSequenceNumber"]) >= 21
        assert "EndingSequenceNumber" not in numbers and "ParentShardId" not in shard


def test_a_full_last_page_may_be_followed_by_an_empty_one(server, client):
    for shard in (A, B, C, D):
        server.add_shard(shard)
    second = client.describe_stream(StreamArn=server.stream_arn, Limit=2, ExclusiveStartShardId=B)
    assert [s["ShardId"] for s in second["StreamDescription"]["Shards"]] == [C, D]
    assert second["StreamDescription"]["LastEvaluatedShardId"] == D  # AWS: "not necessarily more data"
    third = client.describe_stream(StreamArn=server.stream_arn, Limit=2, ExclusiveStartShardId=D)
    assert third["StreamDescription"]["Shards"] == []
    assert "LastEvaluatedShardId" not in third["StreamDescription"]


def test_unknown_stream_is_resource_not_found(server, client):
    with pytest.raises(ClientError) as excinfo:
        client.describe_stream(StreamArn=server.stream_arn.replace("orders", "nothere"))
    assert error_code(excinfo) == "ResourceNotFoundException"


# -- reading -----------------------------------------------------------------


def test_read_from_trim_horizon_to_the_end_with_limit_paging(server, client):
    server.add_shard(A)
    written = [insert(server, A, f"k{i}", v={"N": str(i)}) for i in range(7)]
    numbers = [int(s) for s in written]
    assert all(len(s) >= 21 and s.isdigit() for s in written)
    assert numbers == sorted(numbers) and len(set(numbers)) == 7

    records, responses = read_all(client, iterator(client, server, A), limit=3)
    assert [len(r["Records"]) for r in responses] == [3, 3, 1, 0]  # open shard: an empty page at the end
    assert seqs(records) == written
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == [f"k{i}" for i in range(7)]
    assert responses[-1]["NextShardIterator"]  # open: keep polling

    # Polling the open shard's iterator later sees what was written since.
    later = insert(server, A, "k7")
    page = client.get_records(ShardIterator=responses[-1]["NextShardIterator"])
    assert seqs(page["Records"]) == [later]


def test_iterators_can_be_reused(server, client):
    server.add_shard(A)
    insert(server, A, "x")
    it = iterator(client, server, A)
    first = client.get_records(ShardIterator=it)["Records"]
    assert client.get_records(ShardIterator=it)["Records"] == first


def test_at_and_after_sequence_number_and_latest(server, client):
    server.add_shard(A)
    written = [insert(server, A, f"k{i}") for i in range(5)]

    after = read_all(client, iterator(client, server, A, "AFTER_SEQUENCE_NUMBER", written[2]))[0]
    assert seqs(after) == written[3:]
    at = read_all(client, iterator(client, server, A, "AT_SEQUENCE_NUMBER", written[2]))[0]
    assert seqs(at) == written[2:]
    after_last = read_all(client, iterator(client, server, A, "AFTER_SEQUENCE_NUMBER", written[-1]))[0]
    assert after_last == []

    latest = iterator(client, server, A, "LATEST")
    assert client.get_records(ShardIterator=latest)["Records"] == []
    new = insert(server, A, "new")
    assert seqs(client.get_records(ShardIterator=latest)["Records"]) == [new]


def test_sequence_numbers_have_gaps_and_resume_after_works_across_them(server, client):
    server.add_shard(A)
    server.add_shard(B)
    a1 = insert(server, A, "a1")
    insert(server, B, "b1")  # takes numbers in between
    a2 = insert(server, A, "a2")
    assert int(a2) - int(a1) > 1
    after = read_all(client, iterator(client, server, A, "AFTER_SEQUENCE_NUMBER", a1))[0]
    assert seqs(after) == [a2]


def test_closed_shard_ends_without_next_iterator(server, client):
    server.add_shard(A)
    written = [insert(server, A, f"k{i}") for i in range(4)]
    ending = server.close_shard(A)
    assert int(ending) > int(written[-1])

    shard = client.describe_stream(StreamArn=server.stream_arn)["StreamDescription"]["Shards"][0]
    assert shard["SequenceNumberRange"]["EndingSequenceNumber"] == ending

    records, responses = read_all(client, iterator(client, server, A), limit=3)
    assert seqs(records) == written
    assert [len(r["Records"]) for r in responses] == [3, 1]
    assert "NextShardIterator" in responses[0]
    assert responses[-1].get("NextShardIterator") is None  # the last records come with no iterator

    # LATEST and AFTER the last record of a closed shard: nothing, and no iterator.
    for it in (
        iterator(client, server, A, "LATEST"),
        iterator(client, server, A, "AFTER_SEQUENCE_NUMBER", written[-1]),
    ):
        response = client.get_records(ShardIterator=it)
        assert response["Records"] == [] and response.get("NextShardIterator") is None
    with pytest.raises(ValueError):
        insert(server, A, "late")


def test_closed_shard_can_end_with_an_empty_page():
    with ScriptedStreamServer(table_name="t", key_schema=KEY_SCHEMA, end_with_empty_page=True) as server:
        client = streams_client(server)
        server.add_shard(A)
        insert(server, A, "k")
        server.close_shard(A)
        first = client.get_records(ShardIterator=iterator(client, server, A))
        assert len(first["Records"]) == 1 and first["NextShardIterator"]
        last = client.get_records(ShardIterator=first["NextShardIterator"])
        assert last["Records"] == [] and last.get("NextShardIterator") is None


def test_split_topology_is_visible_with_parent_shard_ids(server, client):
    server.add_shard(A)
    parent_seq = insert(server, A, "same", v={"S": "in parent"})
    server.split(A, [B, C])
    child_seq = server.put(
        B, "MODIFY", key("same"),
        new_image=item("same", v={"S": "in child"}), old_image=item("same", v={"S": "in parent"}),
    )
    assert int(child_seq) > int(parent_seq)

    shards = {s["ShardId"]: s for s in describe(client, server)["Shards"]}
    assert list(shards) == [A, B, C]
    assert "ParentShardId" not in shards[A]
    assert "EndingSequenceNumber" in shards[A]["SequenceNumberRange"]
    for child in (B, C):
        assert shards[child]["ParentShardId"] == A
        assert "EndingSequenceNumber" not in shards[child]["SequenceNumberRange"]
        assert int(shards[child]["SequenceNumberRange"]["StartingSequenceNumber"]) > int(
            shards[A]["SequenceNumberRange"]["EndingSequenceNumber"]
        )

    children = describe(client, server, ShardFilter={"Type": "CHILD_SHARDS", "ShardId": A})
    assert [s["ShardId"] for s in children["Shards"]] == [B, C]

    # The parent's sequence number is not a position in the child.
    with pytest.raises(ClientError) as excinfo:
        iterator(client, server, B, "AFTER_SEQUENCE_NUMBER", parent_seq)
    assert error_code(excinfo) == "ValidationException"

    # A second generation still orders above the first.
    server.split(B, [D])
    grandchild_seq = insert(server, D, "deeper")
    assert int(grandchild_seq) > int(child_seq)


def test_child_numbers_are_above_the_parents_whatever_the_write_order(server):
    server.add_shard(A)
    server.add_shard(B, parent_id=A)  # scripted while A is still open
    child = insert(server, B, "child first")
    parent = insert(server, A, "parent later")
    assert int(child) > int(parent)


def test_reverse_shard_order_lists_children_before_parents():
    with ScriptedStreamServer(table_name="t", key_schema=KEY_SCHEMA, shard_order="reverse") as server:
        server.add_shard(A)
        server.split(A, [B])
        shards = describe(streams_client(server), server)["Shards"]
        assert [s["ShardId"] for s in shards] == [B, A]


def test_hook_adds_a_shard_mid_run(server, client):
    server.add_shard(A)

    def new_shard_after_second_read(operation, request):
        if operation == "GetRecords" and server.counts["GetRecords"] == 2:
            server.split(A, [B])

    server.add_hook(new_shard_after_second_read)
    it = iterator(client, server, A)
    it = client.get_records(ShardIterator=it)["NextShardIterator"]
    assert len(client.describe_stream(StreamArn=server.stream_arn)["StreamDescription"]["Shards"]) == 1
    response = client.get_records(ShardIterator=it)  # the hook closes A first
    assert response.get("NextShardIterator") is None
    shards = client.describe_stream(StreamArn=server.stream_arn)["StreamDescription"]["Shards"]
    assert [(s["ShardId"], s.get("ParentShardId")) for s in shards] == [(A, None), (B, A)]


# -- record format -----------------------------------------------------------


def test_record_format_matches_the_documented_shapes(server, client):
    server.add_shard(A)
    created = 1_700_000_123
    blob = b"\x00\xffbinary\n"
    listed = {"L": [{"B": b"\x03"}, {"N": "1.5"}, {"NULL": True}, {"BOOL": False}]}
    new = item(
        "p", 1, data={"B": blob}, tags={"BS": [b"\x01", b"\x02"]}, nested={"M": {"inner": {"B": blob}}},
        listed=listed, names={"SS": ["a"]},
    )
    server.put(A, "INSERT", key("p", 1), new_image=new, created=created)
    modified = item("p", 1, v={"N": "2"})
    server.put(A, "MODIFY", key("p", 1), new_image=modified, old_image=new, created=created + 1)
    server.put(A, "REMOVE", key("p", 1), old_image=item("p", 1, v={"N": "2"}), created=created + 2)
    server.put(A, "REMOVE", key("q", 2), old_image=item("q", 2), ttl_delete=True, created=created + 3)

    records = client.get_records(ShardIterator=iterator(client, server, A))["Records"]
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE", "REMOVE"]
    for offset, record in enumerate(records):
        assert set(record) <= RECORD_FIELDS
        assert isinstance(record["eventID"], str) and record["eventID"]
        assert record["eventVersion"] == "1.1"
        assert record["eventSource"] == "aws:dynamodb"
        assert record["awsRegion"] == REGION
        stream_record = record["dynamodb"]
        # boto3 parses the epoch-seconds number into a datetime: the wire type is right.
        assert stream_record["ApproximateCreationDateTime"].timestamp() == created + offset
        assert stream_record["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert isinstance(stream_record["SizeBytes"], int) and stream_record["SizeBytes"] >= 1
        assert stream_record["SequenceNumber"].isdigit()
    assert len({r["eventID"] for r in records}) == 4

    inserted = records[0]["dynamodb"]
    assert inserted["Keys"] == {"pk": {"S": "p"}, "sk": {"N": "1"}}
    assert "OldImage" not in inserted
    image = inserted["NewImage"]
    # B values come back as bytes: they were base64 on the wire.
    assert image["data"] == {"B": blob}
    assert image["tags"] == {"BS": [b"\x01", b"\x02"]}
    assert image["nested"] == {"M": {"inner": {"B": blob}}}
    assert image["listed"] == {"L": [{"B": b"\x03"}, {"N": "1.5"}, {"NULL": True}, {"BOOL": False}]}
    assert records[1]["dynamodb"]["OldImage"]["data"] == {"B": blob}
    assert records[1]["dynamodb"]["NewImage"]["v"] == {"N": "2"}
    assert "NewImage" not in records[2]["dynamodb"] and records[2]["dynamodb"]["OldImage"]["v"] == {"N": "2"}

    assert "userIdentity" not in records[2]
    assert records[3]["userIdentity"] == {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}

    raw = server.records(A)[0]  # what went over the wire
    assert raw["dynamodb"]["NewImage"]["data"] == {"B": base64.b64encode(blob).decode()}
    assert raw["dynamodb"]["ApproximateCreationDateTime"] == created


@pytest.mark.parametrize(
    "view_type, present",
    [
        ("KEYS_ONLY", {"Keys"}),
        ("NEW_IMAGE", {"Keys", "NewImage"}),
        ("OLD_IMAGE", {"Keys", "OldImage"}),
        ("NEW_AND_OLD_IMAGES", {"Keys", "NewImage", "OldImage"}),
    ],
)
def test_view_type_decides_which_images_are_served(view_type, present):
    with ScriptedStreamServer(table_name="t", key_schema=KEY_SCHEMA, view_type=view_type) as server:
        client = streams_client(server)
        server.add_shard(A)
        server.put(A, "MODIFY", key("k"), new_image=item("k", v={"N": "2"}), old_image=item("k", v={"N": "1"}))
        record = client.get_records(ShardIterator=iterator(client, server, A))["Records"][0]["dynamodb"]
        assert set(record) & {"Keys", "NewImage", "OldImage"} == present
        assert record["StreamViewType"] == view_type
        described = client.describe_stream(StreamArn=server.stream_arn)["StreamDescription"]
        assert described["StreamViewType"] == view_type


def test_records_aws_could_not_produce_are_refused(server):
    server.add_shard(A)
    with pytest.raises(ValueError, match="28"):
        server.add_shard("shardId-short")
    with pytest.raises(ValueError, match="old image"):
        server.put(A, "INSERT", key("k"), new_image=item("k"), old_image=item("k"))
    with pytest.raises(ValueError, match="needs new_image"):
        server.put(A, "INSERT", key("k"))
    with pytest.raises(ValueError, match="key attributes"):
        server.put(A, "INSERT", {"pk": {"S": "k"}}, new_image={"pk": {"S": "k"}})
    with pytest.raises(ValueError, match="same key"):
        server.put(A, "INSERT", key("k"), new_image=item("other"))
    with pytest.raises(ValueError, match="REMOVE"):
        server.put(A, "MODIFY", key("k"), new_image=item("k"), old_image=item("k"), ttl_delete=True)
    with pytest.raises(TypeError):
        server.put(A, "INSERT", key("k"), new_image=item("k", b={"B": "not bytes"}))


# -- faults ------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation, code, http_status",
    [
        ("GetRecords", "LimitExceededException", 400),
        ("GetRecords", "ProvisionedThroughputExceededException", 400),
        ("GetRecords", "InternalServerError", 500),
        ("GetRecords", "ExpiredIteratorException", 400),
        ("GetRecords", "TrimmedDataAccessException", 400),
        ("GetShardIterator", "TrimmedDataAccessException", 400),
        ("GetShardIterator", "InternalServerError", 500),
        ("DescribeStream", "LimitExceededException", 400),
        ("ListStreams", "InternalServerError", 500),
    ],
)
def test_injected_fault_raises_the_documented_error_code(server, client, operation, code, http_status):
    server.add_shard(A)
    insert(server, A, "k")
    calls = {
        "ListStreams": lambda: client.list_streams(),
        "DescribeStream": lambda: client.describe_stream(StreamArn=server.stream_arn),
        "GetShardIterator": lambda: iterator(client, server, A),
        "GetRecords": lambda: client.get_records(ShardIterator=iterator(client, server, A)),
    }
    server.fail_next(operation, code, times=2)
    for _ in range(2):
        with pytest.raises(ClientError) as excinfo:
            calls[operation]()
        assert error_code(excinfo) == code
        assert status(excinfo) == http_status
        assert excinfo.value.operation_name == operation
    calls[operation]()  # the faults are used up
    assert server.fault_counts[code] == 2


def test_fault_scoped_to_one_shard(server, client):
    server.add_shard(A)
    server.add_shard(B)
    server.fail_next("GetRecords", "LimitExceededException", shard_id=B)
    it_a, it_b = iterator(client, server, A), iterator(client, server, B)
    client.get_records(ShardIterator=it_a)  # A is not affected
    with pytest.raises(ClientError) as excinfo:
        client.get_records(ShardIterator=it_b)
    assert error_code(excinfo) == "LimitExceededException"
    client.get_records(ShardIterator=it_b)


def test_injected_expired_iterator_stays_expired(server, client):
    server.add_shard(A)
    it = iterator(client, server, A)
    server.fail_next("GetRecords", "ExpiredIteratorException")
    for _ in range(2):  # the injected one, then the iterator is really expired
        with pytest.raises(ClientError) as excinfo:
            client.get_records(ShardIterator=it)
        assert error_code(excinfo) == "ExpiredIteratorException"
    client.get_records(ShardIterator=iterator(client, server, A))  # a fresh one works


def test_dropped_connection(server, client):
    server.fail_next("ListStreams", "drop")
    with pytest.raises(ConnectionClosedError):
        client.list_streams()
    client.list_streams()


def test_a_transient_fault_is_retried_by_a_retrying_client(server):
    server.add_shard(A)
    client = streams_client(server, retries={"total_max_attempts": 3, "mode": "standard"})
    server.fail_next("GetShardIterator", "InternalServerError")
    assert iterator(client, server, A)
    assert server.counts["GetShardIterator"] == 2


def test_expire_iterators_invalidates_every_outstanding_iterator(server, client):
    server.add_shard(A)
    server.add_shard(B)
    written = [insert(server, A, f"k{i}") for i in range(3)]
    it_a, it_b = iterator(client, server, A), iterator(client, server, B)
    page = client.get_records(ShardIterator=it_a, Limit=1)
    server.expire_iterators()
    for it in (it_a, it_b, page["NextShardIterator"]):
        with pytest.raises(ClientError) as excinfo:
            client.get_records(ShardIterator=it)
        assert error_code(excinfo) == "ExpiredIteratorException"
    # Re-acquire from the last sequence number read: nothing lost, nothing repeated.
    last = page["Records"][-1]["dynamodb"]["SequenceNumber"]
    rest = read_all(client, iterator(client, server, A, "AFTER_SEQUENCE_NUMBER", last))[0]
    assert seqs(rest) == written[1:]


def test_expire_iterators_of_one_shard(server, client):
    server.add_shard(A)
    server.add_shard(B)
    it_a, it_b = iterator(client, server, A), iterator(client, server, B)
    server.expire_iterators(B)
    client.get_records(ShardIterator=it_a)
    with pytest.raises(ClientError) as excinfo:
        client.get_records(ShardIterator=it_b)
    assert error_code(excinfo) == "ExpiredIteratorException"


def test_iterators_expire_by_age():
    with ScriptedStreamServer(table_name="t", key_schema=KEY_SCHEMA, iterator_ttl=0.2) as server:
        client = streams_client(server)
        server.add_shard(A)
        it = iterator(client, server, A)
        client.get_records(ShardIterator=it)
        time.sleep(0.3)
        with pytest.raises(ClientError) as excinfo:
            client.get_records(ShardIterator=it)
        assert error_code(excinfo) == "ExpiredIteratorException"


def test_shard_read_limit_throttles_readers():
    with ScriptedStreamServer(table_name="t", key_schema=KEY_SCHEMA, shard_read_limit=2) as server:
        client = streams_client(server)
        server.add_shard(A)
        server.add_shard(B)
        it = iterator(client, server, A)
        client.get_records(ShardIterator=it)
        client.get_records(ShardIterator=it)
        with pytest.raises(ClientError) as excinfo:
            client.get_records(ShardIterator=it)
        assert error_code(excinfo) == "LimitExceededException"
        client.get_records(ShardIterator=iterator(client, server, B))  # per shard
        time.sleep(1.0)
        client.get_records(ShardIterator=it)


def test_invalid_iterator_and_sequence_number_are_validation_errors(server, client):
    server.add_shard(A)
    server.close_shard(A)
    with pytest.raises(ClientError) as excinfo:
        client.get_records(ShardIterator="not-an-iterator")
    assert error_code(excinfo) == "ValidationException"
    for seq in ("12345678901234567890123456789", "000000000000000000000001"):  # past the end; before the start
        with pytest.raises(ClientError) as excinfo:
            iterator(client, server, A, "AT_SEQUENCE_NUMBER", seq)
        assert error_code(excinfo) == "ValidationException"


# -- trimming and expiry -----------------------------------------------------


def test_trimmed_data(server, client):
    server.add_shard(A)
    written = [insert(server, A, f"k{i}") for i in range(6)]
    outstanding = iterator(client, server, A)  # positioned before the trim point
    assert server.trim(A, written[3]) == 3

    horizon = read_all(client, iterator(client, server, A))[0]
    assert seqs(horizon) == written[3:]

    trimmed_positions = [
        ("AT_SEQUENCE_NUMBER", written[0]),
        ("AT_SEQUENCE_NUMBER", written[2]),
        ("AFTER_SEQUENCE_NUMBER", written[1]),
    ]
    for kind, seq in trimmed_positions:
        with pytest.raises(ClientError) as excinfo:
            iterator(client, server, A, kind, seq)
        assert error_code(excinfo) == "TrimmedDataAccessException", (kind, seq)
    with pytest.raises(ClientError) as excinfo:
        client.get_records(ShardIterator=outstanding)
    assert error_code(excinfo) == "TrimmedDataAccessException"

    # Resuming right after the newest trimmed record loses nothing: allowed.
    resumed = read_all(client, iterator(client, server, A, "AFTER_SEQUENCE_NUMBER", written[2]))[0]
    assert seqs(resumed) == written[3:]
    assert len(read_all(client, iterator(client, server, A, "AT_SEQUENCE_NUMBER", written[3]))[0]) == 3


def test_removed_shard_is_gone(server, client):
    server.add_shard(A)
    insert(server, A, "k")
    server.split(A, [B])
    outstanding = iterator(client, server, A)
    server.remove_shard(A)

    shards = client.describe_stream(StreamArn=server.stream_arn)["StreamDescription"]["Shards"]
    assert [s["ShardId"] for s in shards] == [B]
    assert shards[0]["ParentShardId"] == A  # the child still names its expired parent

    with pytest.raises(ClientError) as excinfo:
        iterator(client, server, A)
    assert error_code(excinfo) == "ResourceNotFoundException"
    with pytest.raises(ClientError) as excinfo:
        client.get_records(ShardIterator=outstanding)
    assert error_code(excinfo) == "ResourceNotFoundException"
    # Pagination that started from the removed shard's id still works.
    page = client.describe_stream(StreamArn=server.stream_arn, ExclusiveStartShardId=A)
    assert [s["ShardId"] for s in page["StreamDescription"]["Shards"]] == [B]


# -- observability and concurrency ------------------------------------------


def test_calls_and_counts(server, client):
    server.add_shard(A)
    client.list_streams(TableName="orders")
    client.get_records(ShardIterator=iterator(client, server, A), Limit=5)
    assert [op for op, _ in server.calls] == ["ListStreams", "GetShardIterator", "GetRecords"]
    assert server.calls[0][1] == {"TableName": "orders"}
    assert server.calls[1][1]["ShardId"] == A
    assert server.calls[2][1]["Limit"] == 5
    assert server.counts == {"ListStreams": 1, "GetShardIterator": 1, "GetRecords": 1}
    assert server.open_connections >= 1  # kept alive


def test_concurrent_readers_on_many_shards(server):
    shards = [make_shard_id(f"s{i}") for i in range(8)]
    expected = {}
    for shard in shards:
        server.add_shard(shard)
        expected[shard] = [insert(server, shard, f"{shard[-2:]}-{i}") for i in range(20)]
        server.close_shard(shard)
    results, errors = {}, []

    def read(shard):
        try:
            client = streams_client(server)
            results[shard] = seqs(read_all(client, iterator(client, server, shard), limit=3)[0])
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=read, args=(s,)) for s in shards]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert results == expected
    assert server.counts["GetRecords"] == 8 * 7  # 20 records at 3 a page
