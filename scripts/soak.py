"""The randomized convergence soak: rounds of random tables, modes, writers, faults and
interruptions of a spark-submit job, each ending with the target compared with the source.

    .venv/bin/python scripts/soak.py --rounds 5 --seed 42
    nice .venv/bin/python scripts/soak.py --minutes 15 --seed 7
    .venv/bin/python scripts/soak.py --target delta --rounds 5 --seed 42

Round i runs seed S + i, printed first; `--seed <that seed> --rounds 1` replays a round. Exits 0
when every round converged (nothing lost, resurrected or altered), 1 otherwise. It starts its
own emulator unless AWS_ENDPOINT_URL names one. What a round does: testsupport/soak.py and
docs/soak.md.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # testsupport

from testsupport.emulator import EmulatorProcess  # noqa: E402
from testsupport.soak import TARGETS, RoundResult, plan_round, run_round, signals_sent  # noqa: E402


def main() -> int:
    arguments = parse_arguments()
    seed = arguments.seed if arguments.seed is not None else random.randrange(1_000_000)
    print(f"soak seed {seed}", flush=True)
    deadline = time.monotonic() + arguments.minutes * 60 if arguments.minutes else None
    results: list[RoundResult] = []
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    with (nullcontext() if endpoint else EmulatorProcess()) as emulator, tempfile.TemporaryDirectory() as workdir:
        endpoint_url = endpoint or emulator.endpoint_url
        for number in range(arguments.rounds or sys.maxsize):
            if deadline is not None and time.monotonic() >= deadline:
                break
            plan = plan_round(seed + number, short=arguments.short, target=arguments.target)
            print(f"round {number + 1}: {plan.describe()}", flush=True)
            result = run_round(plan, endpoint_url, Path(workdir) / f"round-{number + 1}", echo=echo)
            print(result.report(), flush=True)
            results.append(result)
    print(summary(results))
    return 0 if results and all(r.passed for r in results) else 1


def echo(event: str) -> None:
    print(f"  {event}", flush=True)


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, help="rounds to run (default: until --minutes pass)")
    parser.add_argument("--seed", type=int, help="the first round's seed (default: random, printed)")
    parser.add_argument("--minutes", type=float, help="start no round after this many minutes")
    parser.add_argument("--short", action="store_true", help="small rounds with one interruption, as the test suite's")
    parser.add_argument(
        "--target", choices=TARGETS, default="dynamodb",
        help="copy into a DynamoDB table, or into a Delta table that loses its savepoint between runs",
    )  # fmt: skip
    arguments = parser.parse_args()
    if not arguments.rounds and not arguments.minutes:
        parser.error("give --rounds, --minutes or both")
    return arguments


def summary(results: list[RoundResult]) -> str:
    """The figures docs/soak.md reports: rounds, kills, faults, items and changes, the outcome."""
    kills, faults, modes = signals_sent(results), Counter(), Counter()
    for result in results:
        faults.update(result.faults)
        modes[result.plan.mode + ("+stream" if result.plan.chained else "")] += 1
    compared = [r.verdict for r in results if r.verdict is not None]
    kinds = ("lost", "resurrected", "altered")
    lost, resurrected, altered = (sum(len(getattr(v, kind)) for v in compared) for kind in kinds)
    failed = [r.plan.seed for r in results if not r.passed]
    return "\n".join([
        f"soak: {len(results)} rounds, {len(results) - len(failed)} converged"
        + (f"; failed seeds: {failed}" if failed else ""),
        f"  modes: {dict(modes)}",
        f"  runs: {sum(r.runs for r in results)}; interruptions: {dict(kills)}",
        f"  faults injected: {dict(faults)} ({sum(faults.values())} in all)",
        f"  items seeded: {sum(r.plan.items for r in results)}; source changes: {sum(r.changes for r in results)}",
        f"  result: {lost} lost, {resurrected} resurrected, {altered} altered",
        f"  {sum(r.seconds for r in results) / 60:.1f} minutes",
    ])  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
