"""PipelinedWriter: every put and delete written once, batches bounded, the first failure raised (a fake client, no network)."""

from __future__ import annotations

import threading

import pytest

from migrator.connection import ClientSpec
from migrator.errors import Throttled
from migrator.ratelimit import CapacityLimiter
from migrator.target import pipeline
from migrator.target.pipeline import PipelinedWriter, put_or_delete


class FakeTable:
    """BatchWriteItem against a dict; optionally leaves every request unprocessed."""

    def __init__(self, refuse: bool = False):
        self.items: dict[str, dict] = {}
        self.calls = 0
        self.largest_batch = 0
        self.refuse = refuse
        self._lock = threading.Lock()

    def batch_write_item(self, RequestItems, **_):
        (table, requests), = RequestItems.items()
        with self._lock:
            self.calls += 1
            self.largest_batch = max(self.largest_batch, len(requests))
            if self.refuse:
                return {"UnprocessedItems": {table: requests}}
            for request in requests:
                if "PutRequest" in request:
                    item = request["PutRequest"]["Item"]
                    self.items[item["pk"]["S"]] = item
                else:
                    self.items.pop(request["DeleteRequest"]["Key"]["pk"]["S"], None)
        return {}


@pytest.fixture
def table(monkeypatch) -> FakeTable:
    fake = FakeTable()
    monkeypatch.setattr(pipeline, "wire_client", lambda spec: fake)
    return fake


def writer(batch_size: int = 25, target: ClientSpec = ClientSpec("target")) -> PipelinedWriter:
    return PipelinedWriter(target, "t", batch_size=batch_size, limiter=CapacityLimiter(None), report_capacity=False)


def test_every_put_and_delete_is_written_and_counted(table):
    with writer(batch_size=7) as w:
        for n in range(100):
            w.put({"pk": {"S": f"k{n}"}, "n": {"N": str(n)}})
        counters = w.close()
    with writer(batch_size=7) as w:
        for n in range(0, 100, 2):
            w.delete({"pk": {"S": f"k{n}"}})

    assert sorted(table.items) == sorted(f"k{n}" for n in range(1, 100, 2))
    assert counters.items == 100 and counters.requests == 15  # ceil(100 / 7) batches
    assert table.largest_batch == 7


def test_a_state_with_an_image_is_put_renamed_and_one_without_deletes_its_key(table):
    with writer() as w:
        w.put({"pk": {"S": "gone"}})
    with writer() as w:
        done = put_or_delete(
            w, [({"pk": {"S": "kept"}}, {"pk": {"S": "kept"}, "old": {"N": "1"}}), ({"pk": {"S": "gone"}}, None)],
            {"old": "new"},
        )  # fmt: skip

    assert done == (1, 1)
    assert table.items == {"kept": {"pk": {"S": "kept"}, "new": {"N": "1"}}}


def test_items_that_stay_unprocessed_past_the_targets_give_up_time_raise_throttled(monkeypatch):
    refusing = FakeTable(refuse=True)
    monkeypatch.setattr(pipeline, "wire_client", lambda spec: refusing)
    impatient = ClientSpec("target", throttling_give_up_seconds=0.2)

    with pytest.raises(Throttled):
        with writer(target=impatient) as w:
            w.put({"pk": {"S": "a"}})
    assert refusing.calls > 2


def test_a_failure_upstream_stops_without_writing_the_buffer(table):
    with pytest.raises(RuntimeError):
        with writer(batch_size=10) as w:
            w.put({"pk": {"S": "buffered"}})
            raise RuntimeError("the file turned out damaged")

    assert table.items == {}
