"""Prove the test harness works over real HTTP (emulator subprocess, its --auth mode, the fault proxy), because every Spark test builds on it."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError

# testsupport is importable: pyproject.toml's pytest "pythonpath" is the checkout's root.
from testsupport.emulator import EmulatorProcess, create_admin_keys, free_port, is_answering
from testsupport.faultproxy import FaultProxy

# In botocore, retries={"max_attempts": N} means N *retries* (N + 1 attempts);
# "total_max_attempts": 1 is what really means a single attempt.
NO_RETRIES = {"total_max_attempts": 1, "mode": "standard"}


def ddb_client(endpoint_url, retries=NO_RETRIES, key=("test", "test"), region="local"):
    return boto3.Session().client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name=region,  # any name works: the emulator is region-agnostic
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        config=Config(retries=dict(retries), connect_timeout=5, read_timeout=10),
    )


def create_table(client) -> str:
    name = f"harness-{uuid.uuid4().hex[:8]}"
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@pytest.fixture(scope="module")
def emulator():
    with EmulatorProcess() as emu:
        yield emu


@pytest.fixture
def table(emulator):
    return create_table(ddb_client(emulator.endpoint_url))


# -- emulator ---------------------------------------------------------------


def test_put_and_get_item_over_http(emulator, table):
    client = ddb_client(emulator.endpoint_url)
    client.put_item(TableName=table, Item={"pk": {"S": "a"}, "n": {"N": "1"}})
    item = client.get_item(TableName=table, Key={"pk": {"S": "a"}}, ConsistentRead=True)
    assert item["Item"] == {"pk": {"S": "a"}, "n": {"N": "1"}}


def test_stop_terminates_the_process_and_frees_the_port():
    port = free_port()
    emu = EmulatorProcess(port=port).start()
    assert emu.endpoint_url == f"http://127.0.0.1:{port}"
    assert is_answering(emu.endpoint_url)
    emu.stop()
    assert emu.returncode == 0  # SIGTERM is a clean shutdown
    assert not is_answering(emu.endpoint_url)


def test_auth_mode_rejects_unknown_keys_and_accepts_admin_keys():
    with EmulatorProcess(auth=True) as emu:
        admin = ddb_client(emu.endpoint_url, key=create_admin_keys(emu.endpoint_url))
        table = create_table(admin)
        assert table in admin.list_tables()["TableNames"]
        assert admin.describe_table(TableName=table)["Table"]["TableName"] == table

        intruder = ddb_client(emu.endpoint_url, key=("AKIAUNKNOWNKEY000000", "secret"))
        for call in (intruder.list_tables, lambda: intruder.describe_table(TableName=table)):
            with pytest.raises(ClientError) as caught:
                call()
            # moto answers IAM-style XML with HTTP 403, which botocore's JSON
            # parser can't read: the code it raises is the status, "403".
            error = caught.value.response["Error"]
            assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
            assert error["Code"] == "403"
            assert "InvalidClientTokenId" in error["Message"]


# -- fault proxy ------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "raised", "code"),
    [
        ("throughput", ClientError, "ProvisionedThroughputExceededException"),
        ("throttling", ClientError, "ThrottlingException"),
        ("http500", ClientError, "InternalServerError"),
        ("http503", ClientError, "ServiceUnavailable"),
        ("drop", ConnectionClosedError, None),
        ("denied", ClientError, "AccessDeniedException"),
    ],
)
def test_each_fault_reaches_a_client_without_retries(emulator, table, fault, raised, code):
    only_puts = FaultProxy(
        emulator.endpoint_url, fault_rate=1.0, faults=(fault,), operations={"PutItem"}
    )
    with only_puts as proxy:
        client = ddb_client(proxy.endpoint_url)
        client.describe_table(TableName=table)  # not in operations: forwarded
        started = time.monotonic()
        with pytest.raises(raised) as caught:
            client.put_item(TableName=table, Item={"pk": {"S": fault}})
        assert time.monotonic() - started < 5  # a drop must not wait for read_timeout
        if code:
            assert caught.value.response["Error"]["Code"] == code
        assert proxy.counts == {fault: 1, "forwarded": 1}

    written = ddb_client(emulator.endpoint_url).get_item(
        TableName=table, Key={"pk": {"S": fault}}, ConsistentRead=True
    )
    assert ("Item" in written) == (fault == "drop")  # a drop happens after the write


def test_a_latency_fault_forwards_the_request_late_and_answers_it(emulator, table):
    with FaultProxy(emulator.endpoint_url, fault_rate=1.0, faults=("latency",), latency_seconds=0.4) as proxy:
        client = ddb_client(proxy.endpoint_url)
        started = time.monotonic()
        client.put_item(TableName=table, Item={"pk": {"S": "late"}})
        assert time.monotonic() - started >= 0.4
        assert proxy.counts == {"latency": 1, "forwarded": 1}
    direct = ddb_client(emulator.endpoint_url)
    assert "Item" in direct.get_item(TableName=table, Key={"pk": {"S": "late"}}, ConsistentRead=True)


@pytest.mark.parametrize(
    ("fault", "code"), [("expired_iterator", "ExpiredIteratorException"), ("limit_exceeded", "LimitExceededException")]
)
def test_a_stream_fault_answers_only_stream_reads(emulator, table, fault, code):
    """The table's DynamoDB stream read through the proxy: GetRecords gets the fault, PutItem never."""
    with FaultProxy(emulator.endpoint_url, fault_rate=1.0, faults=(fault,)) as proxy:
        client = ddb_client(proxy.endpoint_url)
        client.put_item(TableName=table, Item={"pk": {"S": "not a stream read"}})
        streams = boto3.client(
            "dynamodbstreams", endpoint_url=proxy.endpoint_url, region_name="local",
            aws_access_key_id="test", aws_secret_access_key="test", config=Config(retries=dict(NO_RETRIES)),
        )  # fmt: skip
        with pytest.raises(ClientError) as caught:
            streams.get_records(ShardIterator="an-iterator-the-proxy-never-forwards")
        assert caught.value.response["Error"]["Code"] == code
        assert proxy.counts == {fault: 1, "forwarded": 1}


def test_a_held_request_is_neither_forwarded_nor_answered_until_released(emulator, table):
    import botocore.exceptions
    import threading

    with FaultProxy(emulator.endpoint_url, fault_rate=0.0) as proxy:
        client = ddb_client(proxy.endpoint_url)
        held = proxy.hold_next("PutItem")
        outcome = {}

        def put() -> None:
            try:
                client.put_item(TableName=table, Item={"pk": {"S": "held"}})
            except botocore.exceptions.ConnectionClosedError as exc:
                outcome["error"] = exc

        writer = threading.Thread(target=put)
        writer.start()
        assert held.wait(5), "the put never reached the proxy"
        client.put_item(TableName=table, Item={"pk": {"S": "after"}})  # only the next one is held
        assert writer.is_alive(), "the held put was answered"
        proxy.release_held()
        writer.join(5)
        assert isinstance(outcome.get("error"), botocore.exceptions.ConnectionClosedError)

    direct = ddb_client(emulator.endpoint_url)
    assert "Item" not in direct.get_item(TableName=table, Key={"pk": {"S": "held"}}, ConsistentRead=True)
    assert "Item" in direct.get_item(TableName=table, Key={"pk": {"S": "after"}}, ConsistentRead=True)


def test_throttle_answers_every_matching_request_for_its_window_from_the_first(emulator, table):
    with FaultProxy(emulator.endpoint_url, fault_rate=0.0) as proxy:
        client = ddb_client(proxy.endpoint_url)
        proxy.throttle("PutItem", 1.0)
        client.get_item(TableName=table, Key={"pk": {"S": "x"}})  # another operation: forwarded
        time.sleep(0.3)  # the window opens at the first put, not at throttle()
        answers = []
        while True:
            try:
                client.put_item(TableName=table, Item={"pk": {"S": "throttled"}})
                break
            except ClientError as exc:
                answers.append(exc.response["Error"]["Code"])
                assert exc.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        counts = proxy.counts

    assert set(answers) == {"ProvisionedThroughputExceededException"}
    assert counts["throttled"] == len(answers) > 1
    assert 0.9 <= proxy.last_throttled - proxy.first_throttled < 1.0


def test_throttle_can_leave_every_item_of_a_batch_unprocessed(emulator, table):
    with FaultProxy(emulator.endpoint_url, fault_rate=0.0) as proxy:
        client = ddb_client(proxy.endpoint_url)
        proxy.throttle("BatchWriteItem", 60, answer="unprocessed")
        requests = [{"PutRequest": {"Item": {"pk": {"S": f"unprocessed-{n}"}}}} for n in range(3)]
        response = client.batch_write_item(RequestItems={table: requests})
        counts = proxy.counts

    assert response["UnprocessedItems"] == {table: requests}
    assert counts["throttled"] == 1 and counts["forwarded"] == 0
    direct = ddb_client(emulator.endpoint_url)
    assert "Item" not in direct.get_item(TableName=table, Key={"pk": {"S": "unprocessed-0"}}, ConsistentRead=True)


def test_max_attempts_counts_retries_not_attempts(emulator, table):
    with FaultProxy(emulator.endpoint_url, fault_rate=1.0, faults=("http500",)) as proxy:
        client = ddb_client(proxy.endpoint_url, retries={"max_attempts": 1, "mode": "standard"})
        with pytest.raises(ClientError):
            client.put_item(TableName=table, Item={"pk": {"S": "x"}})
        assert proxy.counts["http500"] == 2


def test_adaptive_retries_survive_a_30_percent_fault_rate(emulator, table):
    """200 writes from 50 concurrent clients, like executor tasks.

    One client per worker: a fresh adaptive client's rate limiter drops to
    0.5 requests/s on its first throttle, and botocore's throttling backoff
    starts at up to 1 s, so one sequential loop would take over a minute.
    """
    retries = {"max_attempts": 10, "mode": "adaptive"}
    clients = 50
    keys = [f"item-{i:03}" for i in range(200)]
    with FaultProxy(emulator.endpoint_url, fault_rate=0.3) as proxy:

        def write(chunk):
            client = ddb_client(proxy.endpoint_url, retries=retries)
            for key in chunk:
                client.put_item(TableName=table, Item={"pk": {"S": key}})

        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(write, [keys[i::clients] for i in range(clients)]))
        counts = proxy.counts

    assert counts["forwarded"] == 200
    assert all(counts[fault] > 0 for fault in proxy.faults), counts
    scan = ddb_client(emulator.endpoint_url).get_paginator("scan").paginate(TableName=table)
    assert sorted(item["pk"]["S"] for page in scan for item in page["Items"]) == keys


def test_proxy_reuses_connections_and_stops_with_clients_connected(emulator, table):
    proxy = FaultProxy(emulator.endpoint_url, fault_rate=0.0).start()
    client = ddb_client(proxy.endpoint_url)
    for i in range(5):
        client.put_item(TableName=table, Item={"pk": {"S": f"keep-{i}"}})
    assert proxy.open_connections == 1  # one connection, kept alive

    stopper = threading.Thread(target=proxy.stop)
    stopper.start()
    stopper.join(timeout=5)
    assert not stopper.is_alive(), "FaultProxy.stop() deadlocked"
    assert proxy.counts["forwarded"] == 5


def test_concurrent_puts_under_one_new_partition_key_all_land():
    """moto alone can lose one of two concurrent inserts under the same new partition key
    (testsupport/moto_table_lock.py); the emulator must not. The race needs a thread switch
    inside one dict insert, so over HTTP it is rare (moto 5.2.6 lost nothing here in four runs
    without the lock): this checks that concurrent puts land, not that the lock is needed."""

    with EmulatorProcess() as emulator:
        client = ddb_client(emulator.endpoint_url)
        client.create_table(
            TableName="race",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "N"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        keys = [(f"p{pk}", sk) for pk in range(40) for sk in range(8)]

        # One client per thread: making a boto3 client costs more than the put it sends.
        per_thread = threading.local()

        def put(key):
            if not hasattr(per_thread, "client"):
                per_thread.client = ddb_client(emulator.endpoint_url)
            per_thread.client.put_item(TableName="race", Item={"pk": {"S": key[0]}, "sk": {"N": str(key[1])}})

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(put, keys))
        found = client.scan(TableName="race")["Items"]
        assert len(found) == len(keys)


def test_a_stream_disabled_records_nothing_and_enabled_again_is_a_new_stream(emulator, table):
    """As on DynamoDB (testsupport/moto_stream_reenable.py): writes go on while the stream is off,
    and enabling it again gives a new stream ARN whose shard holds only later changes."""
    client = ddb_client(emulator.endpoint_url)
    on = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    client.update_table(TableName=table, StreamSpecification=on)
    first = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    client.update_table(TableName=table, StreamSpecification={"StreamEnabled": False})
    client.put_item(TableName=table, Item={"pk": {"S": "while off"}})
    described = client.describe_table(TableName=table)["Table"]
    assert not described.get("StreamSpecification", {}).get("StreamEnabled") and described["LatestStreamArn"] == first

    client.update_table(TableName=table, StreamSpecification=on)
    client.put_item(TableName=table, Item={"pk": {"S": "after"}})
    second = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    assert second != first
    streams = boto3.client("dynamodbstreams", endpoint_url=emulator.endpoint_url, region_name="local",
                           aws_access_key_id="test", aws_secret_access_key="test")  # fmt: skip
    shard = streams.describe_stream(StreamArn=second)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=second, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in records] == ["after"]
