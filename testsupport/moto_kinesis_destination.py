"""Emulator extension: DynamoDB's Kinesis streaming destination, which moto 5.x lacks.

Adds EnableKinesisStreamingDestination, DescribeKinesisStreamingDestination and
DisableKinesisStreamingDestination to moto's DynamoDB, and while a destination is ACTIVE puts
one Kinesis record into its stream for every change of an item (PutItem, UpdateItem,
DeleteItem, BatchWriteItem, TransactWriteItems, PartiQL), in the format DynamoDB documents
("Using Kinesis Data Streams to capture changes to DynamoDB", Developer Guide; the data of
Lambda's KinesisDynamoDBStreamEvent):

    {"awsRegion", "eventID", "eventName": INSERT | MODIFY | REMOVE, "userIdentity": null,
     "recordFormat": "application/json", "tableName", "eventSource": "aws:dynamodb",
     "dynamodb": {"ApproximateCreationDateTime": epoch milliseconds or microseconds,
                  "ApproximateCreationDateTimePrecision", "Keys", "NewImage", "OldImage", "SizeBytes"}}

Both images are always sent (a destination has no view type). As on AWS, a write that
changes nothing, and a delete of a missing item, put no record. The partition key is 32
upper-case hex digits, like the records AWS puts; AWS does not document how it derives them,
so here it is the MD5 of the item's partition key value: every change of one item goes to
one shard, in write order. Behaviour taken from LocalStack's implementation where AWS
documents none: one destination per table at a time, the same ValidationException texts, a
stream that does not exist refused. Enable answers ENABLING and the destination is ACTIVE
from then on; Disable answers DISABLING and Describe then shows DISABLED.

Limits: a failed TransactWriteItems still leaves the records of the operations before the
one that failed; time to live deletions (moto expires no items) are not produced.

Pinned to moto 5.x: it adds methods to DynamoHandler and wraps Table.put_item,
Table.delete_item and DynamoDBBackend.update_item. Install it before moto_table_lock, whose
lock must enclose each change and its record so that records follow the order of writes.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import threading
import time
import uuid
from typing import Any

from moto.core.responses import ActionResult
from moto.dynamodb.exceptions import MockValidationException
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import dynamo_json_dump
from moto.dynamodb.responses import DynamoHandler
from moto.kinesis.exceptions import StreamNotFoundError
from moto.kinesis.models import kinesis_backends

PRECISIONS = ("MILLISECOND", "MICROSECOND")
DEFAULT_PRECISION = "MILLISECOND"  # what records carried before the setting existed
NO_PERMISSION = "User does not have a permission to use kinesis stream"
CANNOT_ENABLE = (
    "Table is not in a valid state to enable Kinesis Streaming Destination:"
    "EnableKinesisStreamingDestination must be DISABLED or ENABLE_FAILED to perform ENABLE operation."
)
CANNOT_DISABLE = (
    "Table is not in a valid state to disable Kinesis Streaming Destination:"
    "DisableKinesisStreamingDestination must be ACTIVE to perform DISABLE operation."
)
_inside_update = threading.local()  # UpdateItem of a new item puts its key first: one record, not two


def install() -> None:
    if hasattr(DynamoDBBackend.update_item, "__wrapped__"):
        raise RuntimeError("install moto_kinesis_destination before moto_table_lock: its lock must enclose the records")
    DynamoHandler.enable_kinesis_streaming_destination = _enable
    DynamoHandler.describe_kinesis_streaming_destination = _describe
    DynamoHandler.disable_kinesis_streaming_destination = _disable
    Table.put_item = _forwarding_put(Table.put_item)
    Table.delete_item = _forwarding_delete(Table.delete_item)
    DynamoDBBackend.update_item = _forwarding_update(DynamoDBBackend.update_item)


# ---- the three API actions ----


def destinations(table: Table) -> dict[str, dict[str, Any]]:
    """The table's destinations by stream ARN, in DescribeKinesisStreamingDestination's shape."""
    if not hasattr(table, "kinesis_destinations"):
        table.kinesis_destinations = {}
    return table.kinesis_destinations


def _enable(handler: DynamoHandler) -> ActionResult:
    table = handler.dynamodb_backend.get_table(handler.body["TableName"])
    stream_arn = handler.body["StreamArn"]
    precision = (handler.body.get("EnableKinesisStreamingConfiguration") or {}).get(
        "ApproximateCreationDateTimePrecision", DEFAULT_PRECISION
    )
    _stream(table, stream_arn)  # refuses a stream that does not exist in the table's account and region
    if any(d["DestinationStatus"] not in ("DISABLED", "ENABLE_FAILED") for d in destinations(table).values()):
        raise MockValidationException(CANNOT_ENABLE)
    destinations(table)[stream_arn] = {
        "StreamArn": stream_arn,
        "DestinationStatus": "ACTIVE",
        "DestinationStatusDescription": "Stream is active",
        "ApproximateCreationDateTimePrecision": precision,
    }
    return ActionResult({
        "TableName": table.name,
        "StreamArn": stream_arn,
        "DestinationStatus": "ENABLING",
        "EnableKinesisStreamingConfiguration": {"ApproximateCreationDateTimePrecision": precision},
    })


def _describe(handler: DynamoHandler) -> ActionResult:
    table = handler.dynamodb_backend.get_table(handler.body["TableName"])
    found = [dict(d) for d in destinations(table).values()]
    return ActionResult({"TableName": table.name, "KinesisDataStreamDestinations": found})


def _disable(handler: DynamoHandler) -> ActionResult:
    table = handler.dynamodb_backend.get_table(handler.body["TableName"])
    stream_arn = handler.body["StreamArn"]
    _stream(table, stream_arn)
    destination = destinations(table).get(stream_arn)
    if destination is None or destination["DestinationStatus"] != "ACTIVE":
        raise MockValidationException(CANNOT_DISABLE)
    destination.update(DestinationStatus="DISABLED", DestinationStatusDescription="Stream is disabled")
    return ActionResult({
        "TableName": table.name,
        "StreamArn": stream_arn,
        "DestinationStatus": "DISABLING",
        "EnableKinesisStreamingConfiguration": {
            "ApproximateCreationDateTimePrecision": destination["ApproximateCreationDateTimePrecision"]
        },
    })


def _stream(table: Table, stream_arn: str):
    try:
        return kinesis_backends[table.account_id][table.region_name].describe_stream(stream_arn=stream_arn, stream_name=None)
    except (StreamNotFoundError, IndexError):
        raise MockValidationException(NO_PERMISSION) from None


# ---- forwarding every change ----


def _forwarding_put(put_item):
    @functools.wraps(put_item)
    def put(self: Table, item_attrs: dict[str, Any], *args, **kwargs) -> Item:
        old = _current(self, item_attrs)
        new = put_item(self, item_attrs, *args, **kwargs)
        if not getattr(_inside_update, "active", False):
            forward(self, old, new)
        return new

    return put


def _forwarding_delete(delete_item):
    @functools.wraps(delete_item)
    def delete(self: Table, *args, **kwargs) -> Item | None:
        old = delete_item(self, *args, **kwargs)
        if old is not None:
            forward(self, old, None)
        return old

    return delete


def _forwarding_update(update_item):
    signature = inspect.signature(update_item)

    @functools.wraps(update_item)
    def update(self: DynamoDBBackend, *args, **kwargs) -> Item:
        try:
            arguments = signature.bind(self, *args, **kwargs).arguments
            table = self.get_table(arguments["table_name"])
            hash_value, range_value = self.get_keys_value(table, arguments["key"])
            old = copy.deepcopy(table.get_item(hash_value, range_value))  # updated in place
        except Exception:  # noqa: BLE001 - a request moto refuses: let update_item say why
            return update_item(self, *args, **kwargs)
        _inside_update.active = True
        try:
            new = update_item(self, *args, **kwargs)
        finally:
            _inside_update.active = False
        forward(table, old, new)
        return new

    return update


def _current(table: Table, item_attrs: dict[str, Any]) -> Item | None:
    """The item a put replaces; None when there is none or the put is going to be refused."""
    try:
        hash_value = DynamoType(item_attrs[table.hash_key_attr])
        range_value = DynamoType(item_attrs[table.range_key_attr]) if table.range_key_attr else None
        return table.get_item(hash_value, range_value)
    except Exception:  # noqa: BLE001 - put_item itself reports what is wrong with the item
        return None


def forward(table: Table, old: Item | None, new: Item | None) -> None:
    """Put the change's record into every ACTIVE destination of the table."""
    active = [d for d in destinations(table).values() if d["DestinationStatus"] == "ACTIVE"]
    if not active:
        return
    old_image = old.to_json()["Attributes"] if old is not None else None
    new_image = new.to_json()["Attributes"] if new is not None else None
    if old_image == new_image:
        return  # nothing changed: DynamoDB writes no record
    now_ns = time.time_ns()
    item = new if new is not None else old
    keys = {table.hash_key_attr: item.hash_key.to_json()}
    if table.range_key_attr:
        keys[table.range_key_attr] = item.range_key.to_json()
    partition_key = hashlib.md5(dynamo_json_dump(keys[table.hash_key_attr]).encode()).hexdigest().upper()
    for destination in active:
        precision = destination["ApproximateCreationDateTimePrecision"]
        data = record(table, keys, old_image, new_image, now_ns, precision)
        try:
            _stream(table, destination["StreamArn"]).put_record(partition_key, None, data)
        except MockValidationException:  # the stream was deleted: the destination cannot deliver
            destination.update(DestinationStatus="DISABLED", DestinationStatusDescription="Stream does not exist")


def record(
    table: Table,
    keys: dict[str, Any],
    old_image: dict[str, Any] | None,
    new_image: dict[str, Any] | None,
    now_ns: int,
    precision: str,
) -> bytes:
    """One change as DynamoDB writes it to Kinesis: the record's Data."""
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": now_ns // (1_000 if precision == "MICROSECOND" else 1_000_000),
        "ApproximateCreationDateTimePrecision": precision,
        "Keys": keys,
    }
    if new_image is not None:
        change["NewImage"] = new_image
    if old_image is not None:
        change["OldImage"] = old_image
    change["SizeBytes"] = len(dynamo_json_dump({k: v for k, v in change.items() if k in ("Keys", "NewImage", "OldImage")}))
    event_name = "INSERT" if old_image is None else "REMOVE" if new_image is None else "MODIFY"
    document = {
        "awsRegion": table.region_name,
        "eventID": str(uuid.uuid4()),
        "eventName": event_name,
        "userIdentity": None,
        "recordFormat": "application/json",
        "tableName": table.name,
        "dynamodb": change,
        "eventSource": "aws:dynamodb",
    }
    return dynamo_json_dump(document).encode("utf-8")
