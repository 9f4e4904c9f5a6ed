"""The one all-types item set and the one wire-form comparison, shared by every copy test.

Items come from `tests/fixtures/all_types_items.json` (DynamoDB JSON: binary in base64) plus one
item grown to just under DynamoDB's 400 KB limit. Comparison is exact on the wire form:
numbers compare as the strings DynamoDB returned, binary as bytes; only the order of set
members is ignored, since DynamoDB does not keep it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from migrator.items import from_dynamodb_json, item_size_bytes
from testsupport.endpoint import put_items

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "all_types_items.json"
# AWS allows 400 KB (409,600 bytes); moto stops at 405,000 bytes. Stay just under 400,000 so
# the same item is "near the limit" on every endpoint, with room for two index attributes.
LARGE_ITEM_BYTES = 399_900

KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}]


def create_all_types_table(client, table: str) -> str:
    """An on-demand table (pk S, sk N) holding every item of `all_types_items`; its name."""
    client.create_table(TableName=table, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                        BillingMode="PAY_PER_REQUEST")  # fmt: skip
    put_items(client, table, all_types_items())
    return table


def all_types_items() -> list[dict[str, Any]]:
    items = [from_dynamodb_json(doc) for doc in json.loads(FIXTURE.read_text(encoding="utf-8"))]
    items.append(largest_item())
    return items


def largest_item() -> dict[str, Any]:
    """An item of scalar types whose size is LARGE_ITEM_BYTES, just under the 400 KB limit."""
    item = {"pk": {"S": "large"}, "sk": {"N": "400"}, "n": {"N": "1E-130"}, "b": {"B": b"\x00\xff"}, "pad": {"S": ""}}
    item["pad"] = {"S": "x" * (LARGE_ITEM_BYTES - item_size_bytes(item))}
    return item


def normalized(item: dict[str, Any]) -> dict[str, Any]:
    """The item with set members sorted, everything else as is."""
    return {name: _normalized_value(value) for name, value in item.items()}


def _normalized_value(value: dict[str, Any]) -> dict[str, Any]:
    (kind, payload), = value.items()
    if kind in ("SS", "NS", "BS"):
        return {kind: sorted(payload)}
    if kind == "L":
        return {"L": [_normalized_value(v) for v in payload]}
    if kind == "M":
        return {"M": {k: _normalized_value(v) for k, v in payload.items()}}
    if kind == "B":
        return {"B": bytes(payload)}
    return {kind: payload}


def by_key(items: Iterable[dict[str, Any]], key_names: tuple[str, ...] = ("pk", "sk")) -> dict[tuple, dict]:
    """Items indexed by their key values, normalized for comparison."""
    indexed = {}
    for item in items:
        key = tuple(json.dumps(item[name], sort_keys=True, default=repr) for name in key_names)
        indexed[key] = normalized(item)
    return indexed


def assert_same_items(expected: Iterable[dict], actual: Iterable[dict], key_names=("pk", "sk")) -> None:
    """Every expected item present in `actual`, bit-exact, and nothing else there."""
    want, got = by_key(expected, key_names), by_key(actual, key_names)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing, f"{len(missing)} items missing from the target, e.g. {missing[:3]}"
    assert not extra, f"{len(extra)} unexpected items in the target, e.g. {extra[:3]}"
    differing = [k for k in want if want[k] != got[k]]
    assert not differing, f"{len(differing)} items differ, e.g. {differing[0]}: {want[differing[0]]} != {got[differing[0]]}"
