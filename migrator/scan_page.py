"""A Scan response parsed as `json.loads` parses it, each item's text kept as the wire sent it.

The validator writes every item it scans into a work file as JSON text
(`migrator.validate.work_file`). Encoding each parsed item back to JSON cost about a third of a
read unit's CPU, while the response already holds that text: here the response is parsed with
the `json` module's own C scanner, one value at a time, so each element of `Items` comes with
the span of text it was parsed from. The item and its text are the same value, and the text is
exactly what the service sent (numbers as `1.50`, binary as its base64, names in any script).

Only the top level and the `Items` array are walked here; every value inside them is the C
scanner's, the same code `json.loads` runs. A document the walk does not expect is parsed by
`json.loads` instead, without texts (and fails there as it would have): callers encode those items.
"""

from __future__ import annotations

import json
from json.decoder import WHITESPACE
from typing import Any

from migrator.collector import collector_paused

# The key beside `Items` that holds each item's text, in order, when the walk kept them.
ITEM_TEXTS = "ItemTexts"

# `scan_once(text, index)` parses one JSON value starting at `index`: (value, index after it), or
# StopIteration when none starts there. The C scanner `json.loads` itself runs.
_scan_once = json.JSONDecoder().scan_once
_skip_whitespace = WHITESPACE.match


class _Unexpected(ValueError):
    """The document is not the object-with-an-Items-array the walk expects: `json.loads` decides."""


def parse_keeping_item_texts(document: bytes) -> dict[str, Any]:
    """The response as `json.loads` gives it, plus `ItemTexts`: each item's UTF-8 text as sent, when the walk
    could keep them. Parsed with the cyclic garbage collector paused, as `wire.parse_without_collector` does."""
    with collector_paused():
        try:
            return _walk_object(document.decode("utf-8"))
        except (ValueError, StopIteration, IndexError):  # not UTF-8, not an object, malformed: json.loads decides
            return json.loads(document)


def _walk_object(text: str) -> dict[str, Any]:
    response: dict[str, Any] = {}
    index = _expect(text, _after_whitespace(text, 0), "{")
    if text[index] == "}":
        return _ended(text, index, response)
    while True:
        name, index = _scan_once(text, index)
        if not isinstance(name, str) or name == ITEM_TEXTS:
            raise _Unexpected("a member name that is not a string, or is the walk's own")
        index = _expect(text, _after_whitespace(text, index), ":")
        if name == "Items" and text[index] == "[":
            response[name], response[ITEM_TEXTS], index = _walk_items(text, index)
        else:
            response[name], index = _scan_once(text, index)
        index = _after_whitespace(text, index)
        if text[index] == "}":
            return _ended(text, index, response)
        index = _expect(text, index, ",")


def _walk_items(text: str, index: int) -> tuple[list[Any], list[bytes], int]:
    """The array at `index`: its elements, each element's text, and the index after the array."""
    items: list[Any] = []
    texts: list[bytes] = []
    index = _expect(text, index, "[")
    if text[index] == "]":
        return items, texts, index + 1
    while True:
        item, end = _scan_once(text, index)
        items.append(item)
        texts.append(text[index:end].encode("utf-8"))
        index = _after_whitespace(text, end)
        if text[index] == "]":
            return items, texts, index + 1
        index = _expect(text, index, ",")


def _expect(text: str, index: int, token: str) -> int:
    """The index of the next value after `token`, which must be at `index`."""
    if text[index] != token:
        raise _Unexpected(f"{token!r} expected at {index}")
    return _after_whitespace(text, index + 1)


def _after_whitespace(text: str, index: int) -> int:
    return _skip_whitespace(text, index).end()


def _ended(text: str, index: int, response: dict[str, Any]) -> dict[str, Any]:
    """The response, once nothing but whitespace follows its closing brace at `index`."""
    if _after_whitespace(text, index + 1) != len(text):
        raise _Unexpected("text after the object")
    if ITEM_TEXTS in response and not isinstance(response.get("Items"), list):
        raise _Unexpected("a later Items member that is not an array")  # json.loads keeps the last one
    return response
