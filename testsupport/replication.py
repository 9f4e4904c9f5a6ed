"""Live changes while a job replicates (DynamoDB Streams mode), and waiting until the target equals the
source; a Spark checkpoint's commits and heartbeat, aged as if the job had stopped hours ago."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

from migrator.replicate.checkpoint import HEARTBEAT_FILE
from testsupport.all_types import by_key
from testsupport.endpoint import put_items, scan_all
from testsupport.sample_data import make_item, make_items

RUN_SECONDS = 90  # until_converged fails a run that has not converged by then
HOURS = 3600


class Writer(threading.Thread):
    """Puts, updates and deletes on the source until stopped; the same few keys again and again."""

    def __init__(self, client, table: str, seed: int):
        super().__init__(daemon=True)
        self.client, self.table, self.random = client, table, random.Random(seed)
        self.stop = threading.Event()
        self.writes = 0
        self.deleted: set[int] = set()  # item numbers deleted at least once

    def run(self) -> None:
        while not self.stop.is_set():
            self.write_once()
            time.sleep(0.01)

    def write_once(self) -> None:
        number = self.random.randrange(0, 400)
        item = make_item(number)
        action = self.random.random()
        if action < 0.2:
            self.client.delete_item(TableName=self.table, Key={"pk": item["pk"], "sk": item["sk"]})
            self.deleted.add(number)
        else:
            item["version"] = {"N": str(self.writes)}
            self.client.put_item(TableName=self.table, Item=item)
        self.writes += 1

    def wait_for_writes(self, count: int, timeout: float = 60) -> None:
        """Return once `count` more writes have been made from now: changes the run must see."""
        wanted = self.writes + count
        deadline = time.monotonic() + timeout
        while self.writes < wanted:
            assert self.is_alive(), "the writer stopped"
            assert time.monotonic() < deadline, f"{wanted - self.writes} of {count} writes not made in {timeout} s"
            time.sleep(0.01)


def wait_until_converged(client, source: str, target: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while True:
        want, got = by_key(scan_all(client, source)), by_key(scan_all(client, target))
        if want == got:
            return
        if time.monotonic() > deadline:
            missing = len(set(want) - set(got))
            extra = len(set(got) - set(want))
            differing = sum(1 for k in set(want) & set(got) if want[k] != got[k])
            raise AssertionError(f"not converged: {missing} missing, {extra} resurrected/extra, {differing} differ")
        time.sleep(1)


class Changes:
    """Puts, an update and a delete on the source, once, the first time the job asks whether to stop."""

    def __init__(self, client, table: str, start: int):
        self.client, self.table, self.start, self.written = client, table, start, False

    def write(self) -> None:
        put_items(self.client, self.table, make_items(5, start=self.start))
        updated = make_item(self.start)
        updated["note"] = {"S": "updated while replicating"}
        self.client.put_item(TableName=self.table, Item=updated)
        gone = make_item(self.start + 1)
        self.client.delete_item(TableName=self.table, Key={"pk": gone["pk"], "sk": gone["sk"]})
        self.written = True


def until_converged(client, source: str, target: str, changes: Changes | None = None, checkpoint: Path | None = None):
    """A should_stop for migrate(): write the changes once, then stop when the target equals the
    source (and Spark committed a batch, when given the checkpoint); fail after RUN_SECONDS."""
    deadline = time.monotonic() + RUN_SECONDS

    def should_stop(summary) -> bool:
        if changes is not None and not changes.written:
            changes.write()
            return False
        assert time.monotonic() < deadline, f"not converged in {RUN_SECONDS} s: {summary}"
        if checkpoint is not None and not list_commits(checkpoint):
            return False
        return by_key(scan_all(client, source)) == by_key(scan_all(client, target))

    return should_stop


def list_commits(checkpoint: Path) -> list[Path]:
    folder = checkpoint / "commits"
    return [p for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []


def age_checkpoint(checkpoint: Path, hours: float) -> None:
    """Make the checkpoint look last advanced `hours` ago: its commits and its heartbeat.

    A checkpoint with neither is judged by its replay start instead, which this does not age: a test
    that ages one must have let the run commit a batch first."""
    then = time.time() - hours * HOURS
    commits = list_commits(checkpoint)
    heartbeat = (checkpoint / HEARTBEAT_FILE).exists()
    assert commits or heartbeat, f"{checkpoint}: no committed batch and no heartbeat to age"
    for commit in commits:
        os.utime(commit, (then, then))
    if heartbeat:
        write_heartbeat(checkpoint, then)


def write_heartbeat(checkpoint: Path, alive_at: float) -> None:
    """Rewrite the heartbeat as a stopped job left it; Hadoop's checksum file goes with the old text."""
    (checkpoint / HEARTBEAT_FILE).write_text(json.dumps({"aliveAt": alive_at}))
    (checkpoint / f".{HEARTBEAT_FILE}.crc").unlink(missing_ok=True)
