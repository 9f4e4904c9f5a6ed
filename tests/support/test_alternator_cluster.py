"""The local Alternator nodes answer as Alternator does: /localnodes, INDEXES refused, batches
of 100, no ConsumedCapacity, gzip bodies; a stopped node leaves the list."""

from __future__ import annotations

import gzip
import json
import urllib.request

import pytest
from botocore.exceptions import ClientError

from testsupport.alternator_cluster import AlternatorCluster
from testsupport.endpoint import dynamodb_client
from testsupport.sample_data import create_sample_table, make_items

PLACES = [("dc1", "r1"), ("dc1", "r2"), ("dc2", "r1")]
# moto reads the account and region from the Authorization header; it checks no signature.
UNSIGNED_LOOKING_AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0"
)


def local_nodes(url: str) -> list[str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_localnodes_lists_the_live_nodes_of_a_datacenter_or_rack(endpoint_url):
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        seed = cluster.endpoint_url
        paths = ("/localnodes", "/localnodes?dc=dc2", "/localnodes?dc=dc1&rack=r2")
        own_dc, dc2, rack = (local_nodes(seed + path) for path in paths)
        stopped = cluster.stop_after(1, "DescribeTable", 1)
        client = dynamodb_client(cluster.nodes[1].endpoint_url)
        with pytest.raises(ClientError):
            client.describe_table(TableName="no-such-table")
        stopped.wait(10)
        after_stop = local_nodes(seed + "/localnodes")

    assert own_dc == ["127.0.0.1", "127.0.0.2"] and dc2 == ["127.0.0.3"] and rack == ["127.0.0.2"]
    assert stopped.is_set() and after_stop == ["127.0.0.1"]


def test_nodes_differ_from_dynamodb_as_alternator_does(endpoint_url, dynamodb, table_name):
    table = table_name("alternator-node")
    create_sample_table(dynamodb, table)
    with AlternatorCluster(endpoint_url, PLACES) as cluster:
        client = dynamodb_client(cluster.endpoint_url)
        puts = [{"PutRequest": {"Item": item}} for item in make_items(101)]
        with pytest.raises(ClientError) as indexes:
            client.batch_write_item(RequestItems={table: puts[:1]}, ReturnConsumedCapacity="INDEXES")
        with pytest.raises(ClientError) as too_many:
            client.batch_write_item(RequestItems={table: puts})
        hundred = client.batch_write_item(RequestItems={table: puts[:100]}, ReturnConsumedCapacity="TOTAL")
        scanned = client.scan(TableName=table, ReturnConsumedCapacity="TOTAL")
        request = urllib.request.Request(
            cluster.endpoint_url, method="POST",
            data=gzip.compress(json.dumps({"TableName": table, "Select": "COUNT"}).encode()),
            headers={"Content-Encoding": "gzip", "X-Amz-Target": "DynamoDB_20120810.Scan",
                     "Content-Type": "application/x-amz-json-1.0",
                     "Authorization": UNSIGNED_LOOKING_AUTHORIZATION},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as response:
            counted = json.loads(response.read())

    assert indexes.value.response["Error"]["Code"] == "ValidationException"
    assert too_many.value.response["Error"]["Code"] == "ValidationException"
    assert hundred["UnprocessedItems"] == {} and "ConsumedCapacity" not in hundred
    assert scanned["Count"] == 100 and "ConsumedCapacity" not in scanned
    assert counted["Count"] == 100 and cluster.gzip_bodies == 1 and cluster.largest_batch == 100
