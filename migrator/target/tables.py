"""Table descriptions: read the source's, create the target from it, refuse a mismatched target.

The target gets the source's key schema, attribute definitions, GSIs and LSIs (with their
projections), renames applied to every attribute name. Billing follows ScyllaDB Migrator:
`target.billingMode` when set, else the source's mode, with the source's provisioned
capacity copied for PROVISIONED tables and indexes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

from migrator import errors
from migrator.aws import translated

log = logging.getLogger(__name__)

TABLE_ACTIVE_TIMEOUT_SECONDS = 600


@dataclass(frozen=True)
class TableInfo:
    """What the migrator needs from DescribeTable."""

    name: str
    key_schema: tuple[tuple[str, str], ...]  # ((attribute, HASH|RANGE), ...)
    attribute_types: Mapping[str, str]  # attribute -> S|N|B
    billing_mode: str
    read_capacity: int
    write_capacity: int
    size_bytes: int
    item_count: int
    description: Mapping[str, Any]  # the raw DescribeTable "Table" object

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.key_schema)

    def render_keys(self) -> str:
        return ", ".join(f"{name} ({self.attribute_types.get(name, '?')}, {kind})" for name, kind in self.key_schema)


def describe_table(client: Any, table: str, role: str) -> TableInfo | None:
    """DescribeTable, or None when the table does not exist."""
    try:
        with translated("describing", f"{role} table {table!r}"):
            response = client.describe_table(TableName=table)
    except errors.ResourceNotFound:
        return None
    return _table_info(response["Table"])


def _table_info(table: Mapping[str, Any]) -> TableInfo:
    throughput = table.get("ProvisionedThroughput") or {}
    billing = (table.get("BillingModeSummary") or {}).get("BillingMode")
    if billing is None:
        billing = "PROVISIONED" if throughput.get("ReadCapacityUnits") else "PAY_PER_REQUEST"
    return TableInfo(
        name=table["TableName"],
        key_schema=tuple((k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]),
        attribute_types={a["AttributeName"]: a["AttributeType"] for a in table.get("AttributeDefinitions", [])},
        billing_mode=billing,
        read_capacity=int(throughput.get("ReadCapacityUnits") or 0),
        write_capacity=int(throughput.get("WriteCapacityUnits") or 0),
        size_bytes=int(table.get("TableSizeBytes") or 0),
        item_count=int(table.get("ItemCount") or 0),
        description=table,
    )


def planned_info(request: Mapping[str, Any]) -> TableInfo:
    """The TableInfo a CreateTable request would give, before the table exists (a dry run's plan)."""
    return _table_info({**request, "BillingModeSummary": {"BillingMode": request["BillingMode"]}})


def same_table(one: TableInfo, one_endpoint: str, other: TableInfo, other_endpoint: str) -> bool:
    """Whether two descriptions are of one table.

    TableId is unique per table ever created (DynamoDB, and the emulators that give one);
    without it, one ARN at one endpoint is one table (two DynamoDB-compatible servers may
    give their tables the same ARN).
    """
    one_id, other_id = one.description.get("TableId"), other.description.get("TableId")
    if one_id and other_id:
        return one_id == other_id
    one_arn, other_arn = one.description.get("TableArn"), other.description.get("TableArn")
    same_place = one_endpoint.rstrip("/") == other_endpoint.rstrip("/")
    return same_place and (one_arn == other_arn if one_arn and other_arn else one.name == other.name)


def ttl_attribute(client: Any, table: str) -> str | None:
    """The TTL attribute when TTL is enabled (or being enabled) on the table."""
    with translated("reading the TTL setting of", f"source table {table!r}"):
        response = client.describe_time_to_live(TableName=table)
    description = response.get("TimeToLiveDescription", {})
    if description.get("TimeToLiveStatus") in ("ENABLED", "ENABLING"):
        return description.get("AttributeName")
    return None


def creation_request(
    source: TableInfo, target_table: str, renames: Mapping[str, str], billing_mode: str | None
) -> dict[str, Any]:
    """The CreateTable request that gives the target the source's keys and indexes."""
    name = lambda attribute: renames.get(attribute, attribute)  # noqa: E731
    mode = billing_mode or source.billing_mode
    provisioned = mode == "PROVISIONED"
    request: dict[str, Any] = {
        "TableName": target_table,
        "KeySchema": _keys(source.description["KeySchema"], name),
        "AttributeDefinitions": [
            {"AttributeName": name(a), "AttributeType": t} for a, t in source.attribute_types.items()
        ],
        "BillingMode": mode,
    }
    if provisioned:
        request["ProvisionedThroughput"] = _capacity(source.description.get("ProvisionedThroughput"))
    gsis = [
        _index(index, name, provisioned) for index in source.description.get("GlobalSecondaryIndexes") or []
    ]
    lsis = [_index(index, name, False) for index in source.description.get("LocalSecondaryIndexes") or []]
    if gsis:
        request["GlobalSecondaryIndexes"] = gsis
    if lsis:
        request["LocalSecondaryIndexes"] = lsis
    return request


def _keys(key_schema: list[Mapping[str, str]], name) -> list[dict[str, str]]:
    return [{"AttributeName": name(k["AttributeName"]), "KeyType": k["KeyType"]} for k in key_schema]


def _capacity(throughput: Mapping[str, Any] | None) -> dict[str, int]:
    throughput = throughput or {}
    return {
        "ReadCapacityUnits": max(1, int(throughput.get("ReadCapacityUnits") or 1)),
        "WriteCapacityUnits": max(1, int(throughput.get("WriteCapacityUnits") or 1)),
    }


def _index(index: Mapping[str, Any], name, provisioned: bool) -> dict[str, Any]:
    projection = dict(index.get("Projection") or {"ProjectionType": "ALL"})
    if "NonKeyAttributes" in projection:
        projection["NonKeyAttributes"] = [name(a) for a in projection["NonKeyAttributes"]]
    created = {"IndexName": index["IndexName"], "KeySchema": _keys(index["KeySchema"], name), "Projection": projection}
    if provisioned:
        created["ProvisionedThroughput"] = _capacity(index.get("ProvisionedThroughput"))
    return created


def check_key_schema(request: Mapping[str, Any], existing: TableInfo) -> None:
    """Refuse an existing target whose primary key differs from the (renamed) source's."""
    wanted = tuple((k["AttributeName"], k["KeyType"]) for k in request["KeySchema"])
    wanted_types = {a["AttributeName"]: a["AttributeType"] for a in request["AttributeDefinitions"]}
    same_keys = wanted == existing.key_schema
    same_types = all(wanted_types.get(n) == existing.attribute_types.get(n) for n, _ in wanted)
    if not (same_keys and same_types):
        expected = ", ".join(f"{n} ({wanted_types.get(n, '?')}, {kind})" for n, kind in wanted)
        raise errors.TargetSchemaMismatch(existing.name, expected, existing.render_keys())


def target_ttl_attribute(
    source_ttl: str | None, renames: Mapping[str, str], skip_ttl_deletions: bool
) -> str | None:
    """The attribute a created target's TTL is enabled on: the source's, under its renamed name.

    None with `skipTtlDeletions`: the user keeps in the target what the source's TTL deletes,
    and a target with TTL enabled would delete those very items itself.
    """
    if source_ttl is None:
        return None
    if skip_ttl_deletions:
        log.info(
            "not enabling TTL on the target (the source's is on %r): skipTtlDeletions keeps the items it deletes",
            source_ttl,
        )
        return None
    return renames.get(source_ttl, source_ttl)


def create_table(client: Any, request: Mapping[str, Any], ttl_attribute: str | None) -> TableInfo:
    """Create the target, wait until it is ACTIVE, and enable TTL on `ttl_attribute` (see `target_ttl_attribute`)."""
    table = request["TableName"]
    with translated("creating", f"target table {table!r}"):
        client.create_table(**request)
    info = wait_until_active(client, table)
    if ttl_attribute:
        with translated("enabling TTL on", f"target table {table!r}"):
            client.update_time_to_live(
                TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl_attribute}
            )
    log.info("created target table %r (%s, keys %s)", table, info.billing_mode, info.render_keys())
    return info


def wait_until_active(client: Any, table: str) -> TableInfo:
    """Poll every second: boto3's waiter polls every 20 s, too slow for a job's start."""
    deadline = time.monotonic() + TABLE_ACTIVE_TIMEOUT_SECONDS
    while True:
        info = describe_table(client, table, "target")
        if info is not None and info.description.get("TableStatus") == "ACTIVE":
            return info
        if time.monotonic() > deadline:
            raise errors.TargetError(f"target table {table!r} is not ACTIVE after {TABLE_ACTIVE_TIMEOUT_SECONDS} s")
        time.sleep(1)
