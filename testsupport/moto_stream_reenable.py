"""Emulator extension: a table's DynamoDB stream can be disabled, and enabled again as a new stream.

On DynamoDB, disabling a table's stream stops it recording changes, and enabling one again
creates a new stream with a new ARN (a new StreamLabel): "If you disable a stream and then
enable it again, a new stream is created with a different stream descriptor" (DynamoDB
Developer Guide, "Change data capture for DynamoDB Streams"). moto 5 instead keeps its
recorder after a disable, which then fails every write (it reads the view type the
disabled specification no longer holds), and refuses to enable a stream on a table that
ever had one. The migrator must notice a stream replaced between runs, so the tests need
the emulator to replace one as DynamoDB does. Pinned to moto 5.x: it wraps a DynamoDBBackend
and a Table method by name.
"""

from __future__ import annotations

import functools

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table


def install() -> None:
    DynamoDBBackend.update_table_streams = _new_stream_after_a_disabled_one(DynamoDBBackend.update_table_streams)
    Table.set_stream_specification = _disabled_records_nothing(Table.set_stream_specification)


def _new_stream_after_a_disabled_one(update_table_streams):
    @functools.wraps(update_table_streams)
    def update(self, table, specification):
        enabling = specification.get("StreamEnabled") or specification.get("StreamViewType")
        if enabling and not (table.stream_specification or {}).get("StreamEnabled"):
            table.latest_stream_label = None  # moto makes a new label (and ARN) for a table without one
        return update_table_streams(self, table, specification)

    return update


def _disabled_records_nothing(set_stream_specification):
    @functools.wraps(set_stream_specification)
    def set_specification(self, streams):
        set_stream_specification(self, streams)
        if not (self.stream_specification or {}).get("StreamEnabled"):
            self.stream_shard = None  # the disabled stream keeps its ARN, but records no change

    return set_specification
