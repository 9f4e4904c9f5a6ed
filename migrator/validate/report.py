"""What a validation found: counts and samples added up from the executors, the summary and the JSON report.

Each partition of the join returns a `Tally`; the driver merges them. Samples are kept in the
order of their canonical key, at most about `failuresToFetch` per partition, so the driver
receives little and the report names the same samples whatever the partitioning. Pure: no pyspark, no boto3.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from migrator.errors import MigratorError, ReportUnwritable
from migrator.summary_json import problem_writing, write_whole

MISSING, EXTRA, DIFFERENT = "missing", "extra", "different"
DUPLICATE = "duplicate"  # a key held by more than one row of a side (a Delta table, an export): never compared
KINDS = (MISSING, DIFFERENT, EXTRA, DUPLICATE)


@dataclass(frozen=True, order=True)
class Sample:
    """One difference: its kind, the key as DynamoDB JSON, and for `different` the attributes that differ."""

    order: str  # the canonical key: sorts samples the same way on every run
    kind: str
    key: dict[str, Any] = field(compare=False)
    attributes: tuple[str, ...] = field(default=(), compare=False)

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "attributes": list(self.attributes)}


@dataclass
class Tally:
    """Counts of one partition, or of the whole validation once merged; at most `limit` samples kept."""

    limit: int
    source_items: int = 0
    target_items: int = 0
    equal: int = 0
    missing: int = 0
    extra: int = 0
    different: int = 0
    duplicate: int = 0
    skipped_expired: int = 0
    repaired: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    samples: list[Sample] = field(default_factory=list)
    error: MigratorError | None = None  # a partition's failure (a repair rejected), for the driver to raise

    def sample(self, sample: Sample) -> None:
        self.samples.append(sample)
        if len(self.samples) > 2 * self.limit:  # trimmed now and then: memory stays under 2 × limit
            self.samples = self.kept_samples()

    def kept_samples(self) -> list[Sample]:
        """The first `limit` samples by key: the same ones however the keys were partitioned."""
        return sorted(self.samples)[: self.limit]

    def merge(self, other: "Tally") -> "Tally":
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for kind, count in other.repaired.items():
            self.repaired[kind] += count
        for sample in other.samples:
            self.sample(sample)
        return self

    def as_record(self) -> dict[str, Any]:
        """The counts and the kept samples as plain values, for the validation's savepoint."""
        counts = {name: getattr(self, name) for name in _COUNTS}
        samples = [
            {"order": s.order, "kind": s.kind, "key": s.key, "attributes": list(s.attributes)} for s in self.kept_samples()
        ]
        return {**counts, "repaired": dict(self.repaired), "samples": samples}

    @classmethod
    def from_record(cls, limit: int, record: dict[str, Any]) -> "Tally":
        """The Tally `as_record` wrote; KeyError, TypeError or ValueError when the record is not one."""
        tally = cls(limit, **{name: int(record[name]) for name in _COUNTS})
        tally.repaired = {kind: int(record["repaired"][kind]) for kind in KINDS}
        for s in record["samples"]:
            tally.sample(Sample(str(s["order"]), str(s["kind"]), dict(s["key"]), tuple(s["attributes"])))
        return tally

    @property
    def remaining(self) -> int:
        """Differences still in the target after the repairs."""
        return self.missing + self.extra + self.different + self.duplicate - sum(self.repaired.values())


_COUNTS = ("source_items", "target_items", "equal", "missing", "extra", "different", "duplicate", "skipped_expired")


@dataclass
class ValidationSummary:
    source_table: str
    target_table: str
    tally: Tally
    seconds: float
    # Resumed once its compare units may have begun repairing: a unit stopped midway had its repairs
    # written but not recorded, and its rerun finds those keys equal (docs/validation.md, Resuming).
    resumed_repairing: bool = False

    @property
    def exit_code(self) -> int:
        """0 when the target equals the source (after repairs), 1 when differences remain."""
        return 1 if self.tally.remaining else 0

    def report(self) -> dict[str, Any]:
        """The JSON report: exactly the keys the issue lists, in camelCase."""
        t = self.tally
        return {
            "sourceItems": t.source_items,
            "targetItems": t.target_items,
            "equal": t.equal,
            "missing": t.missing,
            "extra": t.extra,
            "different": t.different,
            "duplicate": t.duplicate,
            "skippedExpired": t.skipped_expired,
            "samples": [sample.as_json() for sample in t.kept_samples()],
            "repaired": dict(t.repaired),
        }

    def render(self) -> str:
        t = self.tally
        rate = (t.source_items + t.target_items) / self.seconds if self.seconds > 0 else 0.0
        verdict = "equal" if not t.remaining else f"{t.remaining:,} differences remain"
        lines = [
            f"validation {self.source_table} → {self.target_table}: {verdict}",
            f"  items read: {t.source_items:,} in the source, {t.target_items:,} in the target",
            f"  equal {t.equal:,}, missing {t.missing:,}, extra {t.extra:,}, different {t.different:,}, "
            f"duplicate {t.duplicate:,}, skipped as expired {t.skipped_expired:,}",
            f"  {self.seconds:,.1f} s, {rate:,.0f} items/s",
        ]
        if any(t.repaired.values()):
            r = t.repaired
            lines.append(
                f"  repaired: {r[MISSING]:,} missing, {r[DIFFERENT]:,} different, {r[EXTRA]:,} extra, "
                f"{r[DUPLICATE]:,} duplicate"
            )
        if self.resumed_repairing:
            lines.append(
                "  repaired counts the buckets compared in full: this validation resumed after its repairs began, "
                "and what a bucket stopped midway had repaired counts as equal"
            )
        for sample in t.kept_samples()[:10]:
            attributes = f" ({', '.join(sample.attributes)})" if sample.attributes else ""
            lines.append(f"  {sample.kind}: {json.dumps(sample.key, ensure_ascii=False)}{attributes}")
        return "\n".join(lines)


def check_report_path(path: str) -> None:
    """ReportUnwritable when `path` cannot take the report: found before any table is scanned."""
    problem = problem_writing(path)
    if problem is not None:
        raise ReportUnwritable(path, problem)


def write_report(path: str, summary: ValidationSummary) -> None:
    """The report written whole or not at all: a reader never sees half a file."""
    try:
        write_whole(path, summary.report())
    except OSError as exc:
        raise ReportUnwritable(path, exc.strerror or type(exc).__name__) from None
