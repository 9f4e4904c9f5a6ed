"""How one Kinesis Data Streams record carrying a DynamoDB change becomes a `ChangeRecord`.

With a table's Kinesis streaming destination enabled, DynamoDB puts one Kinesis record per
item change. Its Data is a JSON document ("Using Kinesis Data Streams to capture changes to
DynamoDB", DynamoDB Developer Guide; Lambda's KinesisDynamoDBStreamEvent):

    {"awsRegion", "eventID", "eventName": INSERT | MODIFY | REMOVE, "userIdentity",
     "recordFormat": "application/json", "tableName", "eventSource": "aws:dynamodb",
     "dynamodb": {"ApproximateCreationDateTime", "ApproximateCreationDateTimePrecision",
                  "Keys", "NewImage", "OldImage", "SizeBytes"}}

with attribute values in DynamoDB JSON (binary as base64). Unlike a DynamoDB Streams record
it has no SequenceNumber and no StreamViewType: both images are sent, so only a record that
lacks its NewImage needs a lookup.

Order. Kinesis keeps records in order only within a shard, and DynamoDB says its records
"might appear in a different sequence than the item changes occurred" and "more than once":
"check the ApproximateCreationDateTime attribute to identify the approximate order ... and to
identify duplicate records". So a key's changes sort by that time first, as an exact integer
of microseconds (the destination's precision is MILLISECOND or MICROSECOND; the migrator asks
for microseconds). Equal times, possible at millisecond precision, fall back to what Kinesis
orders: the shard's lineage depth (a child shard's records follow its parent's), then the
sequence number. A duplicate has the same time and images as its original, so whichever copy
wins is the same change; a stale one sorts before the newer change and loses. Dropping stale
or repeated changes across micro-batches needs each key's last applied `order`, which the
streaming layer keeps.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Mapping

from migrator.items import from_dynamodb_json, key_of
from migrator.stream.records import (
    PUT,
    ChangeRecord,
    _is_replicated,
    _is_ttl_identity,
    checked_keys,
    operation_of,
)

EVENT_SOURCE = "aws:dynamodb"
PRECISIONS = ("MILLISECOND", "MICROSECOND")
_MICROS_PER = {"MILLISECOND": 1_000, "MICROSECOND": 1}
# Without a precision field (records from before the setting existed carry milliseconds), the
# magnitude decides: 10**14 is year 5138 in milliseconds and 1973 in microseconds.
_MICROSECOND_FLOOR = 10**14

NOT_A_CHANGE = "not a DynamoDB change"
OTHER_TABLE = "another table's change"


class SkippedRecord(ValueError):
    """A Kinesis record that is no change of the replicated table: count it, log it, read on.

    `kind` is NOT_A_CHANGE (the payload is not DynamoDB's: another producer writes to the
    stream) or OTHER_TABLE (several tables may stream into one Kinesis stream).
    """

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind

    def __reduce__(self):  # raised on executors: must pickle back to the driver intact
        return type(self), (str(self), self.kind)


def from_kinesis_record(
    record: Mapping[str, Any],
    key_names: tuple[str, ...],
    shard_id: str,
    depth: int,
    table: str | None = None,
    region: str | None = None,
) -> ChangeRecord:
    """Normalize one record of Kinesis GetRecords' `Records`, as boto3 returns it (Data as bytes).

    `depth` is the shard's lineage depth; `table` the source table, whose changes alone are
    taken (others raise SkippedRecord); `region` the source table's, to tell a legacy global
    table's writes replicated from elsewhere (default: the record's awsRegion). A payload that
    is not a DynamoDB change raises SkippedRecord; a DynamoDB change this function cannot read
    (unknown eventName, a key attribute missing, no creation time) raises ValueError, never a
    skip, because skipping it would lose the change.
    """
    sequence_number = record["SequenceNumber"]
    where = f"Kinesis record {sequence_number} of shard {shard_id}"
    document = _payload(record.get("Data"), where)
    if table is not None and document.get("tableName") not in (None, table):
        raise SkippedRecord(f"{where}: a change of table {document.get('tableName')!r}, not {table!r}", OTHER_TABLE)
    change = document["dynamodb"]
    operation = operation_of(document.get("eventName"), where)
    keys = checked_keys(from_dynamodb_json(change.get("Keys") or {}), key_names, where)
    new_image = None
    if operation == PUT and change.get("NewImage") is not None:
        new_image = from_dynamodb_json(change["NewImage"])
    created_us = creation_micros(change, where)
    return ChangeRecord(
        key=key_of(keys, key_names),
        keys=keys,
        operation=operation,
        new_image=new_image,
        shard_id=shard_id,
        sequence_number=sequence_number,
        created_at=created_us / 1_000_000,
        order=(created_us, depth, int(sequence_number)),
        user_identity_is_ttl=_is_ttl_identity(document.get("userIdentity")),
        needs_lookup=operation == PUT and new_image is None,
        replicated=_is_replicated(document.get("userIdentity"), change, region or document.get("awsRegion")),
    )


def creation_micros(change: Mapping[str, Any], where: str = "record") -> int:
    """`dynamodb.ApproximateCreationDateTime` as integer epoch microseconds, whatever its precision."""
    value = change.get("ApproximateCreationDateTime")
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)) or value != int(value) or value < 0:
        raise ValueError(f"{where}: ApproximateCreationDateTime {value!r} is not a time in epoch units")
    value = int(value)
    precision = change.get("ApproximateCreationDateTimePrecision")
    if precision is None:
        precision = "MICROSECOND" if value >= _MICROSECOND_FLOOR else "MILLISECOND"
    if precision not in PRECISIONS:
        raise ValueError(f"{where}: unknown ApproximateCreationDateTimePrecision {precision!r}")
    return value * _MICROS_PER[precision]


def kinesis_record_from_json(document: Mapping[str, Any]) -> dict[str, Any]:
    """A GetRecords record as the HTTP API sends it (Data as base64, times as epoch seconds) to boto3's form."""
    record = dict(document)
    record["Data"] = base64.b64decode(document["Data"])
    arrival = document.get("ApproximateArrivalTimestamp")
    if isinstance(arrival, (int, float)):
        record["ApproximateArrivalTimestamp"] = datetime.fromtimestamp(arrival, tz=timezone.utc)
    return record


def _payload(data: Any, where: str) -> dict[str, Any]:
    """The DynamoDB change document in a record's Data, or SkippedRecord saying why it is none."""
    if isinstance(data, str):  # a record left in wire form
        data = base64.b64decode(data)
    try:
        document = json.loads(bytes(data).decode("utf-8"))
    except (TypeError, ValueError):
        raise SkippedRecord(f"{where}: the data is not JSON text", NOT_A_CHANGE) from None
    if not isinstance(document, dict) or document.get("eventSource") != EVENT_SOURCE:
        source = document.get("eventSource") if isinstance(document, dict) else None
        raise SkippedRecord(f"{where}: eventSource is {source!r}, not {EVENT_SOURCE!r}", NOT_A_CHANGE)
    if not isinstance(document.get("dynamodb"), dict):
        raise SkippedRecord(f"{where}: the change has no 'dynamodb' object", NOT_A_CHANGE)
    return document
