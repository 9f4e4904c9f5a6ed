"""Deterministic sample items using every DynamoDB type, for the demo, benchmarks and tests.

`make_item(i)` is the same item for the same i on every run, so a copy can be checked
against a fresh generation as well as against the source table.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

SAMPLE_KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
SAMPLE_ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}]


def make_item(i: int, payload_bytes: int = 200) -> dict[str, dict[str, Any]]:
    """Item number i: a hash+range key and one attribute of every type, about 500 bytes."""
    digest = hashlib.sha256(str(i).encode()).digest()
    return {
        "pk": {"S": f"user#{i % 997:04d}"},
        "sk": {"N": str(i)},
        "name": {"S": f"Ünïcødé naïve café #{i} — 東京 🚀"},
        "big": {"N": f"{i % 9 + 1}{i:037d}"[:38]},  # 38 significant digits
        "tiny": {"N": f"-{i % 9 + 1}E-130"},
        "huge": {"N": f"9.{i:05d}E+125"},
        "blob": {"B": digest},
        "tags": {"SS": [f"t{i % 5}", f"t{i % 7 + 10}", "common"]},
        "scores": {"NS": [str(i), "3.14159265358979323846264338327950288", f"-{i % 3 + 1}"]},
        "blobs": {"BS": [digest[:8], digest[8:16]]},
        "active": {"BOOL": i % 2 == 0},
        "nothing": {"NULL": True},
        "nested": {
            "M": {
                "list": {"L": [{"N": str(i)}, {"S": "x"}, {"NULL": True}, {"M": {"deep": {"B": digest[:4]}}}]},
                "ключ": {"S": "значение"},
            }
        },
        "payload": {"S": (digest.hex() * (payload_bytes // 64 + 1))[:payload_bytes]},
    }


def make_items(count: int, start: int = 0, payload_bytes: int = 200) -> Iterable[dict[str, dict[str, Any]]]:
    return (make_item(i, payload_bytes) for i in range(start, start + count))


def create_sample_table(client: Any, table: str) -> None:
    """An on-demand hash+range table shaped for `make_item`."""
    client.create_table(
        TableName=table,
        KeySchema=SAMPLE_KEY_SCHEMA,
        AttributeDefinitions=SAMPLE_ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST",
    )


def seed(client: Any, table: str, items: Iterable[dict[str, dict[str, Any]]], threads: int = 8) -> int:
    """Write items with BatchWriteItem from a few threads; return how many were written."""
    from concurrent.futures import ThreadPoolExecutor

    batches: list[list[dict]] = []
    batch: list[dict] = []
    for item in items:
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25:
            batches.append(batch)
            batch = []
    if batch:
        batches.append(batch)

    def write(requests: list[dict]) -> None:
        pending = {table: requests}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write, batches))
    return sum(len(b) for b in batches)
