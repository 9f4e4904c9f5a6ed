"""Replication (`migrator.replicate.query.replicate`) against the scripted DynamoDB Streams server.

What moto's one-shard stream cannot do: shard splits with the same key changed in the parent
and in a child, shards appearing mid-run, expired iterators, throttling, trimmed records and
checkpointed shards that are gone. The source is a `ScriptedStreamServer` (only its streams
API is used: replicate() makes no DynamoDB table call on the source); the target is a table
on the emulator. Every change carries a version (`v`) that grows in the order the script
writes it, so the tests can check the applied outcome and that no key ever goes back to an
older version while the query runs.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from migrator.config import load_config
from migrator.errors import CheckpointError, MigratorError
from migrator.replicate.query import replicate
from migrator.source.dynamodb_streams import StreamInfo
from testsupport.endpoint import scan_all, side
from testsupport.jobs import write_config
from testsupport.streamserver import ScriptedStreamServer, make_shard_id

pytestmark = pytest.mark.integration

VIEW = "NEW_AND_OLD_IMAGES"
KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
KEY_NAMES = ("pk", "sk")
RUN_SECONDS = 40  # the deadline of one run of the query (they take 5 to 15 s)
A, B, C, D, N = (make_shard_id(x) for x in ("a", "b", "c", "d", "n"))

Key = tuple[str, int]


# ---- the script: changes written to the scripted stream, and the state they lead to ----


class Script:
    """Writes changes of (pk, sk) keys to the server's shards and keeps the source's state."""

    def __init__(self, server: ScriptedStreamServer):
        self.server = server
        self.state: dict[Key, dict[str, dict]] = {}
        self.version = 0

    def put(self, shard: str, pk: str, sk: int = 0, more: dict[str, dict] | None = None) -> str:
        """INSERT (or MODIFY when the key exists) with the next version, and `more` attributes; returns the
        sequence number."""
        self.version += 1
        key = (pk, sk)
        new = {**_keys(key), "v": {"N": str(self.version)}, "from": {"S": f"{shard[-1]}:{self.version}"}, **(more or {})}
        old = self.state.get(key)
        event = "INSERT" if old is None else "MODIFY"
        seq = self.server.put(shard, event, _keys(key), new_image=new, old_image=old)
        self.state[key] = new
        return seq

    def delete(self, shard: str, pk: str, sk: int = 0) -> str:
        self.version += 1
        key = (pk, sk)
        old = self.state.pop(key)
        return self.server.put(shard, "REMOVE", _keys(key), old_image=old)

    def expected(self) -> dict[Key, dict[str, dict]]:
        return {key: dict(item) for key, item in self.state.items()}


def _keys(key: Key) -> dict[str, dict]:
    return {"pk": {"S": key[0]}, "sk": {"N": str(key[1])}}


def _key_of(item: dict[str, dict]) -> Key:
    return item["pk"]["S"], int(item["sk"]["N"])


# ---- the target and the runs ----


def create_target(dynamodb, name: str) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def target_state(dynamodb, table: str) -> dict[Key, dict[str, dict]]:
    return {_key_of(item): item for item in scan_all(dynamodb, table)}


def committed(checkpoint: Path) -> bool:
    """Every batch in Spark's offset log has its commit: nothing is left to replay."""

    def batches(kind: str) -> set[int]:
        folder = checkpoint / kind
        return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()

    offsets = batches("offsets")
    return bool(offsets) and offsets <= batches("commits")


class Replication:
    """One source server, one target table, one config and one checkpoint; run as often as needed."""

    def __init__(
        self, spark, dynamodb, endpoint_url: str, server: ScriptedStreamServer, target: str, tmp_path: Path,
        **target_options: Any,
    ):  # fmt: skip
        self.spark, self.dynamodb, self.server, self.target = spark, dynamodb, server, target
        create_target(dynamodb, target)
        path = write_config(
            tmp_path,
            {
                "source": side(server.endpoint_url, server.table_name),
                "target": side(endpoint_url, target, **target_options),
            },
        )
        self.config = load_config(str(path)).config
        self.stream = StreamInfo(server.stream_arn, VIEW, KEY_NAMES)
        self.checkpoint = tmp_path / "checkpoint"
        self.observed: list[dict[Key, dict[str, dict]]] = []  # the target at every poll, every run

    def state(self) -> dict[Key, dict[str, dict]]:
        return target_state(self.dynamodb, self.target)

    def clear_target(self) -> None:
        for pk, sk in self.state():
            self.dynamodb.delete_item(TableName=self.target, Key={"pk": {"S": pk}, "sk": {"N": str(sk)}})

    def run(
        self,
        done: Callable[[dict[Key, dict]], bool],
        on_poll: Callable[[dict[Key, dict]], None] | None = None,
        seconds: float = RUN_SECONDS,
    ):
        """Run replicate() until done(target state) (then it returns the summary) or the deadline (then fail)."""
        deadline = time.monotonic() + seconds
        outcome = {"done": False}

        def should_stop(summary) -> bool:
            state = self.state()
            self.observed.append(state)
            if on_poll is not None:
                on_poll(state)
            if done(state):
                outcome["done"] = True
                return True
            return time.monotonic() > deadline

        summary = replicate(self.spark, self.config, self.stream, str(self.checkpoint), should_stop=should_stop)
        assert outcome["done"], (
            f"replication did not reach the expected state in {seconds:.0f} s; target: {_show(self.state())}; "
            f"stream server calls: {self.server.counts}, errors: {self.server.fault_counts}, bugs: {self.server.errors}"
        )
        return summary

    def run_until(self, expected: Callable[[], dict[Key, dict]], *, commit: bool = True, **kwargs):
        """Run until the target equals expected() (and, with commit, Spark committed every batch)."""
        return self.run(lambda state: state == expected() and (not commit or committed(self.checkpoint)), **kwargs)

    def run_expecting_failure(self, seconds: float = RUN_SECONDS) -> Exception | None:
        """Run until the query fails (the error) or the deadline passes (None).

        should_stop stays quick (no scan), so the query fails while replicate() waits on it, as
        it almost always does in production: an error must come out as a MigratorError then too.
        """
        deadline = time.monotonic() + seconds

        def should_stop(summary) -> bool:
            return time.monotonic() > deadline

        try:
            replicate(self.spark, self.config, self.stream, str(self.checkpoint), should_stop=should_stop)
        except Exception as exc:  # noqa: BLE001 - the test asserts on the type
            return exc
        return None

    def assert_versions_never_went_back(self) -> None:
        """The applied order: at every poll each present key shows a version at least the last one seen."""
        seen: dict[Key, int] = {}
        for poll, state in enumerate(self.observed):
            for key, item in state.items():
                version = int(item["v"]["N"])
                assert version >= seen.get(key, 0), (
                    f"{key} went back from version {seen[key]} to {version} at poll {poll}: "
                    "changes applied out of order"
                )
                seen[key] = version


def _show(state: dict[Key, dict]) -> str:
    return repr({key: (item["v"]["N"], item["from"]["S"]) for key, item in sorted(state.items())})


@pytest.fixture(scope="module", autouse=True)
def warm_replication(spark, dynamodb, endpoint_url, tmp_path_factory):
    """One throw-away replication first: a cold session's first streaming batch takes ~30 s here
    (Python workers, the foreachBatch callback server), which would eat the first test's deadline."""
    with ScriptedStreamServer(table_name="warmup", key_schema=KEY_SCHEMA, view_type=VIEW) as server:
        script = Script(server)
        server.add_shard(A)
        script.put(A, "warm")
        target = f"warm-{uuid.uuid4().hex[:10]}"
        run = Replication(spark, dynamodb, endpoint_url, server, target, tmp_path_factory.mktemp("warm"))
        run.run_until(script.expected, seconds=120)


@pytest.fixture
def make_server():
    servers: list[ScriptedStreamServer] = []

    def make(**options: Any) -> ScriptedStreamServer:
        options.setdefault("key_schema", KEY_SCHEMA)
        server = ScriptedStreamServer(table_name="orders", view_type=VIEW, **options).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
    errors = [error for server in servers for error in server.errors]
    assert not errors, f"the scripted server hit unexpected errors (hooks or its own bugs): {errors}"


@pytest.fixture
def replication(spark, dynamodb, endpoint_url, table_name, tmp_path):
    def make(server: ScriptedStreamServer, **target_options: Any) -> Replication:
        return Replication(spark, dynamodb, endpoint_url, server, table_name("scripted"), tmp_path, **target_options)

    return make


def record_ends(server: ScriptedStreamServer) -> list[str]:
    """Wrap the server's GetRecords: the iterators whose answer had no NextShardIterator (a closed shard's end)."""
    ends: list[str] = []

    def recording(operation: str, request: dict, answer: dict) -> None:
        if operation == "GetRecords" and "NextShardIterator" not in answer:
            ends.append(request["ShardIterator"])

    server.add_answer_hook(recording)
    return ends


def shard_of(server: ScriptedStreamServer, operation: str, request: dict) -> str | None:
    """The shard a GetShardIterator or GetRecords request is about."""
    if operation == "GetShardIterator":
        return request.get("ShardId")
    if operation == "GetRecords":
        return server.decode_iterator(request["ShardIterator"])[0]
    return None


def iterator_requests(server: ScriptedStreamServer, shard: str) -> list[dict]:
    """Every GetShardIterator request for the shard, in order."""
    return [r for op, r in server.calls if op == "GetShardIterator" and r["ShardId"] == shard]


# ---- 1. a split: the same key in the parent and in a child ----


def test_split_applies_the_childs_last_change_after_the_parent(make_server, replication):
    # Children listed before their parent: the reader must order lineage itself.
    server = make_server(shard_order="reverse")
    script = Script(server)
    server.add_shard(A)
    for _ in range(3):
        script.put(A, "moved")  # changed several times in the parent...
    script.put(A, "parent-only")
    script.put(A, "dropped-in-child", 1)
    script.put(A, "other-child", 2)
    script.put(A, "parent-only", 5)
    script.delete(A, "parent-only", 5)  # ...deleted in the parent and never seen again
    server.split(A, [B, C])
    script.put(B, "moved")  # ...and in a child: its last change is the final state
    script.put(B, "moved")
    script.delete(B, "dropped-in-child", 1)
    script.put(C, "other-child", 2)
    script.put(C, "child-only", 3)
    expected = script.expected()
    ends = record_ends(server)

    run = replication(server)
    run.run_until(lambda: expected, commit=False)

    final = run.state()
    assert final == expected, _show(final)
    assert final[("moved", 0)]["from"]["S"].startswith("b:"), "the parent's change won over the child's"
    assert ("parent-only", 0) in final and ("dropped-in-child", 1) not in final and ("parent-only", 5) not in final
    run.assert_versions_never_went_back()

    # Lineage: nothing of a child was asked for before the parent's GetRecords returned its end.
    calls = server.calls
    parent_end = next(
        i for i, (op, request) in enumerate(calls)
        if op == "GetRecords" and request["ShardIterator"] in ends and shard_of(server, op, request) == A
    )  # fmt: skip
    early = [
        (i, op) for i, (op, request) in enumerate(calls[:parent_end]) if shard_of(server, op, request) in (B, C)
    ]
    assert not early, f"children read before the parent's end (call {parent_end}): {early}"
    for child in (B, C):
        assert any(shard_of(server, op, r) == child for op, r in calls[parent_end:] if op == "GetRecords"), child


# ---- 2. shards appearing while the query runs ----


def test_shards_appearing_mid_run_are_discovered_and_read(make_server, replication):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3"):
        script.put(A, pk)
    phase = {"split": False, "new_root": False}
    expected_first = script.expected()

    def new_root_on_first_child_read(operation: str, request: dict) -> None:
        # Right when the reader first asks for a child's iterator, an unrelated shard appears.
        if operation == "GetShardIterator" and request.get("ShardId") == B and not phase["new_root"]:
            phase["new_root"] = True
            server.add_shard(N)
            script.put(N, "root-1")
            script.put(N, "root-2")
            script.delete(N, "root-2")

    def on_poll(state: dict) -> None:
        if not phase["split"] and state == expected_first:
            phase["split"] = True  # the first batch is applied: more changes in A, then a split
            script.put(A, "k2")
            server.split(A, [B, C])
            script.put(B, "k1")
            script.delete(C, "k3")
            script.put(C, "k4")
            server.add_hook(new_root_on_first_child_read)

    run = replication(server)
    run.run(lambda state: phase["new_root"] and state == script.expected(), on_poll=on_poll)

    assert phase["split"] and phase["new_root"]
    final = run.state()
    assert final == script.expected(), _show(final)
    assert set(final) == {("k1", 0), ("k2", 0), ("k4", 0), ("root-1", 0)}
    assert final[("k1", 0)]["from"]["S"].startswith("b:")
    run.assert_versions_never_went_back()
    for shard in (B, C, N):
        assert iterator_requests(server, shard), f"shard {shard} was never read"


# ---- 3. expired iterators ----


def test_expired_iterators_are_reacquired_after_the_last_record_read(make_server, replication):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3"):
        script.put(A, pk)
    server.fail_next("GetRecords", "ExpiredIteratorException", times=2)  # the very first reads
    expected_first = script.expected()
    state = {"phase2": False, "expired": False, "last_read": None}

    def expire_mid_read(operation: str, request: dict) -> None:
        # On a GetRecords past the phase-2 records (so within one read, after they were read):
        # a new record arrives and every iterator expires.
        if operation != "GetRecords" or state["expired"] or not state["phase2"]:
            return
        shard, position, *_ = server.decode_iterator(request["ShardIterator"])
        if shard == A and position > int(state["last_read"]):
            state["expired"] = True
            script.put(A, "k5")
            script.put(A, "k1")
            server.expire_iterators()

    def on_poll(target: dict) -> None:
        if not state["phase2"] and target == expected_first:
            script.put(A, "k1")
            script.delete(A, "k2")
            state["last_read"] = script.put(A, "k4")
            server.add_hook(expire_mid_read)
            state["phase2"] = True

    run = replication(server)
    # Committed too: a stop asked while a batch is being applied interrupts it before its records are counted.
    summary = run.run(
        lambda target: state["expired"] and target == script.expected() and committed(run.checkpoint), on_poll=on_poll
    )

    final = run.state()
    assert final == script.expected(), _show(final)
    assert set(final) == {("k1", 0), ("k3", 0), ("k4", 0), ("k5", 0)}  # the deleted k2 stays deleted
    assert server.fault_counts.get("ExpiredIteratorException", 0) >= 3
    # Re-acquired right after the last record read, not from the batch's start nor from LATEST.
    after_last = [r for r in iterator_requests(server, A) if r.get("SequenceNumber") == state["last_read"]]
    assert after_last and all(r["ShardIteratorType"] == "AFTER_SEQUENCE_NUMBER" for r in after_last)
    assert not [r for r in iterator_requests(server, A) if r["ShardIteratorType"] in ("LATEST", "AT_TIMESTAMP")]
    assert summary.records >= script.version
    run.assert_versions_never_went_back()


# ---- 4. throttling ----


def test_limit_exceeded_is_retried_until_every_change_is_applied(make_server, replication):
    server = make_server(shard_read_limit=2)  # AWS: no more than two readers per shard
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3"):
        script.put(A, pk)
    server.fail_next("DescribeStream", "LimitExceededException")
    server.fail_next("GetShardIterator", "LimitExceededException")
    server.fail_next("GetRecords", "LimitExceededException", times=3)
    expected_first = script.expected()
    phase = {"more": False}

    def on_poll(target: dict) -> None:
        if not phase["more"] and target == expected_first:
            phase["more"] = True
            script.put(A, "k1")
            script.delete(A, "k3")
            server.split(A, [B])
            script.put(B, "k4")
            server.fail_next("GetRecords", "LimitExceededException", times=2, shard_id=B)

    run = replication(server)
    run.run(lambda target: phase["more"] and target == script.expected(), on_poll=on_poll)

    final = run.state()
    assert final == script.expected(), _show(final)
    assert set(final) == {("k1", 0), ("k2", 0), ("k4", 0)}
    assert server.fault_counts.get("LimitExceededException", 0) >= 1 + 1 + 3 + 2
    run.assert_versions_never_went_back()


# ---- 5. records trimmed past the checkpoint ----


def test_checkpoint_behind_the_trim_point_fails_and_applies_nothing_newer(make_server, replication):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3"):
        script.put(A, pk)
    applied = script.expected()
    run = replication(server)
    run.run_until(lambda: applied)  # applied and committed: the checkpoint is after k3

    lost = script.put(A, "k4")  # written while stopped, then trimmed before it was read
    keep = script.put(A, "k1")
    script.put(A, "k5")
    assert server.trim(A, keep) == 4 and int(lost) < int(keep)

    error = run.run_expecting_failure(seconds=25)

    assert error is not None, f"the run over a trimmed checkpoint did not fail; target: {_show(run.state())}"
    assert run.state() == applied, f"applied records past the trimmed ones: {_show(run.state())}"
    assert "trimmed" in str(error) and A in str(error), str(error)
    assert isinstance(error, CheckpointError), f"replicate raised {type(error).__name__}, not a CheckpointError: {error}"
    assert "invalidCheckpointBehavior: restart" in str(error)


def test_closed_shard_trimmed_to_its_end_past_the_checkpoint_is_not_skipped(make_server, replication):
    """Every unread record of a closed shard was trimmed: nothing is left to read, but records are lost."""
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2"):
        script.put(A, pk)
    applied = script.expected()
    run = replication(server)
    run.run_until(lambda: applied)

    last = script.put(A, "k3")  # never read: trimmed below
    server.split(A, [B])
    script.put(B, "k4")
    assert server.trim(A, int(last) + 1) == 3

    error = run.run_expecting_failure(seconds=25)

    assert error is not None, (
        f"records of {A} were trimmed unread, yet the run did not fail; target: {_show(run.state())}"
    )
    assert run.state() == applied, f"applied the child past the lost records: {_show(run.state())}"
    assert "trimmed" in str(error) and A in str(error), str(error)
    assert isinstance(error, CheckpointError), f"replicate raised {type(error).__name__}, not a CheckpointError: {error}"
    assert "invalidCheckpointBehavior: restart" in str(error)


def test_a_replayed_batch_from_trim_horizon_whose_first_records_were_trimmed_fails(make_server, replication):
    """The first batch read a shard from TRIM_HORIZON and was not committed; its first record was
    trimmed before the replay. TRIM_HORIZON now starts after it, with no TrimmedDataAccessException
    (only AFTER_SEQUENCE_NUMBER raises one): the replay must notice and stop."""
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    lost = script.put(A, "k1")
    keep = script.put(A, "k2")
    script.put(A, "k3")
    run = replication(server)
    run.run_until(script.expected)
    assert sorted(p.name for p in (run.checkpoint / "offsets").iterdir() if p.name.isdigit()) == ["0"]
    assert _shard_sequence(run.checkpoint / "offsets" / "0", A) is not None
    (run.checkpoint / "commits" / "0").unlink()  # a crash after applying batch 0, before Spark committed it
    (run.checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)
    run.clear_target()
    assert server.trim(A, keep) == 1 and int(lost) < int(keep)

    error = run.run_expecting_failure(seconds=25)

    assert error is not None, f"the replay skipped the trimmed record; target: {_show(run.state())}"
    assert run.state() == {}, f"applied a batch whose first record was trimmed: {_show(run.state())}"
    assert "trimmed" in str(error) and A in str(error), str(error)
    assert isinstance(error, CheckpointError), f"replicate raised {type(error).__name__}, not a CheckpointError: {error}"


def test_a_finished_parent_left_out_of_one_listing_is_not_read_again(make_server, replication):
    """DescribeStream leaves a finished parent out once, then lists it again: read again from its
    start it would hold its child back and put its old images over the child's newer ones."""
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    script.put(A, "k1")
    server.split(A, [B])
    script.put(B, "k1")
    first = script.expected()
    phase = {"unlisted": False, "written": False}

    def write_once_listed_again(operation: str, request: dict) -> None:
        if operation == "DescribeStream" and phase["unlisted"] and not server.unlisting(A) and not phase["written"]:
            phase["written"] = True
            script.put(B, "k2")

    def on_poll(target: dict) -> None:
        if not phase["unlisted"] and target == first and committed(run.checkpoint):
            server.unlist_next(A)  # A and B are read: A is finished
            phase["unlisted"] = True

    server.add_hook(write_once_listed_again)
    run = replication(server)
    run.run(lambda t: phase["written"] and t == script.expected() and committed(run.checkpoint), on_poll=on_poll)
    run.assert_versions_never_went_back()
    reads_of_a = [r for r in iterator_requests(server, A)]
    assert len(reads_of_a) == 1, f"{A} was read again after it was finished: {reads_of_a}"


# ---- 6. a checkpointed shard that is gone ----


def test_checkpointed_shard_gone_from_the_stream_fails_naming_it(make_server, replication):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2"):
        script.put(A, pk)
    applied = script.expected()
    run = replication(server)
    run.run_until(lambda: applied)  # A is checkpointed, open, not finished

    script.put(A, "k3")  # never read: the shard expires with it
    server.split(A, [B])
    script.put(B, "k4")
    server.remove_shard(A)

    error = run.run_expecting_failure(seconds=25)

    assert error is not None, (
        f"shard {A} of the checkpoint is gone, yet the run did not fail (its unread records were skipped); "
        f"target: {_show(run.state())}"
    )
    assert run.state() == applied, f"applied changes past the lost shard: {_show(run.state())}"
    assert A in str(error), str(error)
    assert isinstance(error, CheckpointError), f"replicate raised {type(error).__name__}, not a CheckpointError: {error}"
    assert "invalidCheckpointBehavior: restart" in str(error)


# ---- 7. restarts ----


def test_restart_replays_the_uncommitted_batch_and_skips_nothing(make_server, replication):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3", "k4", "k5"):
        script.put(A, pk)
    first = script.expected()
    phase = {"second": False}

    def on_poll(target: dict) -> None:
        if not phase["second"] and target == first:
            phase["second"] = True  # batch 0 applied: batch 1 brings these
            script.put(A, "k1")
            script.delete(A, "k2")
            script.put(A, "k6")

    run = replication(server)
    run.run(lambda t: phase["second"] and t == script.expected() and committed(run.checkpoint), on_poll=on_poll)
    after_first_run = script.expected()

    # A crash after the last batch was applied but before Spark committed it: drop its commit.
    commits = sorted((run.checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last_commit = commits[-1]
    assert last_commit.name.isdigit() and int(last_commit.name) >= 1, [p.name for p in commits]
    offsets_file = run.checkpoint / "offsets" / last_commit.name
    replayed_start = _shard_sequence(run.checkpoint / "offsets" / str(int(last_commit.name) - 1), A)
    last_commit.unlink()
    (last_commit.parent / f".{last_commit.name}.crc").unlink(missing_ok=True)
    assert offsets_file.exists()

    # Written while stopped: updates over the replayed batch's keys, a re-insert, a delete, a split.
    script.put(A, "k1")
    script.put(A, "k2")  # re-inserted after the replayed batch's delete
    script.delete(A, "k3")
    server.split(A, [B])
    script.put(B, "k4")
    script.put(B, "k7")
    server.clear_calls()
    server.fail_next("GetRecords", "ExpiredIteratorException")  # the replay's first read

    summary = run.run_until(script.expected)

    final = run.state()
    assert final == script.expected(), _show(final)
    assert set(final) == {("k1", 0), ("k2", 0), ("k4", 0), ("k5", 0), ("k6", 0), ("k7", 0)}
    assert final != after_first_run
    # The replayed batch was re-read by sequence number from where the batch before it ended.
    reread = [r for r in iterator_requests(server, A) if r.get("SequenceNumber") == replayed_start]
    assert reread, f"batch {last_commit.name} was not re-read after {replayed_start}: {iterator_requests(server, A)}"
    assert summary.records >= 3 + 5  # the replayed batch and everything written while stopped
    assert server.fault_counts.get("ExpiredIteratorException") == 1
    run.assert_versions_never_went_back()


def test_a_failed_re_read_on_an_executor_stops_with_the_cause_and_commits_nothing(make_server, replication):
    """After a restart an executor re-reads the uncommitted batch; when that fails the job must stop
    with the cause. (A failed foreachBatch with a long Java trace used to kill Spark's query thread
    in a regex StackOverflowError, and replicate() then returned as if stopped on purpose.)"""
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2"):
        script.put(A, pk)
    first = script.expected()
    phase = {"second": False}

    def on_poll(target: dict) -> None:
        if not phase["second"] and target == first:
            phase["second"] = True
            script.put(A, "k3")

    run = replication(server)
    run.run(lambda t: phase["second"] and t == script.expected() and committed(run.checkpoint), on_poll=on_poll)
    commits = sorted((run.checkpoint / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last_commit = commits[-1]
    last_commit.unlink()  # a crash between applying the last batch and committing it
    (last_commit.parent / f".{last_commit.name}.crc").unlink(missing_ok=True)
    run.clear_target()
    server.fail_next("GetRecords", "ValidationException", times=100)  # the executor's re-read

    error = run.run_expecting_failure(seconds=40)

    assert error is not None, f"the failed re-read did not stop the job; target: {_show(run.state())}"
    assert isinstance(error, MigratorError), f"replicate raised {type(error).__name__}, not a MigratorError: {error}"
    assert "ValidationException" in str(error) or "injected" in str(error), str(error)
    assert len(str(error)) < 1000, f"the error is not one readable line: {error}"
    assert not (run.checkpoint / "commits" / last_commit.name).exists(), "the failed batch was committed"
    assert run.state() == {}, f"a batch whose read failed wrote to the target: {_show(run.state())}"


def test_clean_restart_resumes_at_the_checkpoint_and_skips_nothing(make_server, replication):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    for pk in ("k1", "k2", "k3"):
        script.put(A, pk)
    first = script.expected()
    run = replication(server)
    run.run_until(lambda: first)  # stopped after a committed batch
    checkpointed = _last_shard_sequence(run.checkpoint, A)

    script.put(A, "k1")
    script.delete(A, "k2")
    script.put(A, "k4")
    server.clear_calls()

    run.run_until(script.expected)

    final = run.state()
    assert final == script.expected(), _show(final)
    assert set(final) == {("k1", 0), ("k3", 0), ("k4", 0)}
    run.assert_versions_never_went_back()
    first_iterator = iterator_requests(server, A)[0]
    assert first_iterator.get("ShardIteratorType") == "AFTER_SEQUENCE_NUMBER" and (
        first_iterator.get("SequenceNumber") == checkpointed
    ), f"the restarted reader did not resume after the checkpoint's {checkpointed}: {first_iterator}"


def _shard_sequence(offsets_file: Path, shard: str) -> str | None:
    """The shard's sequence number in one batch of Spark's offset log (the source's offset is the last line)."""
    import json

    offset = json.loads(offsets_file.read_text().strip().splitlines()[-1])
    return offset["shards"][shard]["sequence_number"]


def _last_shard_sequence(checkpoint: Path, shard: str) -> str | None:
    last = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    return _shard_sequence(checkpoint / "offsets" / str(last), shard)


# ---- 8. deletions by Time to Live: applied, unless skipTtlDeletions ----


@pytest.mark.parametrize("skip", [False, True], ids=["applied", "skipped"])
def test_ttl_deletions_are_applied_unless_skipped(make_server, replication, skip):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    script.put(A, "expiring")
    script.put(A, "kept")
    server.put(A, "REMOVE", _keys(("expiring", 0)), old_image=script.state[("expiring", 0)], ttl_delete=True)
    if not skip:
        script.state.pop(("expiring", 0))
    script.put(A, "after")  # the record after the TTL deletion is applied either way
    expected = script.expected()

    run = replication(server, skipTtlDeletions=skip)
    run.run_until(lambda: expected)

    assert run.state() == expected, _show(run.state())


@pytest.mark.parametrize("skip", [False, True], ids=["applied", "skipped"])
def test_writes_replicated_from_another_region_are_applied_unless_skipped(make_server, replication, skip):
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    script.put(A, "local")
    local_state = dict(script.state)
    # Another region's writes, replicated into this table: an insert and an update of a local key.
    for key in (("remote", 0), ("local", 0)):
        script.version += 1
        image = {**_keys(key), "v": {"N": str(script.version)}, "from": {"S": "eu-west-1"}}
        event = "MODIFY" if key in script.state else "INSERT"
        server.put(A, event, _keys(key), new_image=image, old_image=script.state.get(key), replicated=True)
        script.state[key] = image
    script.put(A, "after")  # a local write after them is applied either way
    expected = script.expected()
    if skip:
        expected = {**local_state, ("after", 0): expected[("after", 0)]}

    run = replication(server, skipReplicatedWrites=skip)
    run.run_until(lambda: expected)

    assert run.state() == expected, _show(run.state())


# ---- many shards in one batch ----


def test_a_batch_of_many_shards_runs_in_a_few_tasks_and_applies_every_change(spark, make_server, replication):
    """A table at peak streams from thousands of shards; a Spark task per shard made a batch of
    2,000 shards 1,450 tasks, each with its own Python worker round trip, and the lag grew with
    them. A batch's ranges are packed into a few partitions, none of a key's changes split apart."""
    server = make_server()
    script = Script(server)
    shards = [make_shard_id(f"m{n}") for n in range(60)]
    for n, shard in enumerate(shards):
        server.add_shard(shard)
        for version in range(3):  # the same key three times in its shard: order within a shard holds
            script.put(shard, f"key-{n}")
        if n % 4 == 0:
            script.delete(shard, f"key-{n}")
    first_stage = last_stage_id(spark) + 1

    run = replication(server)
    run.run_until(script.expected)

    assert run.state() == script.expected()
    run.assert_versions_never_went_back()
    tasks = [stage.numTasks for stage in stages_from(spark, first_stage)]
    parallelism = spark.sparkContext.defaultParallelism
    assert tasks and max(tasks) <= 2 * parallelism, f"tasks per stage: {sorted(tasks)[-5:]}"


def last_stage_id(spark) -> int:
    """The id of the newest stage: that of a one-task job run now (stage ids grow by one per stage)."""
    spark.sparkContext.parallelize([0], 1).count()
    tracker = spark.sparkContext.statusTracker()
    newest_job = max(tracker.getJobIdsForGroup(None))
    return max(tracker.getJobInfo(newest_job).stageIds)


def stages_from(spark, first: int) -> list:
    """Every stage since `first` (the streaming query's jobs run in a job group of its own)."""
    tracker, stages = spark.sparkContext.statusTracker(), []
    while (stage := tracker.getStageInfo(first + len(stages))) is not None:
        stages.append(stage)
    return stages


def test_a_split_child_is_read_as_soon_as_its_parent_ends_not_when_a_listing_pass_shows_it(make_server, replication):
    """At 2,000 shards a listing pass takes seconds, and a child read only once a pass lists it
    waited about 10 s. When a parent is read to its end, its children are asked for at once
    (DescribeStream's ShardFilter CHILD_SHARDS). Here the listings miss the child for a while."""
    server = make_server()
    script = Script(server)
    server.add_shard(A)
    script.put(A, "k1")
    first = script.expected()
    phase = {"split": False, "child_read_while_unlisted": None}

    def on_poll(state: dict) -> None:
        if not phase["split"] and state == first and committed(run.checkpoint):
            phase["split"] = True
            server.split(A, [B])
            server.unlist_next(B, listings=4)  # the next 4 listings (2 s of triggers) miss it
            script.put(B, "k1")
            script.put(B, "k2")

    def first_read_of_b(operation: str, request: dict) -> None:
        if operation == "GetShardIterator" and request.get("ShardId") == B and phase["child_read_while_unlisted"] is None:
            phase["child_read_while_unlisted"] = server.unlisting(B) > 0

    server.add_hook(first_read_of_b)
    run = replication(server)
    run.run(lambda state: phase["split"] and state == script.expected() and committed(run.checkpoint), on_poll=on_poll)

    assert phase["child_read_while_unlisted"] is True, "the child was read only once a listing showed it"
    assert any(op == "DescribeStream" and r.get("ShardFilter") == {"Type": "CHILD_SHARDS", "ShardId": A} for op, r in server.calls)
    run.assert_versions_never_went_back()
