"""The dependency locks pin everything pyproject.toml asks for, and were compiled from its current lists."""

from __future__ import annotations

import shutil

import pytest

from testsupport.locks import LOCKS, NEWEST, REPO, dependency_digest, lock_name, pins, recorded_digest, unpinned

LOCK_FILES = sorted(path.name for path in LOCKS.glob("lock*.txt"))
REFRESH = "run ./scripts/lock.sh and the suite on the new lock"


def pinned_pyspark(lock: str) -> str | None:
    return None if lock == NEWEST else lock.removeprefix("lock-pyspark-").removesuffix(".txt")


def test_there_is_a_lock_for_the_newest_pyspark_and_for_emrs():
    assert LOCK_FILES == sorted([NEWEST, lock_name("4.0.2")])


@pytest.mark.parametrize("lock", LOCK_FILES)
def test_the_lock_is_compiled_from_pyprojects_current_dependency_lists(lock):
    recorded = recorded_digest((LOCKS / lock).read_text())
    current = dependency_digest(pyspark_version=pinned_pyspark(lock))
    assert recorded == current, f"requirements/{lock} is older than pyproject.toml's dependency lists: {REFRESH}"


@pytest.mark.parametrize("lock", LOCK_FILES)
def test_the_lock_pins_every_dependency_pyproject_names(lock):
    missing = unpinned((LOCKS / lock).read_text())
    assert not missing, f"requirements/{lock} pins no version allowed for: {'; '.join(missing)}: {REFRESH}"


def test_the_emr_lock_pins_that_pyspark():
    assert pins((LOCKS / lock_name("4.0.2")).read_text())["pyspark"] == ["4.0.2"]


def test_every_pin_carries_hashes():
    for lock in LOCK_FILES:
        text = (LOCKS / lock).read_text()
        assert text.count("==") <= text.count("--hash=sha256:"), f"requirements/{lock} has a pin without a hash"


def test_a_dependency_added_to_pyproject_is_reported_with_its_name(tmp_path):
    """The two rules above can fail: a pyproject with one more dependency than the lock was compiled from."""
    (tmp_path / "requirements").mkdir()
    shutil.copy(REPO / "requirements" / "build.in", tmp_path / "requirements" / "build.in")
    pyproject = (REPO / "pyproject.toml").read_text().replace('"tqdm>=4.66,<5",', '"tqdm>=4.66,<5", "orjson>=3.10",')
    (tmp_path / "pyproject.toml").write_text(pyproject)
    lock_text = (LOCKS / NEWEST).read_text()
    assert unpinned(lock_text, tmp_path / "pyproject.toml") == ["orjson>=3.10 (the lock pins nothing)"]
    assert dependency_digest(tmp_path / "pyproject.toml") != recorded_digest(lock_text)
