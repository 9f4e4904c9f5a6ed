"""A validation's progress as its savepoint keeps it: units finished, and what the compared buckets found.

The savepoint is the migration's (`migrator.snapshot.savepoints`: the same store, folder and
checks of both sides) under its own name, `validation_<source>_to_<target>_<hash>.yaml`, its
progress in the `savepoint.validation` block. It pins what the units mean (the segment count,
the number of buckets) and the options that change the answer; a savepoint of the same two
sides made with other options is refused rather than mixed in. The buckets compared are
recorded with their tallies merged into one: counts add up, and the report keeps the first
`failuresToFetch` samples by key whichever bucket they came from, so the savepoint stays small
however many buckets there are. Pure: no pyspark, no boto3.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from migrator.config import MigratorConfig
from migrator.config.document import Validation
from migrator.errors import SavepointError
from migrator.validate.report import Tally

BLOCK = "validation"  # the key of the progress inside the savepoint's `savepoint` block


def answer_options(config: MigratorConfig) -> dict[str, Any]:
    """The options a validation's answer depends on, as YAML keys: a savepoint made with others is refused."""
    options = config.validation or Validation()
    source = config.source
    return {
        "renames": [[old, new] for old, new in config.rename_map.items()],
        "scanSegments": None if config.imports_export else source.scan_segments,
        "copyExpiredItems": False if config.imports_export else source.copy_expired_items,
        "failuresToFetch": options.failures_to_fetch,
        "floatingPointTolerance": options.floating_point_tolerance,
        "copyMissingRows": options.copy_missing_rows,
        "repairDifferences": options.repair_differences,
        "deleteExtraRows": options.delete_extra_rows,
    }


@dataclass(frozen=True)
class ValidationProgress:
    """Read units done (by name), buckets compared, and their merged Tally."""

    options: dict[str, Any]
    total_segments: int
    buckets: int
    tally: Tally
    read: frozenset[str] = frozenset()
    compared: frozenset[int] = frozenset()
    # A Delta target's version the read units list the files of: a resumed run reads that version again,
    # so its units hold the same files whatever was committed since.
    target_version: int | None = None

    def with_done(self, unit: str | tuple[int, Tally]) -> "ValidationProgress":
        """A read unit by its name, or a compared bucket with what it found."""
        if isinstance(unit, str):
            return replace(self, read=self.read | {unit})
        bucket, found = unit
        merged = Tally(self.tally.limit).merge(self.tally).merge(found)
        return replace(self, compared=self.compared | {bucket}, tally=merged)

    def fill(self, document: dict[str, Any], record: dict[str, Any]) -> None:
        record[BLOCK] = {
            "options": self.options,
            "totalSegments": self.total_segments,
            "buckets": self.buckets,
            "read": sorted(self.read),
            "compared": sorted(self.compared),
            "tally": self.tally.as_record(),
        }
        if self.target_version is not None:
            record[BLOCK]["targetVersion"] = self.target_version


@dataclass(frozen=True)
class SavedValidation:
    """A savepoint's record, checked against the run about to resume from it."""

    path: str  # the savepoint, for messages
    record: dict[str, Any] = field(repr=False)

    def progress(self, options: dict[str, Any]) -> ValidationProgress:
        """The recorded progress; SavepointError when it is damaged or was made with other options."""
        try:
            block = self.record[BLOCK]
            saved_options = dict(block["options"])
            limit = int(saved_options["failuresToFetch"])
            progress = ValidationProgress(
                options=saved_options, total_segments=int(block["totalSegments"]), buckets=int(block["buckets"]),
                tally=Tally.from_record(limit, block["tally"]), read=frozenset(str(u) for u in block["read"]),
                compared=frozenset(int(b) for b in block["compared"]),
                target_version=None if block.get("targetVersion") is None else int(block["targetVersion"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError):
            raise SavepointError(f"savepoint {self.path} is damaged: delete it to start the validation over") from None
        self._check_options(saved_options, options)
        return progress

    def _check_options(self, saved: dict[str, Any], options: dict[str, Any]) -> None:
        for name, value in options.items():
            if saved.get(name) != value:
                raise SavepointError(
                    f"savepoint {self.path} belongs to a validation with other options ({name} was "
                    f"{saved.get(name)!r}, now {value!r}): rerun with the options it was made with to resume, or "
                    "delete it to validate from the start"
                )
