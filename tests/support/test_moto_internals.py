"""What each emulator extension (testsupport/moto_*.py) relies on inside moto, checked on the moto installed.

The extensions replace or wrap moto's private methods; a moto release that renames a parameter or
stores a field differently breaks them in ways that show up far away (a stream record that reads
back as base64, a custom action answered 404). Each check here fails with one line that names the
extension and what moto no longer does, so an upgrade says where to look. They inspect moto's own
classes: the extensions are installed only in the emulator's process, never in this one.
"""

from __future__ import annotations

import base64
import binascii
import inspect
import json
from importlib.metadata import version

import botocore.session
import pytest
from moto.core.responses import ActionResult, BaseResponse
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import Item
from moto.dynamodb.models.table import StreamRecord, Table
from moto.dynamodb.responses import DynamoHandler, DynamoResult
from moto.kinesis.models import KinesisBackend, Record, Shard, Stream, kinesis_backends
from moto.kinesis.responses import KinesisResponse
from moto.kinesis.utils import decompose_shard_iterator

ACCOUNT, REGION = "123456789012", "us-east-1"


def relies_on(extension: str, holds: bool, what: str) -> None:
    if not holds:
        pytest.fail(f"testsupport/{extension}.py: moto {version('moto')} no longer {what}", pytrace=False)


def parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def starts_with(function, names: list[str]) -> bool:
    return parameters(function)[: len(names)] == names


@pytest.fixture
def stream():
    """A one-shard stream in moto's Kinesis backend, reached without the server."""
    backend: KinesisBackend = kinesis_backends[ACCOUNT][REGION]
    name = f"internals-{id(object())}"
    backend.create_stream(name, 1)
    yield backend.describe_stream(stream_arn=None, stream_name=name)
    backend.delete_stream(stream_arn=None, stream_name=name)


def test_moto_is_unpatched_in_this_process():
    for method in (Stream.put_record, Shard.put_record, DynamoDBBackend.update_item, StreamRecord.__init__):
        assert method.__module__.startswith("moto."), f"{method.__qualname__} is patched here: the checks below would read the patch"


def test_moto_kinesis_destination(stream):
    name = "moto_kinesis_destination"
    operations = botocore.session.get_session().get_service_model("dynamodb").operation_names
    for action in ("Enable", "Describe", "Disable"):
        relies_on(name, f"{action}KinesisStreamingDestination" in operations and callable(getattr(DynamoHandler, "call_action", None)),
                  f"routes {action}KinesisStreamingDestination to a DynamoHandler method of that name")  # fmt: skip
    relies_on(name, isinstance(DynamoHandler.__dict__.get("dynamodb_backend"), property), "gives DynamoHandler a dynamodb_backend property")
    relies_on(name, issubclass(ActionResult, object) and parameters(ActionResult.__init__)[:2] == ["self", "result"],
              "builds a response from ActionResult(result)")  # fmt: skip
    relies_on(name, starts_with(Table.put_item, ["self", "item_attrs"]), "calls Table.put_item(self, item_attrs, ...)")
    relies_on(name, starts_with(Table.delete_item, ["self", "hash_key", "range_key"]), "calls Table.delete_item(self, hash_key, range_key)")
    relies_on(name, starts_with(Table.get_item, ["self", "hash_key", "range_key"]), "has Table.get_item(self, hash_key, range_key)")
    relies_on(name, {"table_name", "key"} <= set(parameters(DynamoDBBackend.update_item)),
              "names DynamoDBBackend.update_item's arguments table_name and key")  # fmt: skip
    relies_on(name, starts_with(DynamoDBBackend.get_keys_value, ["self", "table", "keys"]), "has DynamoDBBackend.get_keys_value(table, keys)")
    relies_on(name, starts_with(Stream.put_record, ["self", "partition_key", "explicit_hash_key", "data"]),
              "takes Stream.put_record(partition_key, explicit_hash_key, data)")  # fmt: skip
    sequence, shard_id = stream.put_record("p", None, b'{"raw": 1}')
    kept = stream.get_shard(shard_id).records[int(sequence)].data
    relies_on(name, kept == b'{"raw": 1}', f"keeps a record's Data as the bytes Stream.put_record is given (it kept {kept!r})")


def test_moto_kinesis_destination_reads_back_the_bytes_it_put(stream):
    """The other half of the Data contract: moto's server base64-encodes the stored bytes once, on the way out."""
    _, shard_id = stream.put_record("p", None, b"\x00bytes")
    start = {"StreamName": stream.stream_name, "ShardId": shard_id, "ShardIteratorType": "TRIM_HORIZON"}
    try:
        iterator = _kinesis_call("GetShardIterator", start)["ShardIterator"]
        sent = _kinesis_call("GetRecords", {"ShardIterator": iterator})["Records"][0]["Data"]
    except Exception as error:  # noqa: BLE001 - whatever moto does instead, it is this one finding
        sent = f"{type(error).__name__}: {error}"
    relies_on("moto_kinesis_destination", _base64(sent) == b"\x00bytes", f"answers GetRecords with the stored bytes in base64 (it sent {sent!r})")


def test_moto_kinesis_retention(stream):
    name = "moto_kinesis_retention"
    relies_on(name, callable(getattr(BaseResponse, "call_action", None)), "dispatches every request through BaseResponse.call_action")
    relies_on(name, isinstance(KinesisResponse.__dict__.get("kinesis_backend"), property), "gives KinesisResponse a kinesis_backend property")
    relies_on(name, starts_with(Shard.put_record, ["self", "partition_key", "data", "explicit_hash_key"]),
              "calls Shard.put_record(partition_key, data, explicit_hash_key)")  # fmt: skip
    relies_on(name, starts_with(Record.__init__, ["self", "partition_key", "data", "sequence_number", "explicit_hash_key"]),
              "builds Record(partition_key, data, sequence_number, explicit_hash_key)")  # fmt: skip
    relies_on(name, starts_with(Shard.get_records, ["self", "last_sequence_id", "limit"]), "calls Shard.get_records(last_sequence_id, limit)")
    first, shard_id = stream.put_record("p", None, b"a")
    stream.put_record("p", None, b"b")
    shard = stream.get_shard(shard_id)
    relies_on(name, list(shard.records) == [int(first), int(first) + 1], "keeps Shard.records keyed by int sequence number, oldest first")
    found = shard.get_records(first, 10)
    relies_on(name, len(found) == 3 and found[1] == int(first) + 1, "returns (records, read up to, millis behind) from Shard.get_records")


def test_moto_kinesis_resharding(stream):
    name = "moto_kinesis_resharding"
    relies_on(name, starts_with(Stream.get_shard_for_key, ["self", "partition_key", "explicit_hash_key"]),
              "routes a record through Stream.get_shard_for_key(partition_key, explicit_hash_key)")  # fmt: skip
    relies_on(name, starts_with(Stream.split_shard, ["self", "shard_to_split", "new_starting_hash_key"]), "has Stream.split_shard(shard_to_split, new_starting_hash_key)")
    relies_on(name, starts_with(Stream.merge_shards, ["self", "shard_to_merge", "adjacent_shard_to_merge"]), "has Stream.merge_shards(shard_to_merge, adjacent_shard_to_merge)")
    relies_on(name, starts_with(Shard.__init__, ["self", "shard_id", "starting_hash", "ending_hash", "parent", "adjacent_parent"]),
              "builds Shard(shard_id, starting_hash, ending_hash, parent, adjacent_parent)")  # fmt: skip
    relies_on(name, starts_with(KinesisBackend.get_records, ["self", "stream_arn", "shard_iterator", "limit"]),
              "has KinesisBackend.get_records(stream_arn, shard_iterator, limit)")  # fmt: skip
    shard = next(iter(stream.shards.values()))
    fields = ("is_open", "starting_hash", "ending_hash", "_shard_id", "parent", "adjacent_parent")
    relies_on(name, all(hasattr(shard, field) for field in fields), f"gives a Shard the fields {', '.join(fields)}")
    iterator = kinesis_backends[ACCOUNT][REGION].get_shard_iterator(None, stream.stream_name, shard.shard_id, "TRIM_HORIZON", None, None)
    relies_on(name, list(decompose_shard_iterator(iterator))[:2] == [stream.stream_name, shard.shard_id],
              "decomposes a shard iterator into (stream name, shard id, sequence)")  # fmt: skip
    next_iterator, records, millis = kinesis_backends[ACCOUNT][REGION].get_records(None, iterator, 10)
    relies_on(name, isinstance(next_iterator, str) and records == [], "returns (next iterator, records, millis behind) from KinesisBackend.get_records")


def test_moto_stream_reenable():
    name = "moto_stream_reenable"
    relies_on(name, starts_with(DynamoDBBackend.update_table_streams, ["self", "table", "stream_specification"]),
              "has DynamoDBBackend.update_table_streams(table, stream_specification)")  # fmt: skip
    relies_on(name, starts_with(Table.set_stream_specification, ["self", "streams"]), "has Table.set_stream_specification(streams)")
    source = inspect.getsource(Table)
    for field in ("latest_stream_label", "stream_shard", "stream_specification"):
        relies_on(name, f"self.{field}" in source, f"keeps the table's stream in Table.{field}")


def test_moto_stream_binary_keys():
    relies_on("moto_stream_binary_keys", parameters(StreamRecord.__init__) == ["self", "table", "stream_type", "event_name", "old", "new", "seq"],
              "builds StreamRecord(table, stream_type, event_name, old, new, seq)")  # fmt: skip
    relies_on("moto_stream_binary_keys", '"Keys"' in inspect.getsource(StreamRecord.__init__), "writes the change's Keys into StreamRecord.record['dynamodb']")


def test_moto_scan_binary_segments():
    relies_on("moto_scan_binary_segments", parameters(Item.is_within_segment) == ["self", "segments"], "asks Item.is_within_segment(segments) during a Scan")


def test_moto_dynamodb_plain_json(monkeypatch):
    """Scan, Query, GetItem, BatchGetItem, PutItem and BatchWriteItem answers of every type, both ways: the same JSON."""
    from migrator.items import to_dynamodb_json
    from testsupport.all_types import ATTRIBUTES, KEY_SCHEMA, all_types_items
    from testsupport.moto_dynamodb_plain_json import _plain_json_first

    table = f"internals-{id(object())}"
    items = [to_dynamodb_json(item) for item in all_types_items()]
    _dynamodb_call("CreateTable", {"TableName": table, "KeySchema": KEY_SCHEMA, "AttributeDefinitions": ATTRIBUTES,
                                   "BillingMode": "PAY_PER_REQUEST"})  # fmt: skip
    key = {name: items[0][name] for name in ("pk", "sk")}
    requests = [
        ("BatchWriteItem", {"RequestItems": {table: [{"PutRequest": {"Item": item}} for item in items[:20]]},
                            "ReturnConsumedCapacity": "TOTAL"}),  # fmt: skip
        ("PutItem", {"TableName": table, "Item": items[0], "ReturnValues": "ALL_OLD", "ReturnConsumedCapacity": "TOTAL"}),
        ("Scan", {"TableName": table, "ReturnConsumedCapacity": "TOTAL", "Limit": 5}),
        ("Scan", {"TableName": table, "Segment": 1, "TotalSegments": 3}),
        ("Query", {"TableName": table, "KeyConditionExpression": "pk = :pk", "ExpressionAttributeValues": {":pk": key["pk"]}}),
        ("GetItem", {"TableName": table, "Key": key}),
        ("BatchGetItem", {"RequestItems": {table: {"Keys": [key]}}}),
    ]
    for item in items[20:]:
        _dynamodb_call("PutItem", {"TableName": table, "Item": item})
    by_moto = [_dynamodb_call(action, body, raw=True) for action, body in requests[2:]]
    monkeypatch.setattr(DynamoResult, "execute_result", _plain_json_first(DynamoResult.execute_result))
    plain = [_dynamodb_call(action, body, raw=True) for action, body in requests[2:]]
    for (action, _), moto_answer, plain_answer in zip(requests[2:], by_moto, plain):
        relies_on("moto_dynamodb_plain_json", json.loads(moto_answer[1]) == json.loads(plain_answer[1]),
                  f"writes a {action} answer as the plain JSON of its DynamoResult")  # fmt: skip
        relies_on("moto_dynamodb_plain_json", moto_answer[0] == plain_answer[0], f"answers {action} with {plain_answer[0]}")
    written = [json.loads(_dynamodb_call(action, body, raw=True)[1]) for action, body in requests[:2]]
    monkeypatch.undo()
    rewritten = [json.loads(_dynamodb_call(action, body, raw=True)[1]) for action, body in requests[:2]]
    relies_on("moto_dynamodb_plain_json", written == rewritten, "writes BatchWriteItem and PutItem answers as their plain JSON")


def test_moto_scan_pages(monkeypatch):
    """Paging through tables keyed S+N, N and B, whole and in segments, with limits and a filter: the same pages both ways."""
    from migrator.items import to_dynamodb_json
    from testsupport.all_types import ATTRIBUTES, KEY_SCHEMA, all_types_items
    from testsupport.moto_scan_binary_segments import is_within_segment
    from testsupport.moto_scan_pages import _from_the_start_key, _page_candidates_first

    relies_on("moto_scan_pages", {"exclusive_start_key", "index_name", "segments"} <= set(parameters(Table.scan)),
              "takes exclusive_start_key, index_name and segments in Table.scan")  # fmt: skip
    relies_on("moto_scan_pages", "self.all_items()" in inspect.getsource(Table.scan), "reads a Scan's items through Table.all_items()")
    monkeypatch.setattr(Item, "is_within_segment", is_within_segment)  # binary hash keys, as in the emulator
    numbers = ["-12.5", "0", "7", "10", "1E+3", "99999999999999999999999999999999999999", "-1E-130", "3.14"]
    tables = {
        "S+N": (KEY_SCHEMA, ATTRIBUTES, [to_dynamodb_json(item) for item in all_types_items()]),
        "N": ([{"AttributeName": "id", "KeyType": "HASH"}], [{"AttributeName": "id", "AttributeType": "N"}],
              [{"id": {"N": n}, "v": {"N": str(i)}} for i, n in enumerate(numbers + [str(i * 37 - 500) for i in range(22)])]),
        "B": ([{"AttributeName": "id", "KeyType": "HASH"}], [{"AttributeName": "id", "AttributeType": "B"}],
              [{"id": {"B": base64.b64encode(bytes([i, 255 - i, i % 7])).decode()}, "v": {"N": str(i)}} for i in range(40)]),
    }  # fmt: skip
    scans = [{}, {"Limit": 2}, {"Segment": 1, "TotalSegments": 3, "Limit": 4}, {"Segment": 0, "TotalSegments": 2},
             {"Limit": 5, "FilterExpression": "attribute_exists(v)"}]  # fmt: skip
    names = {}
    for kind, (schema, attributes, items) in tables.items():
        names[kind] = f"internals-scan-{kind}-{id(object())}"
        _dynamodb_call("CreateTable", {"TableName": names[kind], "KeySchema": schema, "AttributeDefinitions": attributes,
                                       "BillingMode": "PAY_PER_REQUEST"})  # fmt: skip
        for item in items:
            _dynamodb_call("PutItem", {"TableName": names[kind], "Item": item})
    by_moto = {(kind, i): _scan_pages(name, scan) for kind, name in names.items() for i, scan in enumerate(scans)}
    monkeypatch.setattr(Table, "all_items", _page_candidates_first(Table.all_items))
    monkeypatch.setattr(Table, "scan", _from_the_start_key(Table.scan))
    for (kind, i), pages in by_moto.items():
        relies_on("moto_scan_pages", _scan_pages(names[kind], scans[i]) == pages,
                  f"pages through a table keyed {kind} as the extension does, with {scans[i]}")  # fmt: skip
    assert len(by_moto["S+N", 1]) > 2 and len(by_moto["N", 1]) > 5 and len(by_moto["B", 2]) > 1, "the scans above read one page each: nothing compared"


def _scan_pages(table: str, scan: dict) -> list[dict]:
    pages, request = [], {"TableName": table, **scan}
    while True:
        page = _dynamodb_call("Scan", request)
        pages.append(page)
        if "LastEvaluatedKey" not in page:
            return pages
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def test_moto_table_lock():
    for operation in ("put_item", "update_item", "delete_item", "get_item", "scan", "query"):
        relies_on("moto_table_lock", callable(getattr(DynamoDBBackend, operation, None)), f"serves items through DynamoDBBackend.{operation}")


def _base64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        return None


def _dynamodb_call(action: str, body: dict, raw: bool = False):
    """One DynamoDB action through moto's whole server application; its JSON, or (Content-Type, body) when `raw`."""
    return _moto_call("dynamodb", f"DynamoDB_20120810.{action}", "1.0", body, raw)


def _kinesis_call(action: str, body: dict) -> dict:
    return _moto_call("kinesis", f"Kinesis_20131202.{action}", "1.1", body)


def _moto_call(service: str, target: str, json_version: str, body: dict, raw: bool = False):
    """One JSON-protocol action through moto's whole server application, in this process and without a socket."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.test import Client

    response = Client(DomainDispatcherApplication(create_backend_app)).post("/", data=json.dumps(body), headers={
        "X-Amz-Target": target,
        "Content-Type": f"application/x-amz-json-{json_version}",
        "Authorization": f"AWS4-HMAC-SHA256 Credential=test/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0",
    })  # fmt: skip
    assert response.status_code == 200, response.get_data(as_text=True)
    if raw:
        return response.headers.get("Content-Type"), response.get_data(as_text=True)
    return json.loads(response.get_data())
