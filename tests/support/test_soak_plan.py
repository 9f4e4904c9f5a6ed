"""The soak's plans and tables (testsupport/soak.py, soak_data.py) without a server: a seed gives
the same round again (a failure replays), the seeds cover every mode, signal and moment, and
every key schema gives distinct keys to distinct item numbers."""

from __future__ import annotations

import random

import pytest

from migrator.items import item_size_bytes, key_of
from testsupport.soak import (
    BETWEEN_RUNS, MODES, REPLICATION_MOMENTS, SIGNALS, SNAPSHOT_MOMENTS, RoundResult, plan_round, signals_sent,
)  # fmt: skip
from testsupport.soak_data import KEY_TYPES, KeySchema, make_source_items


def test_a_seed_gives_the_same_round_and_its_table_again():
    assert plan_round(7) == plan_round(7) and plan_round(7) != plan_round(8)
    plan = plan_round(7)
    first = make_source_items(random.Random(1), plan.schema, 50, 1)
    assert make_source_items(random.Random(1), plan.schema, 50, 1) == first


def test_the_seeds_draw_every_mode_signal_and_moment():
    plans = [plan_round(seed) for seed in range(300)]
    assert {p.mode for p in plans} == set(MODES)
    drawn = {(i.signal, i.moment) for p in plans for i in p.interruptions}
    assert {s for s, _ in drawn} == set(SIGNALS)
    assert {m for _, m in drawn} == set(SNAPSHOT_MOMENTS + REPLICATION_MOMENTS)
    assert all(plan_round(seed, short=True).items <= 120 for seed in range(50))


def test_no_round_waits_for_a_moment_its_mode_never_reaches():
    for seed in range(300):
        plan = plan_round(seed)
        moments = {i.moment for i in plan.interruptions}
        if not plan.replicates:
            assert not moments & set(REPLICATION_MOMENTS), plan.describe()
        if plan.mode in ("export", "skip_snapshot"):
            assert not moments & {"mid_segment", "segment_done"}, plan.describe()


def test_a_delta_round_is_its_seeds_round_into_delta_with_no_moment_a_delta_target_lacks():
    for seed in range(200):
        into_dynamodb, into_delta = plan_round(seed), plan_round(seed, target="delta")
        assert (into_delta.schema, into_delta.items, into_delta.mode) == (into_dynamodb.schema, into_dynamodb.items, into_dynamodb.mode)
        assert into_delta == plan_round(seed, target="delta") and into_delta.target == "delta"
        assert "mid_batch" not in {i.moment for i in into_delta.interruptions}  # a BatchWriteItem: DynamoDB's only
    assert {plan_round(seed, target="delta").between_runs for seed in range(50)} == set(BETWEEN_RUNS)
    assert {plan_round(seed).between_runs for seed in range(50)} == {"keep"}


@pytest.mark.parametrize("hash_type", KEY_TYPES)
@pytest.mark.parametrize("range_type", (None, *KEY_TYPES))
def test_every_key_schema_gives_distinct_keys_and_items_under_400_kb(hash_type, range_type):
    schema = KeySchema(hash_type, range_type)
    items = make_source_items(random.Random(3), schema, 300, 2)
    assert len({key_of(i, schema.names) for i in items}) == 300
    assert max(item_size_bytes(i) for i in items) < 400_000
    assert sum(item_size_bytes(i) > 399_000 for i in items) == 2


def test_the_summary_counts_every_signal_sent_whatever_its_moment():
    result = RoundResult(plan_round(321))
    result.kills.update({"SIGTERM@mid_segment": 1, "SIGTERM@committed": 1, "SIGKILL@replicating": 1})
    other = RoundResult(plan_round(311))
    other.kills.update({"SIGTERM@replicating": 2})
    assert signals_sent([result, other]) == {"SIGTERM": 4, "SIGKILL": 1}


def test_the_verdict_counts_a_key_the_target_holds_twice_and_is_then_not_converged():
    from testsupport.convergence import compare_items

    names = ("pk",)
    source = [{"pk": {"S": "a"}, "v": {"N": "1"}}, {"pk": {"S": "b"}, "v": {"N": "2"}}]
    assert compare_items(source, list(source), names, None).converged
    verdict = compare_items(source, [*source, dict(source[1])], names, None)
    assert not verdict.converged and verdict.twice == ['{"pk": {"S": "b"}} (2 rows)'], verdict
    assert "1 held twice" in verdict.describe()
