"""The summary file's pure parts: a phase's dataclass as camelCase JSON, and where it can be written."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field

from migrator.summary_json import phase_json, problem_writing, write_whole


@dataclass
class Phase:
    segments_total: int
    written: int = 0
    dropped: Counter = field(default_factory=Counter)
    shards: frozenset[str] = frozenset()
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def seconds(self) -> float:
        return 2.0

    @property
    def items_per_second(self) -> float:
        return self.written / self.seconds


def test_a_phase_is_its_fields_in_camel_case_without_clock_readings_with_its_rate():
    document = phase_json(Phase(4, written=10, dropped=Counter({"stale": 2}), shards=frozenset({"b", "a"})))

    assert document == {"segmentsTotal": 4, "written": 10, "dropped": {"stale": 2}, "shards": ["a", "b"],
                        "seconds": 2.0, "itemsPerSecond": 5.0}  # fmt: skip
    json.dumps(document)  # plain JSON values only


def test_where_a_file_can_be_written(tmp_path):
    assert problem_writing(str(tmp_path / "s.json")) is None
    assert problem_writing(str(tmp_path)) == "it is a directory"
    assert "does not exist" in problem_writing(str(tmp_path / "missing" / "s.json"))


def test_written_whole_leaves_no_partial_file(tmp_path):
    write_whole(str(tmp_path / "s.json"), {"a": "é"})

    assert json.loads((tmp_path / "s.json").read_text(encoding="utf-8")) == {"a": "é"}
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]
