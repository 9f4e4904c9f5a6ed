"""What a copy's checks found, before anything is written: one shape for every kind of copy.

Each kind has its `preflight(config)` (`table_copy`, `export_import`, `export_write`) that reads
the source's description, checks the target and raises before anything is written; what it
found is a `Preflight`, which the run then acts on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Source = TypeVar("Source")
Target = TypeVar("Target")


@dataclass(frozen=True)
class Preflight(Generic[Source, Target]):
    """The two sides of a copy as the checks found them.

    `source`: what is read (a live table's `TableInfo`, or an export's `ExportManifests`);
    `target`: where it goes (the target table's `TableInfo`, None while it is to be created,
    or an `ExportFolder`); `creation`: how the target is made (a CreateTable request with
    renames applied, or an export summary's tableCreationParameters); `ttl_attribute`: the
    source's TTL attribute, None without one; `key_names`: the source's key attributes, before
    renames (they name an item in errors).
    """

    source: Source
    target: Target
    creation: dict[str, Any]
    ttl_attribute: str | None
    key_names: tuple[str, ...]
