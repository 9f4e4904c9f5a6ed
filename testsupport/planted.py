"""A pair of tables with a difference of every kind, planted by hand, and what the validator must report.

Each attribute type changed, an attribute on one side only, items missing and extra, a renamed
attribute that differs, expired source items (one of them still in the target).
"""

from __future__ import annotations

import time

from migrator.items import rename_attributes
from testsupport.all_types import KEY_SCHEMA, all_types_items
from testsupport.endpoint import put_items

RENAMES = {"ключ": "key"}  # the all-types unicode item carries "ключ"; the target calls it "key"
NOW = int(time.time())
EXPIRED = {"N": str(NOW - 3600)}


def create_table(client, table: str) -> None:
    client.create_table(
        TableName=table,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}],
        BillingMode="PAY_PER_REQUEST",
    )


def key(pk: str, sk: int = 1) -> dict:
    return {"pk": {"S": pk}, "sk": {"N": str(sk)}}


# Each type in the source, and a different value of it (or of another type) in the target.
TYPES_SOURCE = {
    "s": {"S": "text"}, "n": {"N": "12345678901234567890123456789012345678"}, "b": {"B": b"\x00\x01"},
    "bool": {"BOOL": True}, "null": {"NULL": True}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2.5"]},
    "bs": {"BS": [b"\x01", b"\x02"]}, "l": {"L": [{"N": "1"}, {"S": "x"}]}, "m": {"M": {"k": {"N": "1"}}},
    "same_n": {"N": "1.5"},
}  # fmt: skip
TYPES_TARGET = {
    "s": {"S": "Text"}, "n": {"N": "12345678901234567890123456789012345679"}, "b": {"B": b"\x00\x02"},
    "bool": {"BOOL": False}, "null": {"BOOL": True}, "ss": {"SS": ["a", "c"]}, "ns": {"NS": ["1", "2.6"]},
    "bs": {"BS": [b"\x01"]}, "l": {"L": [{"S": "x"}, {"N": "1"}]}, "m": {"M": {"k": {"N": "2"}}},
    "same_n": {"N": "1.50"},
}  # fmt: skip


def plant(client, source: str, target: str) -> list[dict]:
    """Fill both tables; returns the source's items the migration would copy (live ones), as the target names them."""
    create_table(client, source)
    create_table(client, target)
    client.update_time_to_live(TableName=source, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
    equal = all_types_items()  # six items, every type, the 38-digit numbers and the ~400 KB item
    differing = [
        dict(key("d-types"), **TYPES_SOURCE),
        dict(key("d-only-in-source"), a={"S": "x"}, gone={"N": "1"}),
        dict(key("d-only-in-target"), a={"S": "x"}),
        dict(key("d-renamed"), ключ={"S": "old"}),
    ]
    missing = [dict(key("m-1"), a={"S": "x"}), dict(key("m-2", 2), a={"S": "y"})]
    expired = [dict(key("x-gone"), expires=EXPIRED), dict(key("x-still-in-target"), expires=EXPIRED)]
    put_items(client, source, equal + differing + missing + expired)
    copied = [rename_attributes(item, RENAMES) for item in equal]
    planted = [
        dict(key("d-types"), **TYPES_TARGET),
        dict(key("d-only-in-source"), a={"S": "x"}),
        dict(key("d-only-in-target"), a={"S": "x"}, new={"BOOL": True}),
        dict(key("d-renamed"), key={"S": "new"}),
    ]
    extra = [dict(key("e-1"), a={"S": "z"})]
    put_items(client, target, copied + planted + extra + [expired[1]])
    return [rename_attributes(item, RENAMES) for item in equal + differing + missing]


EXPECTED_SAMPLES = [
    {"kind": "different", "key": key("d-only-in-source"), "attributes": ["gone"]},
    {"kind": "different", "key": key("d-only-in-target"), "attributes": ["new"]},
    {"kind": "different", "key": key("d-renamed"), "attributes": ["key"]},
    {"kind": "different", "key": key("d-types"), "attributes": ["b", "bool", "bs", "l", "m", "n", "ns", "null", "s", "ss"]},
    {"kind": "extra", "key": key("e-1"), "attributes": []},
    {"kind": "missing", "key": key("m-1"), "attributes": []},
    {"kind": "missing", "key": key("m-2", 2), "attributes": []},
]  # fmt: skip
