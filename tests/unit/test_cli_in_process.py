"""`cli.main(argv, spark_factory)` and `cli.validate_main`: the whole command line in the caller's process.

The caller owns the process and the session: its signal handlers stay as they were, and a run that
fails before writing never asks for Spark. (The integration tests run every in-process job through it.)
"""

from __future__ import annotations

import signal

import pytest

from migrator import cli

BAD_CONFIG = """\
source: {type: dynamodb, table: orders, region: us-east-1, endpoint: {host: "http://127.0.0.1", port: 9}, credentials: {accessKey: k, secretKey: s}}
target: {type: dynamodb, table: orders-copy, region: us-east-1, endpoint: {host: "http://127.0.0.1", port: 9}, credentials: {accessKey: k, secretKey: s}, maxItemsPerBatch: 26}
"""


def never_called():
    raise AssertionError("Spark was asked for")


@pytest.mark.parametrize("entry", [cli.main, cli.validate_main], ids=["migrate", "validate"])
def test_a_bad_config_is_one_line_and_exit_2_with_the_callers_handlers_kept(entry, tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text(BAD_CONFIG)
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}

    code = entry(["--config", str(config)], spark_factory=never_called)

    assert code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "maxItemsPerBatch is 26, but type 'dynamodb' accepts at most 25" in errors[0], errors
    assert {number: signal.getsignal(number) for number in before} == before


def test_run_as_its_own_process_it_handles_sigterm(tmp_path, monkeypatch):
    """Without a factory the command owns the process: SIGTERM becomes a clean stop (migrator.stopping)."""
    config = tmp_path / "bad.yaml"
    config.write_text(BAD_CONFIG)
    original = signal.getsignal(signal.SIGTERM)
    try:
        assert cli.main(["--config", str(config)]) == 2
        assert signal.getsignal(signal.SIGTERM) is not original
    finally:
        signal.signal(signal.SIGTERM, original)
