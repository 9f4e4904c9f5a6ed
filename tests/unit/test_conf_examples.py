"""Every example in conf/ loads as it is, without warnings: they are the documentation."""

from __future__ import annotations

from pathlib import Path

import pytest

from migrator.config import load_config

CONF = Path(__file__).resolve().parents[2] / "conf"
EXAMPLES = sorted(CONF.glob("*.yaml"))
ENVIRONMENT = {
    "EMULATOR_PORT": "8000",
    "SOURCE_AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "SOURCE_AWS_SECRET_ACCESS_KEY": "example-secret",
}


def test_examples_exist_and_follow_the_naming_rule():
    names = {path.stem for path in EXAMPLES}
    assert {"demo", "dynamodb-to-dynamodb", "dynamodb-to-alternator"} <= names
    for name in names - {"demo"}:
        assert "-to-" in name, f"{name}: examples are named <source>-to-<target>[-<feature>].yaml"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_loads_without_warnings(path, monkeypatch):
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)
    loaded = load_config(str(path))
    assert loaded.warnings == ()
    assert loaded.config.source.table and loaded.config.target.name
