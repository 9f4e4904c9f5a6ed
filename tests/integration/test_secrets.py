"""Credentials in every spelling the config accepts leak nowhere: savepoint, checkpoint, output, event log.

The config reads `accessKey`/`secretKey`/`sessionToken` and, as pydantic field names,
`access_key`/`secret_key`/`session_token` (and `assumeRole`/`assume_role`). A job is run as a
user runs it (spark-submit, Spark's event log on), copies a table and replicates its changes
until Ctrl+C, with a distinct planted secret in each spelling; then every file it wrote and
everything it printed is searched for each one.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testsupport.endpoint import put_items, side
from testsupport.jobs import REPO, drain, job_env, wait_for_output, write_config
from testsupport.replication import wait_until_converged
from testsupport.sample_data import create_sample_table, make_items

pytestmark = pytest.mark.integration

# One planted value per spelling of each credential; moto accepts any keys, and its STS lets the
# job assume the roles (in the emulator's one account) with them.
SOURCE_CREDENTIALS = {  # field names, as pydantic also accepts them
    "access_key": "AKIAPLANTEDSNAKE0001",
    "secret_key": "planted-snake-secret-key-8c1f",
    "session_token": "planted-snake-session-token-2d9a",
    "assume_role": {"arn": "arn:aws:iam::123456789012:role/secrets-source", "session_name": "secrets-test"},
}
TARGET_CREDENTIALS = {  # the documented camelCase
    "accessKey": "AKIAPLANTEDCAMEL0001",
    "secretKey": "planted-camel-secret-key-51e0",
    "sessionToken": "planted-camel-session-token-a7b3",
    "assumeRole": {"arn": "arn:aws:iam::123456789012:role/secrets-target", "sessionName": "secrets-test"},
}
PLANTED = [value for value in [*SOURCE_CREDENTIALS.values(), *TARGET_CREDENTIALS.values()] if isinstance(value, str)]


def files_under(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file()]


def start_with_event_log(config: Path, events: Path, sts_endpoint: str) -> subprocess.Popen:
    """STS is reached where boto3 finds it (AWS_ENDPOINT_URL_STS), never at the tables' endpoint."""
    command = [
        str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
        "--conf", "spark.eventLog.enabled=true",
        "--conf", f"spark.eventLog.dir={events}",
        "--conf", "spark.eventLog.compress=false",  # Spark 4 compresses event logs by default
        "--driver-java-options", f"-Dlog4j2.configurationFile={REPO / 'conf' / 'log4j2.properties'}",
        str(REPO / "jobs" / "migrate.py"), "--config", str(config),
    ]  # fmt: skip
    return subprocess.Popen(
        command, cwd=REPO, env=job_env({"AWS_ENDPOINT_URL_STS": sts_endpoint}), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip


@pytest.mark.e2e
def test_no_spelling_of_a_credential_reaches_savepoint_checkpoint_output_or_event_log(
    dynamodb, endpoint_url, table_name, tmp_path
):
    source, target = table_name("secret-src"), table_name("secret-dst")
    create_sample_table(dynamodb, source)
    put_items(dynamodb, source, make_items(200))
    config = write_config(
        tmp_path,
        {
            "source": side(endpoint_url, source, scanSegments=4, credentials=SOURCE_CREDENTIALS),
            "target": side(endpoint_url, target, credentials=TARGET_CREDENTIALS, streamChanges=True),
            "checkpointLocation": str(tmp_path / "checkpoint"),
        },
    )
    events = tmp_path / "events"
    events.mkdir()

    lines: list[str] = []
    job = start_with_event_log(config, events, endpoint_url)
    wait_for_output(job, "replicating changes of", lines)
    reader = drain(job, lines)  # an undrained pipe fills and blocks the job
    put_items(dynamodb, source, make_items(20, start=1000))  # replicated: the checkpoint gets offsets and commits
    wait_until_converged(dynamodb, source, target)
    os.killpg(job.pid, signal.SIGINT)
    assert job.wait(timeout=60) == 0, "".join(lines[-60:])
    reader.join(timeout=10)

    savepoints = files_under(tmp_path / "savepoints")
    checkpoint = files_under(tmp_path / "checkpoint")
    event_log = files_under(events)
    assert any(p.name.startswith("savepoint_") for p in savepoints)
    assert any(p.parent.name == "offsets" for p in checkpoint) and any(p.parent.name == "commits" for p in checkpoint)
    assert any("SparkListenerEnvironmentUpdate" in p.read_text(errors="replace") for p in event_log)
    searched = {"the job's output": "".join(lines)}
    for path in savepoints + checkpoint + event_log:
        searched[str(path)] = path.read_text(errors="replace")
    for where, text in searched.items():
        for secret in PLANTED:
            assert secret not in text, f"{secret} leaked into {where}"
