"""The live table an S3 export was taken from (`source.streamSource`), described one way for every use.

An export import describes it for the keys and indexes the target gets (when there is no
`tableDescription`), and a chained run (`target.streamChanges`) for the stream replicated
after the import (`migrator.replicate.chaining`). Both go through `describe_stream_source`, so
a missing table, or a DescribeTable call that fails, reads the same whichever step asked.
"""

from __future__ import annotations

from typing import Any

from migrator import aws
from migrator.config import DynamoSource
from migrator.errors import ConfigError
from migrator.export.manifest import ExportSummary
from migrator.target import tables


def describe_stream_source(live: DynamoSource, summary: ExportSummary) -> tuple[tables.TableInfo, Any]:
    """DescribeTable of streamSource, and the control-plane client that made the call.

    ConfigError (source.streamSource.table) when the table does not exist.
    """
    spec = live.client_spec("source").for_control_plane()
    client = aws.client(spec)
    described = tables.describe_table(client, live.table, "source.streamSource")
    if described is None:
        raise ConfigError(
            "source.streamSource.table",
            f"table {live.table!r} does not exist at {spec.where}: streamSource names the live table the "
            f"export was taken from ({summary.table_arn}), whose keys and indexes the target gets; "
            "or give source.tableDescription instead",
        )
    return described, client
