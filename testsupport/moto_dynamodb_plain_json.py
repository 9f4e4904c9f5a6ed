"""Emulator extension: DynamoDB's item-carrying responses written as plain JSON, as moto 5.1 wrote them.

moto 5.2 writes every response by walking botocore's output shape value by value; for a Scan or
Query page of a few thousand items that walk is most of the emulator's CPU (80% of it while the
suite copies a 50,000-item table), and the emulator is what a test waits on. These results are
already in DynamoDB's wire form once moto has turned its items into dicts (`DynamoResult`):
DynamoDB's JSON protocol is that dict as JSON, binary values in base64. So for the operations
below the dict is written with `json.dumps`; anything else (another operation, a value JSON has
no form for, such as a timestamp) goes through moto's serializer as before.

Pinned to moto 5.2: it wraps `DynamoResult.execute_result`; tests/support/test_moto_internals.py
checks that both ways write the same response.
"""

from __future__ import annotations

import base64
import functools
import json

from moto.dynamodb.responses import DynamoResult

ITEM_OPERATIONS = frozenset({
    "Scan", "Query", "GetItem", "BatchGetItem", "BatchWriteItem", "PutItem", "UpdateItem", "DeleteItem",
})  # fmt: skip
CONTENT_TYPE = "application/x-amz-json-1.0"


def install() -> None:
    DynamoResult.execute_result = _plain_json_first(DynamoResult.execute_result)


def _plain_json_first(execute_result):
    @functools.wraps(execute_result)
    def execute(self: DynamoResult, context):
        if context.operation_model.name in ITEM_OPERATIONS:
            body = plain_json(self.result)
            if body is not None:
                return 200, {"Content-Type": CONTENT_TYPE}, body
        return execute_result(self, context)

    return execute


def plain_json(result) -> str | None:
    """The result as DynamoDB's JSON protocol writes it; None when a value has no plain JSON form."""
    try:
        return json.dumps(_without_none(result), default=_base64, separators=(",", ":"))
    except TypeError:
        return None


def _base64(value):
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(type(value).__name__)


def _without_none(value):
    """moto's serializer leaves out members whose value is None."""
    if isinstance(value, dict):
        return {key: _without_none(member) for key, member in value.items() if member is not None}
    if isinstance(value, list):
        return [_without_none(member) for member in value]
    return value
