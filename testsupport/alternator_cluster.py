"""Local nodes standing for a ScyllaDB Alternator cluster, each relaying to the emulator.

    with AlternatorCluster(emulator_url, PLACES) as cluster:
        config = {"target": {"type": "alternator", **reaching(cluster.endpoint_url), ...}}
        cluster.stop_after(2, "BatchWriteItem", 3)  # node 2 goes away after its third write
        ...
        cluster.requests[0]["BatchWriteItem"]  # what each node served

Node i listens on 127.0.0.<i+1>, all on one port: Alternator's nodes share its port, and the
load-balancing client builds a node's URL from the address `/localnodes` lists and that port.
Node 0 is the seed (`endpoint_url`).

What each node does, as Alternator does it (docs.scylladb.com, "Alternator: DynamoDB API in
ScyllaDB", and its compatibility page):

- `GET /localnodes` answers a JSON list of the addresses of the live nodes of the node's own
  datacenter, or of `?dc=` (and `&rack=`) when asked: a stopped node is left out.
- A DynamoDB request is relayed to the emulator and its answer relayed back, with these
  differences from DynamoDB:
  - `ReturnConsumedCapacity: INDEXES` is refused (ValidationException), as newer Alternator
    versions do; NONE and TOTAL are accepted.
  - BatchWriteItem takes up to 100 items (DynamoDB: 25, which moto enforces): a larger batch
    is relayed to the emulator 25 items at a time, the unprocessed items gathered.
  - Responses carry no `ConsumedCapacity` (Alternator does not report it).
  - A gzip request body (`Content-Encoding: gzip`, ScyllaDB 2026.1 and later) is accepted.

Counters: `requests[node][operation]`, `discoveries[node]` (`/localnodes` answered),
`gzip_bodies`, `capacity_asked` (requests with ReturnConsumedCapacity TOTAL),
`capacity_stripped` (answers whose ConsumedCapacity was removed), `largest_batch`.
"""

from __future__ import annotations

import gzip
import http.client
import json
import threading
import urllib.parse
from collections import Counter
from typing import Any

from testsupport.loopback import KeepAliveHandler, LoopbackService

MOTO_BATCH_LIMIT = 25  # DynamoDB's BatchWriteItem limit, which moto enforces
ALTERNATOR_BATCH_LIMIT = 100
_VALIDATION = "com.amazonaws.dynamodb.v20120810#ValidationException"
_RELAYED_HEADERS_LEFT_OUT = {"content-length", "content-encoding", "connection", "keep-alive", "expect"}


class AlternatorCluster:
    """Nodes at `places` ((datacenter, rack) each), relaying to `upstream_url`; a context manager."""

    def __init__(self, upstream_url: str, places: list[tuple[str, str]]):
        self.upstream = urllib.parse.urlsplit(upstream_url)
        self.places = list(places)
        self.nodes = [_Node(self, index) for index in range(len(places))]
        self.requests: list[Counter] = [Counter() for _ in places]
        self.discoveries: list[int] = [0 for _ in places]
        self.gzip_bodies = 0
        self.capacity_asked = 0
        self.capacity_stripped = 0
        self.largest_batch = 0
        self._stops: dict[int, tuple[str, int, threading.Event]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> "AlternatorCluster":
        port = 0
        for node in self.nodes:
            node.host, node.port = node.address, port
            node.start()
            port = node._server.server_port  # the seed's free port, then every node's
        return self

    def __exit__(self, *exc) -> None:
        for node in self.nodes:
            node.stop()

    @property
    def endpoint_url(self) -> str:
        """The seed's URL: what a config's endpoint names."""
        return self.nodes[0].endpoint_url

    def stop_after(self, index: int, operation: str, count: int) -> threading.Event:
        """Stop node `index` once it has answered `count` requests of `operation`; the event says when."""
        stopped = threading.Event()
        with self._lock:
            self._stops[index] = (operation, count, stopped)
        return stopped

    def live_addresses(self, datacenter: str, rack: str | None) -> list[str]:
        return [
            node.address
            for node, (dc, node_rack) in zip(self.nodes, self.places)
            if node.running and dc == datacenter and rack in (None, node_rack)
        ]

    # -- called from handler threads -------------------------------------

    def record(self, index: int, operation: str) -> None:
        with self._lock:
            self.requests[index][operation] += 1
            stop = self._stops.get(index)
            if stop and stop[0] == operation and self.requests[index][operation] >= stop[1]:
                del self._stops[index]
                # From another thread: stopping joins the node's server loop and cuts its connections.
                threading.Thread(target=self._stop_node, args=(index, stop[2]), daemon=True).start()

    def _stop_node(self, index: int, stopped: threading.Event) -> None:
        self.nodes[index].stop()
        stopped.set()

    def count_discovery(self, index: int) -> None:
        with self._lock:
            self.discoveries[index] += 1

    def add(self, counter: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + amount)

    def note_batch(self, size: int) -> None:
        with self._lock:
            self.largest_batch = max(self.largest_batch, size)


class _Node(LoopbackService):
    thread_name = "alternator-node"

    def __init__(self, cluster: AlternatorCluster, index: int):
        super().__init__()
        self.cluster, self.index = cluster, index
        self.address = f"127.0.0.{index + 1}"

    @property
    def running(self) -> bool:
        return self._server is not None


class _Handler(KeepAliveHandler):
    server: Any

    @property
    def node(self) -> _Node:
        return self.server.service

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path != "/localnodes":
            self.reply(404, b"")
            return
        query = urllib.parse.parse_qs(url.query)
        cluster, (own_dc, _) = self.node.cluster, self.node.cluster.places[self.node.index]
        datacenter = query.get("dc", [own_dc])[0]
        addresses = cluster.live_addresses(datacenter, query.get("rack", [None])[0])
        cluster.count_discovery(self.node.index)
        self.reply(200, json.dumps(addresses).encode(), "application/json")

    def do_POST(self) -> None:
        cluster = self.node.cluster
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
            cluster.add("gzip_bodies")
        operation = (self.headers.get("X-Amz-Target") or "").rpartition(".")[2]
        request = json.loads(body or b"{}")
        capacity = request.get("ReturnConsumedCapacity")
        if capacity == "INDEXES":
            self.refuse("ReturnConsumedCapacity INDEXES is not supported")
        elif operation == "BatchWriteItem" and _batch_size(request) > ALTERNATOR_BATCH_LIMIT:
            self.refuse(f"Too many items requested for the BatchWriteItem call (limit {ALTERNATOR_BATCH_LIMIT})")
        else:
            if capacity == "TOTAL":
                cluster.add("capacity_asked")
            status, answer = self.batch_write(request) if operation == "BatchWriteItem" else self.relay(body)
            self.reply(status, self.without_capacity(answer), "application/x-amz-json-1.0")
        cluster.record(self.node.index, operation)

    def batch_write(self, request: dict[str, Any]) -> tuple[int, bytes]:
        """Up to 100 items, relayed 25 at a time; the unprocessed items of every part gathered."""
        self.node.cluster.note_batch(_batch_size(request))
        unprocessed: dict[str, list] = {}
        for part in _parts(request):
            status, answer = self.relay(json.dumps(part).encode())
            if status != 200:
                return status, answer
            for table, left in json.loads(answer).get("UnprocessedItems", {}).items():
                unprocessed.setdefault(table, []).extend(left)
        return 200, json.dumps({"UnprocessedItems": unprocessed}).encode()

    def relay(self, body: bytes) -> tuple[int, bytes]:
        upstream = self.node.cluster.upstream
        connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _RELAYED_HEADERS_LEFT_OUT}
            connection.request("POST", self.path, body=body, headers={**headers, "Content-Length": str(len(body))})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def without_capacity(self, answer: bytes) -> bytes:
        try:
            document = json.loads(answer)
        except ValueError:
            return answer
        if isinstance(document, dict) and document.pop("ConsumedCapacity", None) is not None:
            self.node.cluster.add("capacity_stripped")
            return json.dumps(document).encode()
        return answer

    def refuse(self, message: str) -> None:
        self.reply(400, json.dumps({"__type": _VALIDATION, "message": message}).encode(), "application/x-amz-json-1.0")

    def reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response_only(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


_Node.handler = _Handler


def _batch_size(request: dict[str, Any]) -> int:
    return sum(len(writes) for writes in request.get("RequestItems", {}).values())


def _parts(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The batch as requests of at most 25 items, the other parameters kept."""
    writes = [(table, write) for table, entries in request["RequestItems"].items() for write in entries]
    parts = []
    for start in range(0, len(writes), MOTO_BATCH_LIMIT):
        items: dict[str, list] = {}
        for table, write in writes[start : start + MOTO_BATCH_LIMIT]:
            items.setdefault(table, []).append(write)
        parts.append({**request, "RequestItems": items})
    return parts
