"""Emulator extension: one lock around moto's DynamoDB item operations.

moto keeps a table's items in a defaultdict keyed by its DynamoType, whose __hash__ and
__eq__ are Python code, so the interpreter can switch threads in the middle of an insert:
two concurrent puts of new items under the same partition key can each create that key's
bucket, and the second replaces the first, losing an item. A Scan sorting the items while
a put inserts can likewise fail. DynamoDB has neither problem and the migrator writes
concurrently, so the emulator serializes item operations (moto is bound to one core
anyway). Pinned to moto 5.x: it wraps DynamoDBBackend methods by name.
"""

from __future__ import annotations

import functools
import threading

from moto.dynamodb.models import DynamoDBBackend

ITEM_OPERATIONS = ("put_item", "update_item", "delete_item", "get_item", "scan", "query")
_lock = threading.RLock()


def install() -> None:
    for name in ITEM_OPERATIONS:
        setattr(DynamoDBBackend, name, _locked(getattr(DynamoDBBackend, name)))


def _locked(operation):
    @functools.wraps(operation)
    def locked(self, *args, **kwargs):
        with _lock:
            return operation(self, *args, **kwargs)

    return locked
