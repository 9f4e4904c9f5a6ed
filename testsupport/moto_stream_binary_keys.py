"""Emulator extension: a DynamoDB stream record's Keys carry a binary key as DynamoDB does.

moto's server keeps a B value as the bytes of the base64 text a request carried, and a stream
record's Keys base64-encode those bytes once more: the REMOVE of the key b"\\x00\\xff" reads as
a deletion of the key b"AP8=", which no item has. On DynamoDB, Keys holds "the primary key
attribute(s) for the DynamoDB item that was modified" (StreamRecord, DynamoDB Streams API
reference), the same values as the item's. The record's images are encoded right, so the Keys
are taken from them. Pinned to moto 5.x: it wraps StreamRecord.__init__.
"""

from __future__ import annotations

import functools

from moto.dynamodb.models.table import StreamRecord


def install() -> None:
    StreamRecord.__init__ = _keys_from_the_image(StreamRecord.__init__)


def _keys_from_the_image(initialize):
    @functools.wraps(initialize)
    def initialize_with_keys(self, table, stream_type, event_name, old, new, seq):
        initialize(self, table, stream_type, event_name, old, new, seq)
        image = (old if old is not None else new).to_json()["Attributes"]
        change = self.record["dynamodb"]
        change["Keys"] = {name: image[name] for name in change["Keys"]}

    return initialize_with_keys
