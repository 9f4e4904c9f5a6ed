"""What the dependency locks in requirements/ pin, and the digest that ties each lock to pyproject.toml.

`scripts/lock.sh` writes the digest of pyproject.toml's dependency lists into each lock's header;
`tests/unit/test_locks.py` recomputes it, so a dependency list edited without refreshing the locks
fails the suite instead of installing something other than what was tested.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCKS = REPO / "requirements"
NEWEST = "lock.txt"  # the newest pyspark pyproject.toml admits
DIGEST_LINE = re.compile(r"^# pyproject-digest: (?P<digest>sha256:[0-9a-f]{64})$", re.MULTILINE)
PIN_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==(?P<version>[^\s;\\]+)", re.MULTILINE)


def lock_name(pyspark_version: str | None) -> str:
    return f"lock-pyspark-{pyspark_version}.txt" if pyspark_version else NEWEST


def dependency_digest(pyproject: Path = REPO / "pyproject.toml", pyspark_version: str | None = None) -> str:
    """sha256 over what a lock is compiled from: the dependency lists, the build requirements, the pyspark pin."""
    document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    inputs = {
        "dependencies": document["project"].get("dependencies", []),
        "optional-dependencies": document["project"].get("optional-dependencies", {}),
        "build-system": document.get("build-system", {}).get("requires", []),
        "requires-python": document["project"].get("requires-python"),
        "pyspark": pyspark_version,
    }
    return "sha256:" + hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def recorded_digest(lock_text: str) -> str | None:
    found = DIGEST_LINE.search(lock_text)
    return found["digest"] if found else None


def pins(lock_text: str) -> dict[str, list[str]]:
    """Canonical package name -> the versions the lock pins for it (a universal lock may pin one per marker)."""
    pinned: dict[str, list[str]] = {}
    for line in PIN_LINE.finditer(lock_text):
        pinned.setdefault(canonical(line["name"]), []).append(line["version"])
    return pinned


def unpinned(lock_text: str, pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """Each requirement of pyproject.toml and requirements/build.in that the lock pins no version of."""
    from packaging.requirements import Requirement

    document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    wanted = [*document["project"].get("dependencies", []), *document.get("build-system", {}).get("requires", [])]
    for extra in document["project"].get("optional-dependencies", {}).values():
        wanted += extra
    build_in = pyproject.parent / "requirements" / "build.in"
    if build_in.exists():
        wanted += [line.strip() for line in build_in.read_text().splitlines() if line.strip() and not line.startswith("#")]
    pinned = pins(lock_text)
    missing = []
    for text in wanted:
        requirement = Requirement(text)
        versions = pinned.get(canonical(requirement.name), [])
        if not any(requirement.specifier.contains(v, prereleases=True) for v in versions):
            missing.append(f"{text} (the lock pins {', '.join(versions) or 'nothing'})")
    return missing


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


if __name__ == "__main__":  # scripts/lock.sh: `python testsupport/locks.py [PYSPARK_VERSION]`
    print(dependency_digest(pyspark_version=sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None))
