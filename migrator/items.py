"""The DynamoDB item in wire form (`{"name": {"S": "..."}}`), kept as it is end to end.

Items are never turned into Python numbers, floats or Spark rows: a 38-digit `N`, a set or a
binary value goes from Scan to BatchWriteItem exactly as the service sent it. This module
holds the few operations on that form: size, renames, TTL expiry, DynamoDB JSON.
"""

from __future__ import annotations

import base64
import json
from decimal import Decimal, InvalidOperation
from typing import Any, Mapping

from migrator.errors import RenameCollision

Item = dict[str, dict[str, Any]]

# DynamoDB stops deleting items whose TTL is more than five years in the past, so such an
# item is live data forever. (Developer Guide, "Using time to live (TTL) in DynamoDB")
TTL_IGNORED_AFTER_SECONDS = 5 * 365 * 24 * 3600


def item_size_bytes(item: Mapping[str, Mapping[str, Any]]) -> int:
    """The item's size as DynamoDB counts it for capacity units.

    Names count their UTF-8 bytes; values follow the Developer Guide's "Item sizes and
    formats": strings by UTF-8 bytes, numbers by about one byte per two significant
    digits plus one, binary by length, containers 3 bytes plus 1 per element.

    Every item the snapshot writes is sized (its write units), so these functions are written
    for speed: plain loops, the common kinds tested first (docs/benchmarks.md).
    """
    size = 0
    for name, value in item.items():
        size += len(name.encode("utf-8")) + _value_size(value)
    return size


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, payload),) = value.items()
    if kind == "S":
        return len(payload.encode("utf-8"))
    if kind == "N":
        return _number_size(payload)
    if kind == "M":
        size = 3
        for name, inner in payload.items():
            size += 1 + len(name.encode("utf-8")) + _value_size(inner)
        return size
    if kind == "L":
        size = 3
        for inner in payload:
            size += 1 + _value_size(inner)
        return size
    if kind == "B":
        return _binary_size(payload)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum([len(s.encode("utf-8")) for s in payload])
    if kind == "NS":
        return sum([_number_size(n) for n in payload])
    if kind == "BS":
        return sum([_binary_size(b) for b in payload])
    raise ValueError(f"unknown DynamoDB attribute type {kind!r}")


def _binary_size(payload: bytes | str) -> int:
    """Bytes of a binary value, given as bytes (boto3) or as base64 text (DynamoDB JSON)."""
    if isinstance(payload, str):
        return len(payload) * 3 // 4 - payload[-2:].count("=")
    return len(payload)


def _number_size(number: str) -> int:
    """Its significant digits (leading and trailing zeros dropped), two to a byte, plus one byte."""
    if number.isdigit():  # the common case: a plain non-negative integer
        digits = number.strip("0")
    else:
        digits = number.lstrip("+-").replace(".", "").split("e")[0].split("E")[0].strip("0")
    return (max(len(digits), 1) + 1) // 2 + 1


def rename_attributes(item: Item, renames: Mapping[str, str], key_names: tuple[str, ...] = ()) -> Item:
    """Rename top-level attributes; values are untouched.

    An item holding both a rename's `from` and its `to` would come out with one value for
    both, the one whose attribute came last: RenameCollision instead, naming the item by its
    `key_names` (its source key).
    """
    if not renames:
        return item
    renamed = {renames.get(name, name): value for name, value in item.items()}
    if len(renamed) != len(item):  # two names became one: cheap to test, rare to happen
        raise _collision(item, renames, key_names)
    return renamed


def _collision(item: Item, renames: Mapping[str, str], key_names: tuple[str, ...]) -> RenameCollision:
    """The rename whose `to` the item already holds under an attribute that keeps its name."""
    kept = {name for name in item if name not in renames}
    from_name, to_name = next((f, t) for f, t in renames.items() if f in item and t in kept)
    return RenameCollision(describe_key(item, key_names), from_name, to_name)


def describe_key(item: Item, key_names: tuple[str, ...]) -> str:
    """The item's key as one line of DynamoDB JSON, `{"pk": {"S": "a"}, "sk": {"N": "1"}}`, for messages."""
    key = {name: _printable(item[name]) for name in key_names if name in item}
    return json.dumps(key, ensure_ascii=False) if key else "(key unknown)"


def _printable(value: Mapping[str, Any]) -> dict[str, Any]:
    """A key value (S, N or B) as JSON can show it: binary as base64, as DynamoDB JSON writes it
    (the lean client's raw items carry it as base64 text already)."""
    (kind, payload), = value.items()
    if isinstance(payload, (bytes, bytearray)):
        payload = base64.b64encode(payload).decode("ascii")
    return {kind: payload}


def is_expired(item: Item, ttl_attribute: str | None, now_seconds: float) -> bool:
    """True when the item's TTL is an epoch-seconds number in the past that DynamoDB will act on.

    Items without the attribute, or with a non-numeric one, are never expired (DynamoDB
    ignores them too), and neither are items more than five years past their TTL.
    """
    if not ttl_attribute:
        return False
    value = item.get(ttl_attribute)
    if not value or "N" not in value:
        return False
    try:
        expires_at = Decimal(value["N"])
    except InvalidOperation:
        return False
    return now_seconds - TTL_IGNORED_AFTER_SECONDS <= expires_at < Decimal(str(now_seconds))


def key_of(item: Item, key_names: tuple[str, ...]) -> tuple:
    """A hashable identity of the item's primary key, in wire form."""
    return tuple(tuple(sorted((k, _hashable(v)) for k, v in item[name].items())) for name in key_names)


def _hashable(payload: Any) -> Any:
    return bytes(payload) if isinstance(payload, (bytes, bytearray)) else payload


# ---- DynamoDB JSON: the wire form with binary as base64, as exports and fixtures store it ----


def to_dynamodb_json(item: Item) -> dict[str, Any]:
    """Wire-form item to DynamoDB JSON (binary values base64-encoded)."""
    return {name: _encode_value(value) for name, value in item.items()}


def from_dynamodb_json(document: Mapping[str, Any]) -> Item:
    """DynamoDB JSON to a wire-form item (binary values decoded to bytes)."""
    return {name: _decode_value(value) for name, value in document.items()}


def _encode_value(value: Mapping[str, Any]) -> dict[str, Any]:
    (kind, payload), = value.items()
    if kind == "B":
        return {"B": base64.b64encode(payload).decode("ascii")}
    if kind == "BS":
        return {"BS": [base64.b64encode(b).decode("ascii") for b in payload]}
    if kind == "L":
        return {"L": [_encode_value(v) for v in payload]}
    if kind == "M":
        return {"M": {k: _encode_value(v) for k, v in payload.items()}}
    return {kind: payload}


def _decode_value(value: Mapping[str, Any]) -> dict[str, Any]:
    (kind, payload), = value.items()
    if kind == "B":
        return {"B": base64.b64decode(payload)}
    if kind == "BS":
        return {"BS": [base64.b64decode(b) for b in payload]}
    if kind == "L":
        return {"L": [_decode_value(v) for v in payload]}
    if kind == "M":
        return {"M": {k: _decode_value(v) for k, v in payload.items()}}
    return {kind: payload}
