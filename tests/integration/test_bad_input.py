"""Bad input: one clear line, a non-zero exit, and nothing written.

Each `bad_configs/NAME.yaml` sits beside `NAME.expected`: the first line is `exit N`, every
other line a text the error must contain. Configs reach the test's tables and endpoint
through `${...}` environment references, as a user's would.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from testsupport.emulator import EmulatorProcess, create_admin_keys
from testsupport.endpoint import TEST_REGION, endpoint_block, list_tables, side
from testsupport.jobs import assert_one_clear_line, run_job, write_config
from testsupport.ports import busy_port, closed_port
from testsupport.sample_data import create_sample_table

pytestmark = pytest.mark.integration

BAD_CONFIGS = Path(__file__).resolve().parent.parent / "bad_configs"
CASES = sorted(path.stem for path in BAD_CONFIGS.glob("*.yaml"))


def expectations(name: str) -> tuple[int, list[str]]:
    first, *texts = (BAD_CONFIGS / f"{name}.expected").read_text(encoding="utf-8").splitlines()
    return int(first.split()[1]), [t for t in texts if t]


def test_at_least_twelve_bad_configs():
    assert len(CASES) >= 12


@pytest.mark.parametrize("name", CASES)
def test_bad_config_is_refused_before_anything_is_written(name, dynamodb, endpoint_url, table_name, tmp_path):
    exit_code, texts = expectations(name)
    source, target = table_name("bad-src"), table_name("bad-dst")
    create_sample_table(dynamodb, source)
    (tmp_path / "savepoints").mkdir()
    (tmp_path / "savepoints" / "a-file").write_text("a file, not a directory")
    endpoint = endpoint_block(endpoint_url)
    with busy_port() as port:
        env = {
            "SOURCE_TABLE": source,
            "TARGET_TABLE": target,
            "ENDPOINT_HOST": endpoint["host"],
            "ENDPOINT_PORT": str(endpoint.get("port", 443)),
            "CLOSED_PORT": str(closed_port()),
            "BUSY_PORT": str(port),
            "SAVEPOINTS": str(tmp_path / "savepoints"),
        }
        result = run_job(BAD_CONFIGS / f"{name}.yaml", env=env, env_reaches_only_the_driver=True)

    assert result.returncode == exit_code, result.stderr
    assert_one_clear_line(result, texts)
    assert target not in list_tables(dynamodb)
    assert [p.name for p in (tmp_path / "savepoints").iterdir()] == ["a-file"]
    stream = dynamodb.describe_table(TableName=source)["Table"].get("StreamSpecification") or {}
    assert not stream.get("StreamEnabled"), "a stream was enabled on the source"
    destinations = dynamodb.describe_kinesis_streaming_destination(TableName=source)["KinesisDataStreamDestinations"]
    assert destinations == [], "a Kinesis streaming destination was enabled on the source"


@pytest.mark.e2e
def test_exit_code_survives_spark_submit(dynamodb, endpoint_url, table_name, tmp_path):
    target = table_name("never")
    config = write_config(
        tmp_path, {"source": side(endpoint_url, "no-such-table"), "target": side(endpoint_url, target)}
    )
    result = run_job(config, spark_submit=True)
    assert result.returncode == 2, result.stderr
    assert_one_clear_line(result, ["source table 'no-such-table' does not exist"])
    assert target not in list_tables(dynamodb)


def test_invalid_credentials_are_refused_when_the_endpoint_checks_them(table_name, tmp_path):
    with EmulatorProcess(auth=True) as emulator:
        access_key, secret_key = create_admin_keys(emulator.endpoint_url)
        admin = boto3.client(
            "dynamodb",
            endpoint_url=emulator.endpoint_url,
            region_name=TEST_REGION,
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
        )
        source, target = table_name("auth-src"), table_name("auth-dst")
        create_sample_table(admin, source)
        good = {"accessKey": access_key, "secretKey": secret_key}
        wrong = {"accessKey": "AKIAWRONGWRONGWRONG1", "secretKey": "wrong-secret-planted-in-config"}
        config = write_config(
            tmp_path,
            {
                "source": side(emulator.endpoint_url, source, credentials=good),
                "target": side(emulator.endpoint_url, target, credentials=wrong),
            },
        )

        result = run_job(config)

        assert result.returncode == 2, result.stderr
        assert_one_clear_line(result, [f"describing target table {target!r}", "rejected the credentials"])
        assert "wrong-secret-planted-in-config" not in result.stderr + result.stdout
        assert target not in list_tables(admin)


@pytest.mark.e2e
def test_spark_that_cannot_start_is_one_line_and_nothing_written(dynamodb, endpoint_url, table_name, tmp_path):
    """An OSError at start-up (here: SPARK_HOME names no Spark, so launching it fails): one line, exit 2."""
    source, target = table_name("nospark-src"), table_name("nospark-dst")
    create_sample_table(dynamodb, source)
    config = write_config(tmp_path, {"source": side(endpoint_url, source), "target": side(endpoint_url, target)})
    no_spark = tmp_path / "no-spark-here"

    result = run_job(config, env={"SPARK_HOME": str(no_spark)})

    assert result.returncode == 2, result.stdout + result.stderr
    assert_one_clear_line(result, ["starting Spark", str(no_spark), "nothing was written", "SPARK_HOME"])
    assert target not in list_tables(dynamodb)
    assert not list((tmp_path / "savepoints").glob("savepoint_*")), "a savepoint was written"
