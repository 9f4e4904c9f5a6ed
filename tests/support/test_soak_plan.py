"""The soak's plans and tables (testsupport/soak.py, soak_data.py) without a server: a seed gives
the same round again (a failure replays), the seeds cover every mode, signal and moment, and
every key schema gives distinct keys to distinct item numbers."""

from __future__ import annotations

import random

import pytest

from migrator.items import item_size_bytes, key_of
from testsupport.soak import MODES, REPLICATION_MOMENTS, SIGNALS, SNAPSHOT_MOMENTS, RoundResult, plan_round, signals_sent
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
