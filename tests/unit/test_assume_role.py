"""credentials.assumeRole: what is asked of STS, and where STS is reached (never the block's own endpoint)."""

from __future__ import annotations

import boto3
import pytest
import yaml

from migrator import aws
from migrator.config import parse_config
from migrator.errors import ConfigError

ROLE = "arn:aws:iam::123456789012:role/migration"


def spec_of(assume_role: dict, endpoint: dict | None = None):
    source = {"type": "dynamodb", "table": "Orders", "region": "eu-west-1",
              "credentials": {"assumeRole": {"arn": ROLE, **assume_role}}, **({"endpoint": endpoint} if endpoint else {})}
    document = {"source": source, "target": {"type": "dynamodb", "table": "Orders2", "region": "eu-west-1"}}
    return parse_config(yaml.safe_dump(document)).config.source.client_spec("source")


def test_the_external_id_and_duration_are_asked_for():
    spec = spec_of({"sessionName": "run-1", "externalId": "ext-7f3a", "durationSeconds": 1800})

    assert aws.assume_role_request(spec) == {
        "RoleArn": ROLE, "RoleSessionName": "run-1", "ExternalId": "ext-7f3a", "DurationSeconds": 1800,
    }  # fmt: skip


def test_without_them_sts_picks_its_defaults():
    assert aws.assume_role_request(spec_of({})) == {"RoleArn": ROLE, "RoleSessionName": "dynamodb-migrator"}


def test_sts_is_the_regions_not_the_tables_custom_endpoint(monkeypatch):
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS"):
        monkeypatch.delenv(name, raising=False)
    spec = spec_of({}, endpoint={"host": "http://alternator.internal", "port": 8000})

    client = aws.sts_client(spec, boto3.session.Session(region_name="eu-west-1"))

    assert client.meta.endpoint_url == "https://sts.eu-west-1.amazonaws.com"


def test_sts_follows_the_environment_as_boto3_does(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", "http://sts.local:4566")
    spec = spec_of({}, endpoint={"host": "http://alternator.internal", "port": 8000})

    assert aws.sts_client(spec, boto3.session.Session(region_name="eu-west-1")).meta.endpoint_url == "http://sts.local:4566"


@pytest.mark.parametrize("assume_role, key", [
    ({"durationSeconds": 600}, "durationSeconds"),
    ({"durationSeconds": 50000}, "durationSeconds"),
    ({"externalId": "has space"}, "externalId"),
])  # fmt: skip
def test_values_sts_would_refuse_are_refused_at_load(assume_role, key):
    with pytest.raises(ConfigError, match=f"source.credentials.assumeRole.{key}"):
        spec_of(assume_role)
