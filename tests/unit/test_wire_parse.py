"""The lean client's response parsing: exact, and the garbage collector left as it was found."""

from __future__ import annotations

import gc
import json

import pytest

from migrator.wire import parse_without_collector

PAGE = json.dumps({
    "Items": [{"pk": {"S": "caf\u00e9 \ud83d\ude80"}, "n": {"N": "12345678901234567890123456789012345678"},
               "b": {"B": "AAE="}, "m": {"M": {"l": {"L": [{"NULL": True}, {"BOOL": False}]}}}}] * 3,
    "LastEvaluatedKey": {"pk": {"S": "x"}},
}).encode()  # fmt: skip


def test_parses_as_json_loads_does():
    assert parse_without_collector(PAGE) == json.loads(PAGE)


def test_the_collector_runs_again_after_a_parse_and_after_a_failed_one():
    assert gc.isenabled()
    parse_without_collector(PAGE)
    assert gc.isenabled()
    with pytest.raises(json.JSONDecodeError):
        parse_without_collector(b'{"Items": [')
    assert gc.isenabled()


def test_a_collector_paused_by_the_process_stays_paused():
    gc.disable()
    try:
        assert parse_without_collector(PAGE) == json.loads(PAGE)
        assert not gc.isenabled()
    finally:
        gc.enable()
