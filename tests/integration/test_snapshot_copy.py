"""Snapshot copies on the emulator over HTTP with a real Spark session: exactness first."""

from __future__ import annotations

import time

import pytest

from migrator.errors import TargetSchemaMismatch
from migrator.items import rename_attributes
from testsupport.all_types import KEY_SCHEMA, all_types_items, assert_same_items
from testsupport.endpoint import put_items, scan_all, side, table_exists
from testsupport.jobs import migrate_on_session, run_job, write_config
from testsupport.s3_exports import S3AccessLog
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ATTRIBUTES = [
    {"AttributeName": "pk", "AttributeType": "S"},
    {"AttributeName": "sk", "AttributeType": "N"},
    {"AttributeName": "gsi_pk", "AttributeType": "S"},
    {"AttributeName": "lsi_sk", "AttributeType": "S"},
]


def create_all_types_table(client, table: str) -> None:
    """Hash+range with one GSI (INCLUDE projection) and one LSI (KEYS_ONLY)."""
    client.create_table(
        TableName=table,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=ATTRIBUTES,
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_gsi_pk",
                "KeySchema": [{"AttributeName": "gsi_pk", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["s", "ss"]},
            }
        ],
        LocalSecondaryIndexes=[
            {
                "IndexName": "by_lsi_sk",
                "KeySchema": [
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "lsi_sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
    )


def all_types_with_index_keys():
    items = all_types_items()
    for number, item in enumerate(items):
        item["gsi_pk"] = {"S": f"g{number % 2}"}
        item["lsi_sk"] = {"S": f"l{number}"}
    return items


def test_all_types_copied_exactly_with_indexes(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("all-types"), table_name("all-types-copy")
    create_all_types_table(dynamodb, source)
    items = all_types_with_index_keys()
    for item in items:
        dynamodb.put_item(TableName=source, Item=item)
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target)})

    summary = migrate_on_session(config, spark)

    assert summary.written == summary.scanned == len(items)
    assert_same_items(items, scan_all(dynamodb, target))
    created = dynamodb.describe_table(TableName=target)["Table"]
    assert created["KeySchema"] == KEY_SCHEMA
    assert created["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    (gsi,) = created["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "by_gsi_pk"
    assert gsi["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["s", "ss"]}
    (lsi,) = created["LocalSecondaryIndexes"]
    assert lsi["KeySchema"][1] == {"AttributeName": "lsi_sk", "KeyType": "RANGE"}
    assert lsi["Projection"]["ProjectionType"] == "KEYS_ONLY"


def test_renames_apply_to_items_keys_and_indexes(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("ren"), table_name("ren-copy")
    create_all_types_table(dynamodb, source)
    items = all_types_with_index_keys()
    for item in items:
        dynamodb.put_item(TableName=source, Item=item)
    renames = {"pk": "id", "gsi_pk": "group", "s": "text", "ключ": "key"}
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source),
            "target": side(endpoint_url, target),
            "renames": [{"from": k, "to": v} for k, v in renames.items()],
        },
    )

    migrate_on_session(config, spark)

    expected = [rename_attributes(item, renames) for item in items]
    assert_same_items(expected, scan_all(dynamodb, target), key_names=("id", "sk"))
    created = dynamodb.describe_table(TableName=target)["Table"]
    assert created["KeySchema"][0] == {"AttributeName": "id", "KeyType": "HASH"}
    gsi = created["GlobalSecondaryIndexes"][0]
    assert gsi["KeySchema"] == [{"AttributeName": "group", "KeyType": "HASH"}]
    assert gsi["Projection"]["NonKeyAttributes"] == ["text", "ss"]


def test_existing_target_with_other_keys_is_refused(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("src"), table_name("other-keys")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(10))
    dynamodb.create_table(
        TableName=target,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target)})

    with pytest.raises(TargetSchemaMismatch) as refused:
        migrate_on_session(config, spark)

    assert "pk (S, HASH), sk (N, RANGE)" in str(refused.value)
    assert "nothing was written" in str(refused.value)
    assert scan_all(dynamodb, target) == []
    assert not (tmp_path / "savepoints").exists()


def test_existing_matching_target_is_used_as_is(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("src"), table_name("existing")
    create_sample_table(dynamodb, source)
    create_sample_table(dynamodb, target)
    items = list(make_items(300))
    put_items(dynamodb, source, items)
    extra = {"pk": {"S": "already-there"}, "sk": {"N": "-1"}}
    dynamodb.put_item(TableName=target, Item=extra)
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target)})

    migrate_on_session(config, spark)

    assert_same_items(items + [extra], scan_all(dynamodb, target))


def test_expired_items_skipped_and_counted_others_kept(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target, target_all = table_name("ttl"), table_name("ttl-copy"), table_name("ttl-all")
    create_sample_table(dynamodb, source)
    dynamodb.update_time_to_live(TableName=source, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
    now = int(time.time())
    expired = [{"pk": {"S": "expired"}, "sk": {"N": str(i)}, "expires": {"N": str(now - 3600)}} for i in range(7)]
    live = [
        {"pk": {"S": "future"}, "sk": {"N": "1"}, "expires": {"N": str(now + 3600)}},
        {"pk": {"S": "no-ttl"}, "sk": {"N": "2"}},
        {"pk": {"S": "string-ttl"}, "sk": {"N": "3"}, "expires": {"S": "yesterday"}},
        {"pk": {"S": "ancient"}, "sk": {"N": "4"}, "expires": {"N": str(now - 6 * 365 * 86400)}},
    ]
    put_items(dynamodb, source, expired + live)
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target)})

    summary = migrate_on_session(config, spark)

    assert summary.skipped_expired == 7
    assert summary.written == len(live)
    assert_same_items(live, scan_all(dynamodb, target))
    ttl = dynamodb.describe_time_to_live(TableName=target)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires"

    copy_all = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, copyExpiredItems=True),
            "target": side(endpoint_url, target_all),
            "savepoints": {"path": str(tmp_path / "savepoints-all")},
        },
        name="all.yaml",
    )
    summary = migrate_on_session(copy_all, spark)
    assert summary.skipped_expired == 0
    assert_same_items(expired + live, scan_all(dynamodb, target_all))


def test_target_ttl_is_enabled_on_the_renamed_attribute_and_not_with_skip_ttl_deletions(
    dynamodb, endpoint_url, spark, table_name, tmp_path
):
    source, renamed, kept = table_name("ttl-ren"), table_name("ttl-ren-copy"), table_name("ttl-kept")
    create_sample_table(dynamodb, source)
    dynamodb.update_time_to_live(TableName=source, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires"})
    put_items(dynamodb, source, [{"pk": {"S": "a"}, "sk": {"N": "1"}, "expires": {"N": str(int(time.time()) + 3600)}}])
    renames = [{"from": "expires", "to": "expiresAt"}]
    config = write_config(
        tmp_path,
        {"source": side(endpoint_url, source), "target": side(endpoint_url, renamed), "renames": renames},
    )

    migrate_on_session(config, spark)

    ttl = dynamodb.describe_time_to_live(TableName=renamed)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl.get("AttributeName")) == ("ENABLED", "expiresAt")

    keep = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source),
            "target": side(endpoint_url, kept, skipTtlDeletions=True),
            "renames": renames,
            "savepoints": {"path": str(tmp_path / "savepoints-kept")},
        },
        name="kept.yaml",
    )
    migrate_on_session(keep, spark)

    ttl = dynamodb.describe_time_to_live(TableName=kept)["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "DISABLED", "the target would delete the items skipTtlDeletions keeps"


def test_billing_mode_override_copies_capacity_rules(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("prov"), table_name("prov-copy")
    dynamodb.create_table(
        TableName=source,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        ProvisionedThroughput={"ReadCapacityUnits": 50_000, "WriteCapacityUnits": 40_000},
    )
    dynamodb.put_item(TableName=source, Item={"pk": {"S": "one"}})
    config = write_config(
        tmp_path,
        {"source": side(endpoint_url, source), "target": side(endpoint_url, target, billingMode="PAY_PER_REQUEST")},
    )

    migrate_on_session(config, spark)

    created = dynamodb.describe_table(TableName=target)["Table"]
    assert created["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert scan_all(dynamodb, target) == [{"pk": {"S": "one"}}]


def test_provisioned_source_gives_provisioned_target(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("prov"), table_name("prov-same")
    dynamodb.create_table(
        TableName=source,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        ProvisionedThroughput={"ReadCapacityUnits": 50_000, "WriteCapacityUnits": 40_000},
    )
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target)})

    migrate_on_session(config, spark)

    created = dynamodb.describe_table(TableName=target)["Table"]
    assert created["ProvisionedThroughput"]["ReadCapacityUnits"] == 50_000
    assert created["ProvisionedThroughput"]["WriteCapacityUnits"] == 40_000
    assert table_exists(dynamodb, target)


def test_fifty_thousand_items_in_sixteen_segments(dynamodb, endpoint_url, spark, table_name, tmp_path):
    source, target = table_name("big"), table_name("big-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(50_000, payload_bytes=60))
    config = write_config(
        tmp_path,
        {"source": side(endpoint_url, source, scanSegments=16), "target": side(endpoint_url, target)},
    )

    summary = migrate_on_session(config, spark)

    assert summary.segments_total == 16 and summary.segments_copied == 16
    assert summary.scanned == summary.written == 50_000
    assert_same_items(make_items(50_000, payload_bytes=60), scan_all(dynamodb, target))


@pytest.mark.e2e
def test_assume_role_credentials_reach_both_tables_and_sts_is_asked_at_sts(dynamodb, endpoint_url, table_name, tmp_path):
    """The role is assumed at STS where boto3 finds it (here AWS_ENDPOINT_URL_STS), never at the tables'
    own endpoint, with the external id and duration the config gives."""
    source, target = table_name("role"), table_name("role-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(30))
    role = {
        "accessKey": "AKIABASEUSER",
        "secretKey": "base-user-secret",
        "assumeRole": {"arn": "arn:aws:iam::123456789012:role/migration", "sessionName": "test-run",
                       "externalId": "migration-7f3a", "durationSeconds": 1800},
    }  # fmt: skip
    with S3AccessLog(endpoint_url) as tables, S3AccessLog(endpoint_url) as sts:
        config = write_config(tmp_path, {"source": side(tables.endpoint_url, source, credentials=role),
                                         "target": side(tables.endpoint_url, target, credentials=role)})  # fmt: skip

        finished = run_job(config, env={"AWS_ENDPOINT_URL_STS": sts.endpoint_url}, timeout=300)
        at_tables, at_sts = tables.requests, sts.requests

    assert finished.returncode == 0, finished.stderr[-3000:]
    assert_same_items(make_items(30), scan_all(dynamodb, target))
    assert at_sts and all(method == "POST" and target is None for method, _, target in at_sts), at_sts
    assert all(target is not None for _, _, target in at_tables), "a request without X-Amz-Target (STS) reached the tables"


def test_write_rate_is_held_to_the_planned_share(dynamodb, endpoint_url, spark, table_name, tmp_path):
    """200 items of under 1 KB cost 200 WCU (estimated: capacity reporting removed);
    at 100 WCU × 0.5 = 50 WCU/s with a one-second burst, the copy needs at least 2.5 s."""
    source, target = table_name("paced"), table_name("paced-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(200, payload_bytes=100))
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=1),
            "target": side(
                endpoint_url, target, writeThroughput=100, throughputWritePercent=0.5, removeConsumedCapacity=True
            ),
        },
    )

    summary = migrate_on_session(config, spark)

    assert summary.written == 200
    assert summary.seconds >= 2.5 - 0.1
