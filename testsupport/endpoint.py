"""The test endpoint: its region and keys, boto3 clients of it, config blocks naming it, table reads."""

from __future__ import annotations

from typing import Any

import boto3

from testsupport.sample_data import create_sample_table, make_items, seed


TEST_REGION = "us-east-1"
TEST_ACCESS_KEY = "testing-access-key"
TEST_SECRET_KEY = "testing-secret-key"


def dynamodb_client(endpoint_url: str):
    return aws_client("dynamodb", endpoint_url)


def aws_client(service: str, endpoint_url: str):
    """A boto3 client of the test endpoint, with the test region and keys."""
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name=TEST_REGION,
        aws_access_key_id=TEST_ACCESS_KEY,
        aws_secret_access_key=TEST_SECRET_KEY,
    )


def endpoint_block(endpoint_url: str) -> dict[str, Any]:
    scheme, _, rest = endpoint_url.partition("://")
    host, _, port = rest.rstrip("/").partition(":")
    block: dict[str, Any] = {"host": f"{scheme}://{host}"}
    if port:
        block["port"] = int(port)
    return block


def reaching(endpoint_url: str) -> dict[str, Any]:
    """The region, endpoint and credentials keys of a config block that reaches the test endpoint."""
    return {
        "region": TEST_REGION,
        "endpoint": endpoint_block(endpoint_url),
        "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY},
    }


def side(endpoint_url: str, table: str, **extra: Any) -> dict[str, Any]:
    """A source or target block for a table at the test endpoint."""
    return {"type": "dynamodb", "table": table, **reaching(endpoint_url), **extra}


def scan_all(client, table: str) -> list[dict[str, Any]]:
    items, request = [], {"TableName": table, "ConsistentRead": True}
    while True:
        response = client.scan(**request)
        items.extend(response["Items"])
        if "LastEvaluatedKey" not in response:
            return items
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def table_exists(client, table: str) -> bool:
    return table in list_tables(client)


def list_tables(client) -> list[str]:
    names, request = [], {}
    while True:
        response = client.list_tables(**request)
        names += response["TableNames"]
        if "LastEvaluatedTableName" not in response:
            return names
        request["ExclusiveStartTableName"] = response["LastEvaluatedTableName"]


def put_items(client, table: str, items) -> int:
    return seed(client, table, items)


# One segment of several Scan pages, read slowly enough to watch: 80 items of about 50 KB, so a
# Scan page (1 MB) holds about 20 of them, read at 40 RCU/s, so each page waits about 3 s for the
# one before: the segment takes about 10 s.
SLOW_SEGMENT_ITEMS, SLOW_SEGMENT_PAYLOAD_BYTES = 80, 50_000


def slow_segment_source(client, endpoint_url: str, table: str) -> dict[str, Any]:
    """Create and fill `table` as one slow segment; a source block reading it at that pace."""
    create_sample_table(client, table)
    put_items(client, table, make_items(SLOW_SEGMENT_ITEMS, payload_bytes=SLOW_SEGMENT_PAYLOAD_BYTES))
    return side(
        endpoint_url, table, scanSegments=1, readThroughput=80, throughputReadPercent=0.5, removeConsumedCapacity=True
    )
