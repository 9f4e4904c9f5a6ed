"""A fault-injecting HTTP reverse proxy for the emulator, so tests can prove retry behaviour against throttling, 5xx errors and dropped connections.

    with FaultProxy(emulator_url, fault_rate=0.3) as proxy:
        client = boto3.client("dynamodb", endpoint_url=proxy.endpoint_url, ...)
        ...
        proxy.counts  # {"throughput": 4, ..., "forwarded": 57}

Each request whose ``X-Amz-Target`` operation is in ``operations`` (None: any
request with an ``X-Amz-Target``) gets a seeded draw; below ``fault_rate`` it
gets one fault picked from ``faults``:

- "throughput" / "throttling": HTTP 400 with a DynamoDB JSON error,
- "http500" / "http503": InternalServerError / ServiceUnavailable,
- "drop": the request IS forwarded (the write may happen), then the client
  connection is closed without a response (botocore: ConnectionClosedError),
- "denied": HTTP 400 AccessDeniedException, as AWS answers a caller whose policy lacks the
  action (a missing permission; never retried). Only when asked for: not in the default
  ``faults``, which are all transient.
- "latency": the request is forwarded after ``latency_seconds`` (0.5 by default), then
  answered normally: a latency spike.
- "expired_iterator" / "limit_exceeded": HTTP 400 ExpiredIteratorException /
  LimitExceededException, as DynamoDB Streams and Kinesis answer a GetRecords whose iterator
  expired (after 15 minutes, API reference) or a shard read too often. They are drawn only for
  the stream reading operations (``STREAM_FAULT_OPERATIONS``); any other request that draws
  one is forwarded as is.

"latency", "expired_iterator" and "limit_exceeded" are opt-in too, so the default draws stay
what they were.

``fault_rate`` may be changed while the proxy runs (``proxy.fault_rate = 0.0``), so one
endpoint can serve a failing run and then its clean rerun.

``throttle("BatchWriteItem", 60)`` answers every such request with
ProvisionedThroughputExceededException (HTTP 400, DynamoDB's JSON error) for 60 seconds from
the first one that arrives, whatever ``fault_rate`` says: sustained throttling, as a table far
over its capacity sees it, starting when the job's writes do (however long the job takes to
start). With ``answer="unprocessed"``, BatchWriteItem requests are answered HTTP 200 with
every item in ``UnprocessedItems`` instead (nothing written), as DynamoDB answers a batch
it has no capacity for item by item. ``counts["throttled"]`` counts those answers;
``first_throttled`` and ``last_throttled`` say when the first and the last were sent
(``time.monotonic()``).

``hold_next("BatchWriteItem")`` parks the next such request (with ``containing=b"..."``: the next
one whose body holds those bytes): neither forwarded nor answered until ``release_held()``, which
then hangs up; ``cancel_hold()`` forgets a hold no request has met yet. ``hold_next_path(("GET",), b"_staging")``
does the same for the next request without an X-Amz-Target (S3) whose method is one of those and whose path
holds the text. A test can kill a job
while its write is in flight (the returned event says when), and the write never lands.

Everything else is forwarded verbatim and the response relayed. With ``record=True``
the proxy keeps ``(operation, body bytes)`` of every forwarded request in
``recorded``, so a test can see what a job asked for (which Scan segments, say). Given a
``clock`` as well (``time.monotonic``, say), each record also carries the clock's reading when
the request arrived and when the emulator's answer came back, ``(operation, body, arrived,
answered)``, so a benchmark can time a job from its first Scan to its last write. Clients may
keep connections alive; request bodies need a Content-Length (as botocore sends).

It also serves as a client's HTTP forward proxy (HTTP_PROXY): the absolute URL of the request
line is relayed as is, and the emulator routes it by its signature and X-Amz-Target, whatever
the host. Given `tls=(certificate path, key path)` it serves HTTPS (see
`loopback.self_signed_certificate`), for tests of AWS_CA_BUNDLE.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
import urllib.parse

from testsupport.loopback import KeepAliveHandler, LoopbackService, server_tls_context
from typing import Callable

FAULTS = ("throughput", "throttling", "http500", "http503", "drop")  # transient: the default
STREAM_FAULTS = ("expired_iterator", "limit_exceeded")
ALL_FAULTS = (*FAULTS, "denied", "latency", *STREAM_FAULTS)
# The operations a stream fault can answer: DynamoDB Streams' and Kinesis's reads.
STREAM_FAULT_OPERATIONS = {
    "expired_iterator": {"GetRecords"},
    "limit_exceeded": {"GetRecords", "GetShardIterator", "DescribeStream", "ListShards"},
}

_DYNAMODB = "com.amazonaws.dynamodb.v20120810#"
ERRORS = {  # fault -> (HTTP status, DynamoDB "__type")
    "throughput": (400, _DYNAMODB + "ProvisionedThroughputExceededException"),
    "throttling": (400, "com.amazon.coral.availability#ThrottlingException"),
    "http500": (500, _DYNAMODB + "InternalServerError"),
    "http503": (503, _DYNAMODB + "ServiceUnavailable"),
    "denied": (400, "com.amazon.coral.service#AccessDeniedException"),
    "expired_iterator": (400, _DYNAMODB + "ExpiredIteratorException"),
    "limit_exceeded": (400, _DYNAMODB + "LimitExceededException"),
}

# Per-hop headers: never forwarded in either direction. (Content-Length is
# recomputed for responses; moto always answers "Connection: close", which
# must not reach keep-alive clients.)
_HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-connection", "transfer-encoding",
    "te", "trailer", "upgrade", "expect",
}


class FaultProxy(LoopbackService):
    """Threaded reverse proxy on a free loopback port; a context manager."""

    thread_name = "faultproxy"

    def __init__(
        self,
        upstream_url: str,
        fault_rate: float = 0.1,
        faults: tuple[str, ...] = FAULTS,
        operations: set[str] | tuple[str, ...] | None = None,
        seed: int = 1,
        record: bool = False,
        clock: Callable[[], float] | None = None,
        tls: tuple[str, str] | None = None,
        latency_seconds: float = 0.5,
    ):
        super().__init__()
        if tls is not None:
            self.ssl_context = server_tls_context(*tls)
        unknown = set(faults) - set(ALL_FAULTS)
        if unknown or not faults:
            raise ValueError(f"faults must be a non-empty subset of {ALL_FAULTS}, got {faults}")
        upstream = urllib.parse.urlsplit(upstream_url)
        self.upstream = (upstream.hostname, upstream.port or 80)
        self.fault_rate = fault_rate
        self.latency_seconds = latency_seconds
        self.faults = tuple(faults)
        self.operations = None if operations is None else set(operations)
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._counts = dict.fromkeys((*self.faults, "forwarded"), 0)
        self._record = record
        self._clock = clock
        self._recorded: list[tuple] = []
        self._handling = 0  # requests received and not yet answered
        self._idle = threading.Condition(self._lock)
        self._hold_operation: str | None = None
        self._hold_containing: bytes | None = None
        self._hold_methods: tuple[str, ...] = ()
        self._hold_path: str | None = None
        self._held = threading.Event()
        self._released = threading.Event()
        self._throttle_operation: str | None = None
        self._throttle_seconds = 0.0
        self._throttle_answer = "throughput"
        self.first_throttled: float | None = None
        self.last_throttled: float | None = None

    @property
    def counts(self) -> dict[str, int]:
        """Snapshot: injected faults per kind, plus "forwarded" (relayed normally)."""
        with self._lock:
            return dict(self._counts)

    @property
    def recorded(self) -> list[tuple]:
        """Snapshot of (operation, request body[, arrived, answered]) of forwarded requests, when recording."""
        with self._lock:
            return list(self._recorded)

    def now(self) -> float | None:
        """The clock's reading, or None without a clock."""
        return None if self._clock is None else self._clock()

    def remember(self, target: str | None, body: bytes, arrived: float | None) -> None:
        if self._record and target:
            record = (target.rpartition(".")[2], body)
            if arrived is not None:
                record += (arrived, self.now())
            with self._lock:
                self._recorded.append(record)

    def wait_until_idle(self, timeout: float = 60.0) -> None:
        """Until no request is being handled: a killed job's request still on its way upstream is recorded
        when its answer comes back, so a test reads what a later run asked for only after this."""
        with self._idle:
            if not self._idle.wait_for(lambda: self._handling == 0, timeout):
                raise AssertionError(f"the proxy still handles {self._handling} requests after {timeout} s")

    def handling(self, change: int) -> None:
        with self._idle:
            self._handling += change
            self._idle.notify_all()

    def hold_next(self, operation: str, containing: bytes | None = None) -> threading.Event:
        """Park the next request of `operation` (see the module doc); the event is set once one is parked."""
        with self._lock:
            self._hold_operation = operation
            self._hold_containing = containing
            self._held.clear()
            self._released.clear()
        return self._held

    def hold_next_path(self, methods: tuple[str, ...], path_containing: str) -> threading.Event:
        """Park the next S3 request (no X-Amz-Target) of one of `methods` whose path holds `path_containing`."""
        with self._lock:
            self._hold_methods = methods
            self._hold_path = path_containing
            self._held.clear()
            self._released.clear()
        return self._held

    def release_held(self) -> None:
        """Hang up on the parked request, if any, without forwarding it."""
        self._released.set()

    def cancel_hold(self) -> None:
        """Forget a hold_next() no request matched yet: the next such request is forwarded."""
        with self._lock:
            self._hold_operation = None
            self._hold_path = None

    def throttle(self, operation: str, seconds: float, answer: str = "error") -> None:
        """Answer every request of `operation` with ProvisionedThroughputExceededException (or, for
        BatchWriteItem with `answer="unprocessed"`, every item unprocessed) for `seconds` from the
        first such request on."""
        if answer not in ("error", "unprocessed") or (answer == "unprocessed" and operation != "BatchWriteItem"):
            raise ValueError(f"answer must be 'error', or 'unprocessed' for BatchWriteItem; got {answer!r}")
        with self._lock:
            self._throttle_operation = operation
            self._throttle_seconds = seconds
            self._throttle_answer = "throughput" if answer == "error" else "unprocessed"
            self.first_throttled = self.last_throttled = None
            self._counts.setdefault("throttled", 0)

    def throttled(self, operation: str) -> str | None:
        """The throttling answer for this request of `operation` while the window is open (counted), else None."""
        with self._lock:
            if operation != self._throttle_operation:
                return None
            now = time.monotonic()
            if self.first_throttled is None:
                self.first_throttled = now
            if now - self.first_throttled >= self._throttle_seconds:
                return None
            self._counts["throttled"] += 1
            self.last_throttled = now
            return self._throttle_answer

    # -- called from handler threads -------------------------------------

    def park_if_held(self, target: str | None, body: bytes = b"", method: str = "", path: str = "") -> bool:
        """Whether this request was the one to hold; if so, returns only once released."""
        with self._lock:
            if self._holds_path(target, method, path):
                self._hold_path = None
            elif not target or self._hold_operation != target.rpartition(".")[2]:
                return False
            elif self._hold_containing is not None and self._hold_containing not in body:
                return False
            else:
                self._hold_operation = None
        self._held.set()
        self._released.wait()
        return True

    def _holds_path(self, target: str | None, method: str, path: str) -> bool:
        return not target and self._hold_path is not None and method in self._hold_methods and self._hold_path in path

    def choose_fault(self, target: str | None) -> str | None:
        """The fault to inject for a request with this X-Amz-Target, or None."""
        if not target:
            return None
        operation = target.rpartition(".")[2]
        throttled = self.throttled(operation)
        if throttled:
            return throttled
        if self.operations is not None and operation not in self.operations:
            return None
        with self._lock:
            if self._random.random() >= self.fault_rate:
                return None
            fault = self._random.choice(self.faults)
            if operation not in STREAM_FAULT_OPERATIONS.get(fault, {operation}):
                return None  # a stream fault drawn for another operation: forwarded as is
            self._counts[fault] += 1
            return fault

    def count(self, key: str) -> None:
        with self._lock:
            self._counts[key] += 1

class _Handler(KeepAliveHandler):
    """Relays a request upstream, or answers it with the fault the proxy chose."""

    def handle_request(self) -> None:
        proxy = self.server.service
        proxy.handling(+1)
        try:
            self._relay(proxy)
        finally:
            proxy.handling(-1)

    def _relay(self, proxy: "FaultProxy") -> None:
        arrived = proxy.now()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if proxy.park_if_held(self.headers.get("X-Amz-Target"), body, self.command, self.path):
            self.close_connection = True  # released: hang up, the request never went upstream
            return
        fault = proxy.choose_fault(self.headers.get("X-Amz-Target"))
        if fault in ERRORS:
            self.send_error_fault(fault)
            return
        if fault == "unprocessed":
            unprocessed = {"UnprocessedItems": json.loads(body)["RequestItems"]}
            self.reply(200, [("Content-Type", "application/x-amz-json-1.0")], json.dumps(unprocessed).encode())
            return
        if fault == "latency":
            time.sleep(proxy.latency_seconds)
        try:
            status, headers, data = self.forward(body)
        except OSError as error:
            self.reply(502, [("Content-Type", "text/plain")], f"upstream: {error}".encode())
            return
        if fault == "drop":
            self.close_connection = True  # hang up without a word
            return
        proxy.count("forwarded")
        proxy.remember(self.headers.get("X-Amz-Target"), body, arrived)
        self.reply(status, headers, data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = handle_request

    def forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        """Send this request upstream verbatim (Host included: it is signed)."""
        conn = http.client.HTTPConnection(*self.server.service.upstream, timeout=60)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP:
                    conn.putheader(name, value)
            conn.endheaders(body)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()

    def send_error_fault(self, fault: str) -> None:
        status, error_type = ERRORS[fault]
        body = json.dumps({"__type": error_type, "message": f"injected fault: {fault}"})
        self.reply(status, [("Content-Type", "application/x-amz-json-1.0")], body.encode())

    def reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status)
        relayed_length = self.command == "HEAD"  # a HEAD's answer has no body: its length is the object's
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and (relayed_length or name.lower() != "content-length"):
                self.send_header(name, value)
        if not relayed_length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


FaultProxy.handler = _Handler  # defined after the class it serves
