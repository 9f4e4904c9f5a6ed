"""What a copy's checks found, before anything is written: one shape for every kind of copy.

Each kind has its `preflight(config)` (`table_copy`, `export_import`, `export_write`) that reads
the source's description, checks the target and raises before anything is written; what it
found is a `Preflight`, which the run then acts on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from migrator import aws
from migrator.config import MigratorConfig
from migrator.errors import SourceTableNotFound
from migrator.target import tables
from migrator.target.tables import TableInfo

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


def describe_live_source(config: MigratorConfig) -> tuple[TableInfo, str | None, Any]:
    """The source table's description, its TTL attribute, and the client that read them.

    SourceTableNotFound when the table does not exist, naming where it was looked for.
    """
    spec = config.source.client_spec("source").for_control_plane()
    client = aws.client(spec)
    source = tables.describe_table(client, config.source.table, "source")
    if source is None:
        raise SourceTableNotFound(config.source.table, spec.where)
    return source, tables.ttl_attribute(client, config.source.table), client
