"""A Scan response parsed with each item's text kept: the items as json.loads gives them, each text the exact
span the wire sent, and anything the walk does not expect left to json.loads."""

from __future__ import annotations

import gc
import json

import pytest

from migrator.scan_page import ITEM_TEXTS, parse_keeping_item_texts
from testsupport.all_types import FIXTURE

ITEMS = json.loads(FIXTURE.read_text(encoding="utf-8"))
# Values whose spelling is part of the wire form: kept as sent, never normalised.
SPELLED = [
    {"pk": {"S": "caf\u00e9 \U0001f680 東京"}, "n": {"N": "1.50"}, "big": {"N": "12345678901234567890123456789012345678"},
     "tiny": {"N": "-1E-130"}, "b": {"B": "AAE="}, "bs": {"BS": ["", "AAE="]}, "e": {"S": ""},
     "m": {"M": {"l": {"L": [{"NULL": True}, {"BOOL": False}, {"NS": ["1.0", "-0"]}]}}}},
    {"pk": {"S": "tab\there \"quoted\" \\ back/slash \u2028"}, "名前": {"S": "\u0000 control"}},
]  # fmt: skip


def page(items: list[dict], **dumps_options) -> bytes:
    response = {"Items": items, "Count": len(items), "ScannedCount": len(items),
                "LastEvaluatedKey": {"pk": {"S": "x"}}, "ConsumedCapacity": {"TableName": "t", "CapacityUnits": 2.5}}  # fmt: skip
    return json.dumps(response, **dumps_options).encode("utf-8")


# Compact and not ASCII-escaped (as DynamoDB and dynalite send), ASCII-escaped, and pretty-printed.
SPELLINGS = [dict(separators=(",", ":"), ensure_ascii=False), dict(ensure_ascii=True), dict(indent=2)]


@pytest.mark.parametrize("options", SPELLINGS)
def test_items_are_as_json_loads_gives_them_and_each_text_is_the_span_sent(options):
    document = page(ITEMS + SPELLED, **options)

    response = parse_keeping_item_texts(document)

    texts = response.pop(ITEM_TEXTS)
    assert response == json.loads(document)
    assert len(texts) == len(response["Items"])
    assert [json.loads(text) for text in texts] == response["Items"]
    position = 0
    for text in texts:  # each text is a piece of the document, in order: the bytes sent, not an encoding
        position = document.index(text, position) + len(text)
    assert b'"N":"1.50"' in texts[len(ITEMS)] or b'"N": "1.50"' in texts[len(ITEMS)]


def test_an_empty_page_and_a_page_without_items_are_parsed_as_json_loads_does():
    assert parse_keeping_item_texts(b'{"Items": [], "Count": 0}') == {"Items": [], "Count": 0, ITEM_TEXTS: []}
    assert parse_keeping_item_texts(b' {"Count": 0} \n') == {"Count": 0}
    assert parse_keeping_item_texts(b"{}") == {}


@pytest.mark.parametrize(
    "document",
    [b'{"Items": 3}', b'{"Items": [{"a": {"S": "x"}}], "Items": null}', b'\xef\xbb\xbf{"Items": []}',
     b'{"Items": [], "ItemTexts": [1]}'],
)  # fmt: skip
def test_a_document_the_walk_does_not_expect_is_json_loads_own_without_texts(document):
    assert parse_keeping_item_texts(document) == json.loads(document)


@pytest.mark.parametrize("document", [b'{"Items": [', b'{"Items": [{}] x', b'{"Items": [{},]}', b"[1]x", b"\xff"])
def test_a_malformed_document_fails_as_json_loads_fails(document):
    with pytest.raises(ValueError) as expected:
        json.loads(document)
    with pytest.raises(type(expected.value)):
        parse_keeping_item_texts(document)


def test_the_collector_runs_again_after_a_parse_and_after_a_failed_one():
    assert gc.isenabled()
    parse_keeping_item_texts(page(ITEMS))
    assert gc.isenabled()
    with pytest.raises(json.JSONDecodeError):
        parse_keeping_item_texts(b'{"Items": [')
    assert gc.isenabled()
