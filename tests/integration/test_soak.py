"""The convergence soak's short version: two small rounds with fixed seeds (testsupport/soak.py).

Each round is a random table, mode, writer, faults and one interruption of a spark-submit job,
then the target compared with the source key by key: nothing lost, resurrected or altered.
`scripts/soak.py` runs as many rounds as asked (docs/soak.md).
"""

from __future__ import annotations

import pytest

from testsupport.soak import plan_round, run_round

pytestmark = [pytest.mark.integration, pytest.mark.e2e]  # each round stops its runs with kill -9 or Ctrl+C

# Each is also the fixed-seed regression of a bug the soak found (docs/soak.md, "What it found").
# Seed 43: a snapshot in two parallel segments of a binary hash key (B+N, an item near 400 KB),
# kill -9 while a Scan is in flight, then the rerun.
# Seed 1: snapshot + DynamoDB Streams of an N+B key, changes all along, Ctrl+C once a batch is
# committed, the rerun replicates until the target equals the source; expired iterators,
# LimitExceeded, latency spikes, 503s.
SEEDS = {"snapshot-kill-9": 43, "streams-ctrl-c": 1}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=SEEDS.keys())
def test_a_short_soak_round_converges(endpoint_url, tmp_path, seed):
    plan = plan_round(seed, short=True)
    result = run_round(plan, endpoint_url, tmp_path)

    assert result.passed, result.report()
    assert sum(result.kills.values()) == 1, result.report()  # the job was interrupted, then rerun
    assert result.runs == 2
    assert result.verdict.source_items >= plan.items // 2
    if plan.replicates:
        assert result.changes > 0, result.report()
