"""Executors call the region the driver's checks called, whatever their own environment says.

On a cluster the driver resolves a region from its environment or profile (AWS_REGION, a profile
in ~/.aws/config); an executor on another node may have another one, or none (botocore then has
no region, or the node's own). `driver_region.with_the_drivers_region` writes the driver's resolution into
every connection block that names neither region nor endpoint, so the specs executors receive
carry it. Here the driver and the executor are two environments of one process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator import aws
from migrator.config import load_config
from migrator.driver_region import with_the_drivers_region

CONFIG = """\
source:
  type: dynamodb
  table: Orders
  {source_extra}
target:
  type: dynamodb
  table: OrdersCopy
  {target_extra}
"""


@pytest.fixture
def clean_environment(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    return monkeypatch


def loaded(tmp_path: Path, source_extra: str = "", target_extra: str = ""):
    path = tmp_path / "migrate.yaml"
    path.write_text(CONFIG.format(source_extra=source_extra, target_extra=target_extra))
    return load_config(str(path))


def region_an_executor_calls(spec) -> str | None:
    return aws.client(spec).meta.region_name


def test_an_executor_without_the_drivers_profile_calls_the_drivers_region(clean_environment, tmp_path):
    driver_profile = tmp_path / "driver-config"
    driver_profile.write_text("[default]\nregion = ap-south-1\n")
    clean_environment.setenv("AWS_CONFIG_FILE", str(driver_profile))  # on the driver
    config = loaded(tmp_path)
    pinned = with_the_drivers_region(config).config
    unpinned_spec = config.config.source.client_spec("source")

    clean_environment.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))  # on an executor: no profile
    clean_environment.setenv("AWS_DEFAULT_REGION", "us-east-1")  # ... and a region of its own
    assert region_an_executor_calls(unpinned_spec) == "us-east-1"  # what happened before: another region
    assert region_an_executor_calls(pinned.source.client_spec("source")) == "ap-south-1"
    assert region_an_executor_calls(pinned.target.client_spec("target")) == "ap-south-1"


def test_a_region_or_an_endpoint_in_the_config_is_kept(clean_environment, tmp_path):
    clean_environment.setenv("AWS_REGION", "ap-south-1")
    config = loaded(tmp_path, "region: eu-west-1", "endpoint: {host: http://localhost, port: 8000}")
    pinned = with_the_drivers_region(config).config
    assert pinned.source.region == "eu-west-1"
    assert pinned.target.region is None and pinned.target.endpoint is not None
    assert pinned.target.client_spec("target") == config.config.target.client_spec("target")


def test_without_a_region_on_the_driver_nothing_changes(clean_environment, tmp_path):
    config = loaded(tmp_path)
    assert with_the_drivers_region(config) is config


def test_pinning_keeps_the_rest_of_the_config_and_its_secrets(clean_environment, tmp_path):
    clean_environment.setenv("AWS_REGION", "eu-central-1")
    config = loaded(tmp_path, "credentials: {accessKey: AKIAPINNED, secretKey: pinned-secret}")
    pinned = with_the_drivers_region(config)
    assert pinned.raw == config.raw and pinned.redacted_raw == config.redacted_raw
    spec = pinned.config.source.client_spec("source")
    assert spec.region == "eu-central-1" and spec.secret_key.reveal() == "pinned-secret"
    assert pinned.config.model_dump(exclude={"source", "target"}) == config.config.model_dump(exclude={"source", "target"})
