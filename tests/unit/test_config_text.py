"""Where `--config` is read from, the parts that need no endpoint: local paths and malformed locations."""

from __future__ import annotations

import pytest

from migrator.config_text import MAX_CONFIG_BYTES, read_config_text
from migrator.errors import ConfigError


def test_a_local_path_and_a_file_uri_read_the_same_text(tmp_path):
    (tmp_path / "c.yaml").write_text("source: {}\n", encoding="utf-8")

    assert read_config_text(str(tmp_path / "c.yaml")) == "source: {}\n"
    assert read_config_text(f"file://{tmp_path / 'c.yaml'}") == "source: {}\n"


def test_a_missing_local_file_names_itself(tmp_path):
    with pytest.raises(ConfigError, match="missing.yaml: cannot read the config file"):
        read_config_text(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize("location", ["s3://bucket-only", "s3:///key.yaml", "s3a://bucket/"])
def test_an_s3_location_without_bucket_or_key_is_refused_before_any_request(location):
    with pytest.raises(ConfigError, match="an S3 location is s3://bucket/key.yaml"):
        read_config_text(location)


def test_a_file_larger_than_any_config_or_not_utf8_is_refused(tmp_path):
    (tmp_path / "big.yaml").write_bytes(b"a" * (MAX_CONFIG_BYTES + 1))
    (tmp_path / "latin1.yaml").write_bytes("t: caf\xe9".encode("latin-1"))

    with pytest.raises(ConfigError, match="larger than"):
        read_config_text(str(tmp_path / "big.yaml"))
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        read_config_text(str(tmp_path / "latin1.yaml"))
