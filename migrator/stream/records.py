"""The one normalized change record, and how a DynamoDB Streams record becomes one.

Both change sources emit a `ChangeRecord` (DynamoDB Streams records here, Kinesis Data
Streams records in `kinesis_records`): the key, whether the item was put or deleted, its new
image in wire form when the record carries one, and a sort key (`order`) that places it among
the other changes of the same key. Items and keys stay in wire form; numbers are never converted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Mapping

from migrator.items import Item, from_dynamodb_json, key_of

PUT = "PUT"
DELETE = "DELETE"
OPERATIONS = (PUT, DELETE)

VIEW_TYPES = ("KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")
# Only these view types carry the item after the change ("Change data capture for DynamoDB
# Streams", Developer Guide: StreamViewType). With KEYS_ONLY and OLD_IMAGE an insert or
# update says only which key changed.
VIEW_TYPES_WITH_NEW_IMAGE = frozenset({"NEW_IMAGE", "NEW_AND_OLD_IMAGES"})

_OPERATION_OF_EVENT = {"INSERT": PUT, "MODIFY": PUT, "REMOVE": DELETE}

# Deletions by Time to Live carry userIdentity {"Type": "Service", "PrincipalId":
# "dynamodb.amazonaws.com"} (API reference, `Identity`; Lambda events spell the same
# fields `type` and `principalId`). Deletions by users carry no userIdentity.
TTL_IDENTITY = ("service", "dynamodb.amazonaws.com")

# Global tables: a write replicated from another region's replica shows in this region's
# stream as if it were made here. Its record carries the replication service as
# userIdentity (principal "replication.dynamodb.amazonaws.com", the service principal global
# tables replicate with); replicas of the legacy version 2017.11.29 instead stamp every item
# with `aws:rep:updateregion`, the region the write was made in.
REPLICATION_PRINCIPAL = "replication.dynamodb.amazonaws.com"
LEGACY_REGION_ATTRIBUTE = "aws:rep:updateregion"


@dataclass(frozen=True)
class ChangeRecord:
    """One change of one item: the state after the change, or a note to read it from the source.

    `operation` is PUT (the item exists after the change) or DELETE. A PUT without
    `new_image` has `needs_lookup` set: the stream did not carry the new item, so the applier
    reads the item's current state from the source (a strongly consistent GetItem) and puts
    it, or deletes the key when it is gone. `order` sorts the changes of one key: for
    DynamoDB Streams (lineage depth, sequence number as an int); for Kinesis (creation time
    in integer microseconds, lineage depth, sequence number as an int). The changes of one
    key come from one stream, so their orders always have the same shape.
    """

    key: tuple
    keys: Item = field(hash=False)
    operation: str
    new_image: Item | None = field(hash=False)
    shard_id: str
    sequence_number: str
    created_at: float
    order: tuple
    user_identity_is_ttl: bool = False
    needs_lookup: bool = False
    replicated: bool = False  # a global table's write made in another region

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {OPERATIONS}, not {self.operation!r}")
        if self.operation == DELETE and (self.new_image is not None or self.needs_lookup):
            raise ValueError("a DELETE carries neither a new image nor a lookup")
        if self.operation == PUT and (self.new_image is None) != self.needs_lookup:
            raise ValueError("a PUT carries a new image or needs a lookup, exactly one of the two")


def from_dynamodb_stream_record(
    record: Mapping[str, Any],
    key_names: tuple[str, ...],
    shard_id: str,
    depth: int,
    view_type: str,
    region: str | None = None,
) -> ChangeRecord:
    """Normalize one record of GetRecords' `Records`, as boto3 returns it (binary as bytes).

    `depth` is the shard's lineage depth (`migrator.stream.shards.depth`) and `view_type` the
    stream's StreamViewType; `region` is the source table's, to tell a legacy global table's
    writes replicated from elsewhere. An INSERT or MODIFY without a new image (KEYS_ONLY, OLD_IMAGE,
    or an image missing from the record) becomes a PUT that needs a lookup, never a guess.
    """
    if view_type not in VIEW_TYPES:
        raise ValueError(f"unknown StreamViewType {view_type!r}; expected one of {VIEW_TYPES}")
    change = record["dynamodb"]
    sequence_number = change["SequenceNumber"]
    where = f"stream record {sequence_number} of shard {shard_id}"
    operation = operation_of(record.get("eventName"), where)
    keys = checked_keys(dict(change.get("Keys") or {}), key_names, where)
    new_image = None
    if operation == PUT and view_type in VIEW_TYPES_WITH_NEW_IMAGE and change.get("NewImage") is not None:
        new_image = dict(change["NewImage"])
    return ChangeRecord(
        key=key_of(keys, key_names),
        keys=keys,
        operation=operation,
        new_image=new_image,
        shard_id=shard_id,
        sequence_number=sequence_number,
        created_at=_epoch_seconds(change.get("ApproximateCreationDateTime"), where),
        order=(depth, int(sequence_number)),
        user_identity_is_ttl=_is_ttl_identity(record.get("userIdentity")),
        needs_lookup=operation == PUT and new_image is None,
        replicated=_is_replicated(record.get("userIdentity"), change, region),
    )


def operation_of(event_name: Any, where: str) -> str:
    """PUT or DELETE for a record's eventName (the same three names in both kinds of stream)."""
    operation = _OPERATION_OF_EVENT.get(event_name)
    if operation is None:
        raise ValueError(f"{where}: unknown eventName {event_name!r}")
    return operation


def checked_keys(keys: Item, key_names: tuple[str, ...], where: str) -> Item:
    """A record's Keys, refused when a key attribute of the table is not among them."""
    missing = [name for name in key_names if name not in keys]
    if missing:
        raise ValueError(f"{where}: Keys lacks the key attribute(s) {', '.join(missing)}")
    return keys


def stream_record_from_json(document: Mapping[str, Any]) -> dict[str, Any]:
    """A record as the HTTP API sends it (binary as base64) to the form boto3 returns.

    Keys and images are decoded with `from_dynamodb_json`; the creation time stays the
    epoch-seconds number of the wire, which `from_dynamodb_stream_record` accepts as well
    as boto3's datetime.
    """
    record = dict(document)
    change = dict(record["dynamodb"])
    for name in ("Keys", "NewImage", "OldImage"):
        if change.get(name) is not None:
            change[name] = from_dynamodb_json(change[name])
    record["dynamodb"] = change
    return record


def _identity(identity: Mapping[str, Any] | None) -> tuple[str, Any]:
    """(type in lower case, principal) of a userIdentity, spelled either way."""
    fields = {name.lower(): value for name, value in (identity or {}).items()}
    return str(fields.get("type", "")).lower(), fields.get("principalid")


def _is_ttl_identity(identity: Mapping[str, Any] | None) -> bool:
    return bool(identity) and _identity(identity) == TTL_IDENTITY


def _is_replicated(identity: Mapping[str, Any] | None, change: Mapping[str, Any], region: str | None) -> bool:
    if _identity(identity)[1] == REPLICATION_PRINCIPAL:
        return True
    image = change.get("NewImage") or change.get("OldImage") or {}
    origin = image.get(LEGACY_REGION_ATTRIBUTE, {}).get("S")
    return bool(region and origin and origin != region)


def _epoch_seconds(value: Any, where: str) -> float:
    """ApproximateCreationDateTime as epoch seconds: boto3 gives a datetime, the wire a number."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            try:
                return datetime.fromisoformat(value).timestamp()
            except ValueError:
                pass
    raise ValueError(f"{where}: ApproximateCreationDateTime {value!r} is not a time")
