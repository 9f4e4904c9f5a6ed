"""The data plane reaches the endpoint the environment names, as boto3 does: AWS_ENDPOINT_URL, proxies, CA bundles.

The snapshot's Scan and BatchWriteItem (and replication's GetItem) go through the lean client of
migrator.wire; these tests configure the endpoint only the way a user's environment would and
check the requests arrive.
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import pytest
from deltalake import DeltaTable

from migrator import errors
from migrator.connection import ClientSpec
from migrator.redact import Secret
from migrator.wire import WireClient
from testsupport.endpoint import TEST_ACCESS_KEY, TEST_REGION, TEST_SECRET_KEY, endpoint_block, put_items, scan_all
from testsupport.faultproxy import FaultProxy
from testsupport.jobs import assert_one_clear_line, run_job, write_config
from testsupport.loopback import self_signed_certificate
from testsupport.s3_exports import S3AccessLog, create_bucket
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

ITEMS = 120
# Nothing resolves these names: only a proxy that relays the request reaches the emulator.
UNRESOLVABLE_ENDPOINT = "http://dynamodb.behind-the-proxy.invalid:8000"
# One label: the emulator's S3 takes the first label of a dotted host for a bucket (virtual-hosted style).
UNRESOLVABLE_S3_ENDPOINT = "http://s3-behind-the-proxy:8000"


def side_without_endpoint(table: str) -> dict:
    """A source or target block naming no endpoint: where it is comes from the environment."""
    return {
        "type": "dynamodb",
        "table": table,
        "region": TEST_REGION,
        "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY},
    }


@pytest.mark.e2e
def test_copy_configured_only_through_AWS_ENDPOINT_URL(dynamodb, endpoint_url, table_name, tmp_path):
    source, target = table_name("env-endpoint"), table_name("env-endpoint-copy")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    config = write_config(
        tmp_path, {"source": side_without_endpoint(source), "target": side_without_endpoint(target)}
    )

    finished = run_job(config, env={"AWS_ENDPOINT_URL": endpoint_url}, timeout=300)

    assert finished.returncode == 0, finished.stderr[-3000:]
    assert sorted(map(str, scan_all(dynamodb, target))) == sorted(map(str, scan_all(dynamodb, source)))


@pytest.fixture
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy and no CA bundle from the machine: each test sets its own."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "AWS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def lean_client(endpoint: str, max_attempts: int = 10) -> WireClient:
    """A fresh lean client (its own spec: clients are cached per spec, and each test has its own environment)."""
    spec = ClientSpec(
        label=f"environment test {uuid.uuid4().hex[:8]}",
        endpoint_url=endpoint,
        region=TEST_REGION,
        access_key=Secret(TEST_ACCESS_KEY),
        secret_key=Secret(TEST_SECRET_KEY),
        max_attempts=max_attempts,
    )
    return WireClient(spec)


@pytest.fixture
def sample_table(dynamodb, table_name) -> str:
    table = table_name("env-wire")
    create_sample_table(dynamodb, table)
    put_items(dynamodb, table, make_items(10))
    return table


def test_lean_client_goes_through_HTTP_PROXY(no_proxy_settings, endpoint_url, sample_table):
    with FaultProxy(endpoint_url, fault_rate=0, record=True) as proxy:
        no_proxy_settings.setenv("HTTP_PROXY", proxy.endpoint_url)

        page = lean_client(UNRESOLVABLE_ENDPOINT).scan(TableName=sample_table)

        assert page["Count"] == 10
        assert [operation for operation, *_ in proxy.recorded] == ["Scan"]


def test_lean_client_skips_the_proxy_for_NO_PROXY_hosts(no_proxy_settings, endpoint_url, sample_table):
    no_proxy_settings.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens: a proxied request fails
    no_proxy_settings.setenv("NO_PROXY", "127.0.0.1,localhost")

    page = lean_client(endpoint_url).scan(TableName=sample_table)

    assert page["Count"] == 10


def test_lean_client_trusts_AWS_CA_BUNDLE(no_proxy_settings, endpoint_url, sample_table, tmp_path):
    certificate, key = self_signed_certificate(tmp_path)
    with FaultProxy(endpoint_url, fault_rate=0, tls=(certificate, key)) as tls_endpoint:
        assert tls_endpoint.endpoint_url.startswith("https://")
        with pytest.raises(errors.EndpointUnreachable, match="SSL|certificate"):
            lean_client(tls_endpoint.endpoint_url, max_attempts=1).scan(TableName=sample_table)

        no_proxy_settings.setenv("AWS_CA_BUNDLE", certificate)
        page = lean_client(tls_endpoint.endpoint_url).scan(TableName=sample_table)

        assert page["Count"] == 10


@pytest.mark.e2e
def test_a_delta_table_on_s3_is_written_through_HTTP_PROXY(no_proxy_settings, dynamodb, s3, endpoint_url, table_name,
                                                           tmp_path):  # fmt: skip
    """delta-rs has its own HTTP client: it must take the proxy from the environment as boto3 does."""
    source = table_name("env-delta")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(ITEMS))
    bucket = create_bucket(s3)
    config = write_config(tmp_path, {
        "source": {**side_without_endpoint(source), "endpoint": endpoint_block(endpoint_url)},
        "target": {"type": "delta", "path": f"s3://{bucket}/orders", "region": TEST_REGION,
                   "endpoint": endpoint_block(UNRESOLVABLE_S3_ENDPOINT),
                   "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY}},
    })  # fmt: skip
    with S3AccessLog(endpoint_url) as proxy:
        environment = {"HTTP_PROXY": proxy.endpoint_url, "NO_PROXY": "127.0.0.1,localhost"}

        finished = run_job(config, env=environment, timeout=300)

        relayed = {urlsplit(path).hostname for _, path, _ in proxy.requests}
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert relayed == {urlsplit(UNRESOLVABLE_S3_ENDPOINT).hostname}
    options = {"AWS_ENDPOINT_URL": endpoint_url, "AWS_REGION": TEST_REGION, "AWS_ALLOW_HTTP": "true",
               "AWS_ACCESS_KEY_ID": TEST_ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": TEST_SECRET_KEY}  # fmt: skip
    assert DeltaTable(f"s3://{bucket}/orders", storage_options=options).to_pyarrow_table().num_rows == ITEMS


@pytest.mark.e2e
def test_a_delta_table_behind_a_certificate_only_AWS_CA_BUNDLE_trusts_is_refused_before_writing(
    no_proxy_settings, dynamodb, endpoint_url, table_name, tmp_path
):
    """delta-rs cannot be given a CA bundle: rather than retrying TLS failures for minutes, the run says so."""
    source = table_name("env-delta-tls")
    create_sample_table(dynamodb, source)
    certificate, key = self_signed_certificate(tmp_path)
    with FaultProxy(endpoint_url, fault_rate=0, tls=(certificate, key), record=True) as tls_endpoint:
        config = write_config(tmp_path, {
            "source": {**side_without_endpoint(source), "endpoint": endpoint_block(endpoint_url)},
            "target": {"type": "delta", "path": "s3://any-bucket/orders", "region": TEST_REGION,
                       "endpoint": endpoint_block(tls_endpoint.endpoint_url),
                       "credentials": {"accessKey": TEST_ACCESS_KEY, "secretKey": TEST_SECRET_KEY}},
        })  # fmt: skip

        finished = run_job(config, env={"AWS_CA_BUNDLE": certificate}, timeout=120)

        assert tls_endpoint.counts.get("forwarded", 0) == 0
    assert finished.returncode == 2
    assert_one_clear_line(finished, ["target.path s3://any-bucket/orders", "AWS_CA_BUNDLE", "delta-rs"])
