"""The lean data plane (migrator.wire) sends each request where boto3 sends it, signed as boto3 signs it.

The oracle is botocore itself: a plain boto3 client built from the same settings, whose request
is caught just before it would go out (nothing reaches the network). The request, not only the
client's `meta.endpoint_url`: the endpoint rules refine the host per request (account-based
endpoints; GovCloud's FIPS host is its usual one), while the signing region and name are the
client's `meta.region_name` and the service's signing name. For every environment of
the matrix (config region, AWS_REGION, profiles, AWS_ENDPOINT_URL*, China, GovCloud, FIPS,
dual-stack, account-based endpoints), the lean client's URL, signing region and signing name
must be the oracle's, for Scan, BatchWriteItem and GetItem, and for DynamoDB Streams' GetRecords.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import boto3
import pytest

from migrator import errors
from migrator.connection import ClientSpec
from migrator.redact import Secret
from migrator.wire import WireClient

TABLE = "orders"
ACCESS_KEY, SECRET_KEY = "AKIAROUTINGTEST", "routing-test-secret"
REQUESTS = {  # the smallest request botocore accepts for each operation the lean client makes
    "Scan": {"TableName": TABLE},
    "BatchWriteItem": {"RequestItems": {TABLE: [{"PutRequest": {"Item": {"id": {"S": "1"}}}}]}},
    "GetItem": {"TableName": TABLE, "Key": {"id": {"S": "1"}}},
}
STREAM_REQUESTS = {"GetRecords": {"ShardIterator": "arn:aws:dynamodb:iterator", "Limit": 1000}}
METHODS = {"Scan": "scan", "BatchWriteItem": "batch_write_item", "GetItem": "get_item", "GetRecords": "get_records"}
# SigV4's credential scope: Credential=<key>/<date>/<region>/<service>/aws4_request
SCOPE = re.compile(r"Credential=[^/]+/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request")


@dataclass(frozen=True)
class Environment:
    name: str
    host: str  # where the request must go: a check on the oracle itself
    region: str | None = None  # the config's region, or AWS_REGION (the config block's client_spec puts either in ClientSpec.region)
    endpoint_url: str | None = None  # the config's endpoint (ClientSpec.endpoint_url)
    env: dict[str, str] = field(default_factory=dict)
    aws_config: str = ""  # the shared config file (~/.aws/config)
    keys_in_config: bool = True  # False: credentials come from the environment (AWS_ACCESS_KEY_ID, ...)


ENVIRONMENTS = [
    Environment("region in the config", "dynamodb.eu-west-1.amazonaws.com", region="eu-west-1"),
    Environment("AWS_DEFAULT_REGION", "dynamodb.ap-northeast-1.amazonaws.com",
                env={"AWS_DEFAULT_REGION": "ap-northeast-1"}),
    Environment("default profile's region", "dynamodb.ap-south-1.amazonaws.com",
                aws_config="[default]\nregion = ap-south-1\n"),
    Environment("AWS_PROFILE's region", "dynamodb.sa-east-1.amazonaws.com", env={"AWS_PROFILE": "work"},
                aws_config="[default]\nregion = eu-west-1\n[profile work]\nregion = sa-east-1\n"),
    Environment("AWS_ENDPOINT_URL", "localhost:4566", region="us-east-1",
                env={"AWS_ENDPOINT_URL": "http://localhost:4566"}),
    Environment("AWS_ENDPOINT_URL_DYNAMODB over AWS_ENDPOINT_URL", "localhost:8000", region="us-east-1",
                env={"AWS_ENDPOINT_URL": "http://localhost:4566", "AWS_ENDPOINT_URL_DYNAMODB": "http://localhost:8000"}),
    Environment("profile's endpoint_url", "alternator.internal:8043",
                aws_config="[default]\nregion = us-west-2\nendpoint_url = https://alternator.internal:8043\n"),
    Environment("profile's services section", "ddb.internal:9000",
                aws_config="[default]\nregion = us-west-2\nservices = local\n"
                "[services local]\ndynamodb =\n  endpoint_url = http://ddb.internal:9000\n"),
    Environment("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "dynamodb.us-west-2.amazonaws.com", region="us-west-2",
                env={"AWS_ENDPOINT_URL": "http://localhost:4566", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}),
    Environment("endpoint in the config over AWS_ENDPOINT_URL", "scylla.internal:8000", region="us-east-1",
                endpoint_url="http://scylla.internal:8000", env={"AWS_ENDPOINT_URL": "http://localhost:4566"}),
    Environment("China", "dynamodb.cn-north-1.amazonaws.com.cn", region="cn-north-1"),
    Environment("China from the profile", "dynamodb.cn-northwest-1.amazonaws.com.cn",
                aws_config="[default]\nregion = cn-northwest-1\n"),
    Environment("GovCloud", "dynamodb.us-gov-west-1.amazonaws.com", region="us-gov-west-1"),
    Environment("GovCloud FIPS", "dynamodb.us-gov-east-1.amazonaws.com", region="us-gov-east-1",
                env={"AWS_USE_FIPS_ENDPOINT": "true"}),
    Environment("FIPS", "dynamodb-fips.us-east-2.amazonaws.com", region="us-east-2",
                env={"AWS_USE_FIPS_ENDPOINT": "true"}),
    Environment("FIPS from the profile", "dynamodb-fips.ca-central-1.amazonaws.com", region="ca-central-1",
                aws_config="[default]\nuse_fips_endpoint = true\n"),
    Environment("dual-stack", "dynamodb.eu-north-1.api.aws", region="eu-north-1",
                env={"AWS_USE_DUALSTACK_ENDPOINT": "true"}),
    Environment("China dual-stack", "dynamodb.cn-north-1.api.amazonwebservices.com.cn", region="cn-north-1",
                aws_config="[default]\nuse_dualstack_endpoint = true\n"),
    Environment("account-based endpoint", "111122223333.ddb.us-east-1.amazonaws.com", region="us-east-1",
                keys_in_config=False, env={"AWS_ACCOUNT_ID": "111122223333"}),
    Environment("account-based endpoint disabled", "dynamodb.us-east-1.amazonaws.com", region="us-east-1",
                keys_in_config=False,
                env={"AWS_ACCOUNT_ID": "111122223333", "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled"}),
]


class _Sent(Exception):
    """Raised where botocore would send the request: the oracle's request, caught before the network."""

    def __init__(self, request):
        super().__init__("caught before sending")
        self.request = request


@pytest.fixture
def environment(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Environment:
    """Only the case's settings: no AWS_* or proxy variable of the machine, a config file of its own."""
    case: Environment = request.param
    for name in list(os.environ):
        if name.startswith("AWS_") or name.lower() in ("http_proxy", "https_proxy", "no_proxy"):
            monkeypatch.delenv(name)
    config_file = tmp_path / "config"
    config_file.write_text(case.aws_config)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config_file))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    if not case.keys_in_config:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    return case


def spec_of(case: Environment) -> ClientSpec:
    keys = {"access_key": Secret(ACCESS_KEY), "secret_key": Secret(SECRET_KEY)} if case.keys_in_config else {}
    # A label per case: clients are cached per spec, and each case has its own environment.
    return ClientSpec(label=f"routing {case.name}", endpoint_url=case.endpoint_url, region=case.region, **keys)


def boto3_client_of(case: Environment, service: str = "dynamodb"):
    """What a user's own boto3 code builds from the same settings."""
    keys = {"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY} if case.keys_in_config else {}
    session = boto3.session.Session()  # not boto3's default session: it would keep an earlier case's settings
    return session.client(service, region_name=case.region, endpoint_url=case.endpoint_url, **keys)


def boto3_request(client, operation: str):
    """The request boto3 would send for `operation`, signed, caught at its send hook."""

    def catch(request, **_):
        raise _Sent(request)

    service = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register_first(f"before-send.{service}.{operation}", catch)
    with pytest.raises(_Sent) as sent:
        getattr(client, METHODS[operation])(**{**REQUESTS, **STREAM_REQUESTS}[operation])
    return sent.value.request


def where(url: str) -> str:
    """A URL as the request line and Host header carry it: an empty path is "/"."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path or '/'}"


def scope_of(headers) -> tuple[str, str]:
    """(signing region, signing name) from a SigV4 Authorization header."""
    authorization = headers["Authorization"]
    if isinstance(authorization, bytes):
        authorization = authorization.decode()
    found = SCOPE.search(authorization)
    return found["region"], found["service"]


@pytest.mark.parametrize("environment", ENVIRONMENTS, ids=[case.name for case in ENVIRONMENTS], indirect=True)
def test_lean_client_sends_where_boto3_sends(environment: Environment):
    oracle = boto3_client_of(environment)
    lean = WireClient(spec_of(environment))
    for operation in REQUESTS:
        expected = boto3_request(oracle, operation)
        sent = lean.prepare(operation, REQUESTS[operation])
        assert environment.host in expected.url, f"the oracle itself: {operation} {expected.url}"
        assert (operation, where(sent.url)) == (operation, where(expected.url))
        assert (operation, scope_of(sent.headers)) == (operation, scope_of(expected.headers))
        assert scope_of(expected.headers) == (oracle.meta.region_name, oracle.meta.service_model.signing_name)


@pytest.mark.parametrize("environment", ENVIRONMENTS, ids=[case.name for case in ENVIRONMENTS], indirect=True)
def test_lean_stream_reads_go_where_boto3_sends_them(environment: Environment):
    oracle = boto3_client_of(environment, "dynamodbstreams")
    lean = WireClient(spec_of(environment), "dynamodbstreams")
    expected = boto3_request(oracle, "GetRecords")
    sent = lean.prepare("GetRecords", STREAM_REQUESTS["GetRecords"])
    assert where(sent.url) == where(expected.url)
    assert scope_of(sent.headers) == scope_of(expected.headers)
    assert scope_of(expected.headers) == (oracle.meta.region_name, oracle.meta.service_model.signing_name)
    assert sent.headers["X-Amz-Target"] == expected.headers["X-Amz-Target"].decode()


NOWHERE = Environment("no region anywhere", "")


@pytest.mark.parametrize("environment", [NOWHERE], ids=["no region anywhere"], indirect=True)
def test_no_region_anywhere_is_the_config_error_boto3_raises(environment: Environment):
    with pytest.raises(errors.ConfigError, match="no AWS region"):
        WireClient(spec_of(environment))


NO_KEYS = Environment("no credentials anywhere", "dynamodb.eu-west-1.amazonaws.com", region="eu-west-1",
                      keys_in_config=False)


@pytest.mark.parametrize("environment", [NO_KEYS], ids=["no credentials anywhere"], indirect=True)
def test_no_credentials_anywhere_is_refused_before_sending(environment: Environment, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to look for
    with pytest.raises(errors.InvalidCredentials, match="no AWS credentials found"):
        WireClient(spec_of(environment)).prepare("Scan", REQUESTS["Scan"])
