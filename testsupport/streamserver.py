"""A scripted DynamoDB Streams server over HTTP, for what moto cannot do: shard splits,
closed and expired shards, trimmed data, expired iterators, throttling and 5xx faults.

    schema = [{"AttributeName": "pk", "KeyType": "HASH"}]
    with ScriptedStreamServer(table_name="t", key_schema=schema) as server:
        a, b, c = make_shard_id("a"), make_shard_id("b"), make_shard_id("c")
        server.add_shard(a)
        seq = server.put(a, "INSERT", {"pk": {"S": "k"}}, new_image={"pk": {"S": "k"}, "v": {"B": b"\\x00"}})
        server.split(a, [b, c])                       # closes a, adds b and c with ParentShardId a
        server.fail_next("GetRecords", "LimitExceededException", times=2)
        client = boto3.client("dynamodbstreams", endpoint_url=server.endpoint_url, ...)
        ...
        server.calls      # [(operation, request dict), ...] of every request received
        server.counts     # {"GetRecords": 12, ...}; server.fault_counts per error code

It speaks the DynamoDB Streams JSON protocol (X-Amz-Target ``DynamoDBStreams_20120810.<Op>``,
``application/x-amz-json-1.0``) for ListStreams, DescribeStream, GetShardIterator and
GetRecords, one stream per server. Errors are HTTP 400 (500 for InternalServerError, 503 for
ServiceUnavailable) with ``{"__type": "com.amazonaws.dynamodb.v20120810#<Code>", "message"}``.

Semantics, kept close to the AWS API reference (where AWS leaves a choice open, the server
takes the one that is harder on a client):

- Shard ids must be at least 28 characters, as botocore validates; ``make_shard_id(label)``
  builds one. Sequence numbers are decimal strings of 21+ digits, increasing within a shard,
  with gaps (consumers must not assume ``n + 1``). The leading digit(s) grow with lineage depth,
  so every child shard's numbers are larger than its parent's (and compare correctly only as
  integers once the depth reaches 9).
- A shard's StartingSequenceNumber is fixed when it is added; ``close_shard`` sets an
  EndingSequenceNumber strictly larger than any of its records (it is not a record's number).
- DescribeStream lists shards in creation order (``shard_order="reverse"`` lists children before
  parents); ``LastEvaluatedShardId`` is set whenever a page is full, so the last page may be
  empty, as the API reference allows. ``ShardFilter`` CHILD_SHARDS is supported.
- Iterators are opaque strings encoding (shard, position, generation, issue time); an iterator
  can be reused until it expires. GetRecords on an open shard at its end returns no records and
  a NextShardIterator; on a closed shard the response that reaches the end has no
  NextShardIterator (with ``end_with_empty_page=True``: the final records come with an iterator,
  and the next, empty response has none).
- ``trim(shard, before)`` drops records numbered below ``before``. Any position that would read
  a dropped record (AT/AFTER_SEQUENCE_NUMBER at or before the newest dropped record, or an
  outstanding iterator positioned there) gets TrimmedDataAccessException; resuming right after
  the last dropped record is fine. TRIM_HORIZON starts after the dropped records.
- ``remove_shard(shard)`` is the 24 h expiry: DescribeStream no longer lists it (children keep
  their ParentShardId), GetShardIterator and GetRecords get ResourceNotFoundException.
- ``unlist_next(shard, listings=1)``: the next ``listings`` DescribeStream answers leave the shard
  out, later ones list it again (a listing is not a consistent snapshot while shards expire);
  it can still be read meanwhile, and a ShardFilter CHILD_SHARDS answer (no listing) shows it.
- ``expire_iterators(shard=None)`` invalidates every iterator issued so far (or issued for one
  shard): GetRecords gets ExpiredIteratorException. ``iterator_ttl`` expires them by age (AWS:
  900 s). An injected ExpiredIteratorException also expires the iterator it was given.
- ``put`` takes wire-form attribute values (bytes for B and BS, like boto3's low-level client)
  and images for every view type; the server keeps what the stream's view type shows
  (KEYS_ONLY: Keys; NEW_IMAGE: NewImage; OLD_IMAGE: OldImage; NEW_AND_OLD_IMAGES: both) and
  rejects a record AWS could not produce (an INSERT with an old image, a missing key, ...).
- ``shard_read_limit=N``: more than N GetRecords per second on one shard gets
  LimitExceededException (AWS: no more than two readers per shard).
- ``add_hook(fn)``: ``fn(operation, request)`` runs before each request is served, so a test can
  change the topology at an exact point of a run (after the 3rd GetRecords, say). An exception in
  a hook (or in the server) is answered with InternalServerError and kept in ``server.errors``.

Clients may keep connections alive; request bodies need a Content-Length (as botocore sends).
"""

from __future__ import annotations

import base64
import collections
import copy
import datetime
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from testsupport.loopback import KeepAliveHandler, LoopbackService

OPERATIONS = ("ListStreams", "DescribeStream", "GetShardIterator", "GetRecords")
TARGET_PREFIX = "DynamoDBStreams_20120810."
CONTENT_TYPE = "application/x-amz-json-1.0"

_DYNAMODB = "com.amazonaws.dynamodb.v20120810#"
ERRORS = {  # code -> (HTTP status, "__type")
    "LimitExceededException": (400, _DYNAMODB + "LimitExceededException"),
    "ProvisionedThroughputExceededException": (400, _DYNAMODB + "ProvisionedThroughputExceededException"),
    "ThrottlingException": (400, "com.amazon.coral.availability#ThrottlingException"),
    "ExpiredIteratorException": (400, _DYNAMODB + "ExpiredIteratorException"),
    "TrimmedDataAccessException": (400, _DYNAMODB + "TrimmedDataAccessException"),
    "ResourceNotFoundException": (400, _DYNAMODB + "ResourceNotFoundException"),
    "ValidationException": (400, "com.amazon.coral.validate#ValidationException"),
    "SerializationException": (400, "com.amazon.coral.service#SerializationException"),
    "UnknownOperationException": (400, "com.amazon.coral.service#UnknownOperationException"),
    "InternalServerError": (500, _DYNAMODB + "InternalServerError"),
    "ServiceUnavailable": (503, _DYNAMODB + "ServiceUnavailable"),
}
# What fail_next() can inject: any error above, or "drop" (close the connection unanswered:
# botocore raises ConnectionClosedError).
FAULTS = (*ERRORS, "drop")

EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")
VIEW_TYPES = ("KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")
TTL_IDENTITY = {"PrincipalId": "dynamodb.amazonaws.com", "Type": "Service"}
REPLICATION_IDENTITY = {"PrincipalId": "replication.dynamodb.amazonaws.com", "Type": "Service"}

_SEQ_DEPTH = 10**20  # (depth + 1) * _SEQ_DEPTH + counter * _SEQ_STEP: 21 digits at depth 0..8
_SEQ_STEP = 10  # gaps between consecutive numbers
_MIN_SHARD_ID = 28  # botocore rejects shorter ShardId values client-side
_ITERATOR_PREFIX = "sit1-"


def make_shard_id(label: str | int) -> str:
    """A valid, readable shard id: ``make_shard_id("a")`` -> ``shardId-000...000a`` (36 chars)."""
    return f"shardId-{str(label):0>28}"


class StreamApiError(Exception):
    """An API error the server answers with (code is a key of ERRORS)."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class _Record:
    seq: int
    created: float
    wire: dict[str, Any]  # the JSON record as served (B values already base64)


@dataclass
class _Shard:
    shard_id: str
    parent_id: str | None
    depth: int
    start: int
    end: int | None = None
    records: list[_Record] = field(default_factory=list)
    trimmed_through: int | None = None  # newest sequence number dropped by trim()
    removed: bool = False

    @property
    def closed(self) -> bool:
        return self.end is not None

    def horizon(self) -> int:
        """First readable position: after the trimmed records."""
        return self.start if self.trimmed_through is None else max(self.start, self.trimmed_through + 1)


@dataclass
class _Fault:
    code: str
    times: int
    shard_id: str | None


class ScriptedStreamServer(LoopbackService):
    """One DynamoDB stream on a free loopback port, scripted from the test; a context manager."""

    thread_name = "streamserver"

    def __init__(
        self,
        table_name: str = "t",
        key_schema: Iterable[dict[str, str]] | None = None,
        view_type: str = "NEW_AND_OLD_IMAGES",
        region: str = "us-east-1",
        account: str = "123456789012",
        shard_order: str = "creation",
        end_with_empty_page: bool = False,
        iterator_ttl: float | None = None,
        shard_read_limit: int | None = None,
    ):
        super().__init__()
        if view_type not in VIEW_TYPES:
            raise ValueError(f"view_type must be one of {VIEW_TYPES}, got {view_type!r}")
        if shard_order not in ("creation", "reverse"):
            raise ValueError(f"shard_order must be 'creation' or 'reverse', got {shard_order!r}")
        self.table_name = table_name
        self.key_schema = [dict(k) for k in (key_schema or [{"AttributeName": "pk", "KeyType": "HASH"}])]
        self.key_names = [k["AttributeName"] for k in self.key_schema]
        self.view_type = view_type
        self.region = region
        self.shard_order = shard_order
        self.end_with_empty_page = end_with_empty_page
        self.iterator_ttl = iterator_ttl
        self.shard_read_limit = shard_read_limit
        self.created_at = float(int(time.time()))
        self.stream_label = datetime.datetime.fromtimestamp(self.created_at, datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%S.000"
        )
        self.stream_arn = f"arn:aws:dynamodb:{region}:{account}:table/{table_name}/stream/{self.stream_label}"
        self._lock = threading.RLock()
        self._shards: dict[str, _Shard] = {}  # insertion order = creation order
        self._counter = 0
        self._iterator_serial = 0
        self._expired_before: dict[str | None, int] = {}  # shard (None: all) -> first valid serial
        self._expired_serials: set[int] = set()
        self._faults: dict[str | None, collections.deque[_Fault]] = collections.defaultdict(collections.deque)
        self._reads: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._hooks: list[Callable[[str, dict], None]] = []
        self._answer_hooks: list[Callable[[str, dict, dict], None]] = []
        self._unlisted: collections.Counter[str] = collections.Counter()  # shard -> listings left out of
        self.errors: list[Exception] = []  # unexpected exceptions (hooks, bugs), answered with HTTP 500
        self._calls: list[tuple[str, dict]] = []
        self._counts: collections.Counter[str] = collections.Counter()
        self._fault_counts: collections.Counter[str] = collections.Counter()

    # -- lifecycle ----------------------------------------------------------

    # -- topology -----------------------------------------------------------

    def add_shard(self, shard_id: str, parent_id: str | None = None) -> str:
        """Add an open shard (a child when parent_id is given; the parent may be unknown or
        removed, as after an expiry). Returns shard_id."""
        for name in (shard_id, parent_id):
            if name is not None and (not isinstance(name, str) or len(name) < _MIN_SHARD_ID):
                raise ValueError(
                    f"shard ids need at least {_MIN_SHARD_ID} characters (botocore validates it): "
                    f"{name!r}; use make_shard_id()"
                )
        with self._lock:
            if shard_id in self._shards:
                raise ValueError(f"shard {shard_id} exists already")
            parent = self._shards.get(parent_id) if parent_id else None
            depth = 0 if parent_id is None else (parent.depth + 1 if parent else 1)
            self._shards[shard_id] = _Shard(shard_id, parent_id, depth, start=self._allocate(depth))
            return shard_id

    def close_shard(self, shard_id: str) -> str:
        """Close a shard: it gets an EndingSequenceNumber above its records. Returns it."""
        with self._lock:
            shard = self._live_shard(shard_id)
            if shard.closed:
                raise ValueError(f"shard {shard_id} is closed already")
            shard.end = self._allocate(shard.depth)
            return str(shard.end)

    def split(self, parent_id: str, child_ids: Iterable[str]) -> list[str]:
        """Close the parent (if open) and add the children with ParentShardId = parent."""
        child_ids = list(child_ids)
        with self._lock:
            if not self._live_shard(parent_id).closed:
                self.close_shard(parent_id)
            for child in child_ids:
                self.add_shard(child, parent_id)
        return child_ids

    def trim(self, shard_id: str, before_sequence: str | int) -> int:
        """Drop the shard's records numbered below before_sequence; returns how many."""
        before = int(before_sequence)
        with self._lock:
            shard = self._live_shard(shard_id)
            dropped = [r for r in shard.records if r.seq < before]
            shard.records = [r for r in shard.records if r.seq >= before]
            if dropped:
                newest = dropped[-1].seq
                shard.trimmed_through = max(shard.trimmed_through or 0, newest)
            return len(dropped)

    def remove_shard(self, shard_id: str) -> None:
        """The 24 h expiry: unlisted, and ResourceNotFoundException for iterators and reads."""
        with self._lock:
            self._live_shard(shard_id).removed = True

    def unlist_next(self, shard_id: str, listings: int = 1) -> None:
        """Leave the shard out of the next `listings` DescribeStream answers; later ones list it again."""
        with self._lock:
            self._live_shard(shard_id)
            self._unlisted[shard_id] += listings

    def unlisting(self, shard_id: str) -> int:
        """How many more DescribeStream answers will leave the shard out."""
        with self._lock:
            return self._unlisted[shard_id]

    def put(
        self,
        shard_id: str,
        event_name: str,
        keys: dict[str, dict],
        new_image: dict[str, dict] | None = None,
        old_image: dict[str, dict] | None = None,
        ttl_delete: bool = False,
        created: float | None = None,
        region: str | None = None,
        replicated: bool = False,
    ) -> str:
        """Append a record to an open shard; returns its sequence number.

        Values are wire form ({"S": ...}, {"B": bytes}, ...). ``created`` is the epoch of
        ApproximateCreationDateTime (default: now, rounded down to the second); ``region``
        overrides the record's awsRegion; ``ttl_delete`` marks a REMOVE as done by TTL
        (userIdentity = the DynamoDB service); ``replicated`` marks a global table's write
        replicated from another region (userIdentity = the replication service).
        """
        if event_name not in EVENT_NAMES:
            raise ValueError(f"event_name must be one of {EVENT_NAMES}, got {event_name!r}")
        self._check_record(event_name, keys, new_image, old_image, ttl_delete)
        view = self.view_type
        dynamodb: dict[str, Any] = {
            "ApproximateCreationDateTime": float(int(time.time())) if created is None else created,
            "Keys": _serialize_map(keys),
        }
        if view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") and new_image is not None:
            dynamodb["NewImage"] = _serialize_map(new_image)
        if view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") and old_image is not None:
            dynamodb["OldImage"] = _serialize_map(old_image)
        images = [dynamodb[k] for k in ("Keys", "NewImage", "OldImage") if k in dynamodb]
        size = sum(len(json.dumps(image, separators=(",", ":"))) for image in images)
        record: dict[str, Any] = {
            "eventID": uuid.uuid4().hex,
            "eventName": event_name,
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": region or self.region,
            "dynamodb": dynamodb,
        }
        if ttl_delete:
            record["userIdentity"] = dict(TTL_IDENTITY)
        if replicated:
            record["userIdentity"] = dict(REPLICATION_IDENTITY)
        with self._lock:
            shard = self._live_shard(shard_id)
            if shard.closed:
                raise ValueError(f"shard {shard_id} is closed: no more records")
            seq = self._allocate(shard.depth)
            dynamodb["SequenceNumber"] = str(seq)
            dynamodb["SizeBytes"] = max(1, size)
            dynamodb["StreamViewType"] = view
            shard.records.append(_Record(seq, dynamodb["ApproximateCreationDateTime"], record))
            return str(seq)

    # -- faults -------------------------------------------------------------

    def fail_next(self, operation: str | None, code: str, times: int = 1, shard_id: str | None = None) -> None:
        """The next ``times`` requests of ``operation`` (None: any) get error ``code`` (a key of
        ERRORS, or "drop"). With shard_id, only requests about that shard (GetShardIterator's
        ShardId, GetRecords' iterator) count. Faults queue up in order."""
        if operation is not None and operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {OPERATIONS} or None, got {operation!r}")
        if code not in FAULTS:
            raise ValueError(f"code must be one of {FAULTS}, got {code!r}")
        if times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self._faults[operation].append(_Fault(code, times, shard_id))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def expire_iterators(self, shard_id: str | None = None) -> None:
        """Every iterator issued so far (for one shard, or all) now gets ExpiredIteratorException."""
        with self._lock:
            self._expired_before[shard_id] = self._iterator_serial + 1

    def add_hook(self, hook: Callable[[str, dict], None]) -> None:
        """hook(operation, request) runs before each request is served (scripting calls allowed)."""
        with self._lock:
            self._hooks.append(hook)

    def add_answer_hook(self, hook: Callable[[str, dict, dict], None]) -> None:
        """hook(operation, request, answer) runs on each answer served, faults excepted, before it is sent."""
        with self._lock:
            self._answer_hooks.append(hook)

    # -- observability ------------------------------------------------------

    @property
    def calls(self) -> list[tuple[str, dict]]:
        """Snapshot: (operation, request dict) of every request received, faulted ones included."""
        with self._lock:
            return list(self._calls)

    @property
    def counts(self) -> dict[str, int]:
        """Snapshot: requests received per operation."""
        with self._lock:
            return dict(self._counts)

    @property
    def fault_counts(self) -> dict[str, int]:
        """Snapshot: errors answered per code (injected, limits and scripted conditions)."""
        with self._lock:
            return dict(self._fault_counts)

    def clear_calls(self) -> None:
        with self._lock:
            self._calls.clear()
            self._counts.clear()
            self._fault_counts.clear()

    def shard_ids(self, include_removed: bool = False) -> list[str]:
        with self._lock:
            return [s.shard_id for s in self._shards.values() if include_removed or not s.removed]

    def records(self, shard_id: str) -> list[dict]:
        """The shard's readable records, as served (a deep copy)."""
        with self._lock:
            return [copy.deepcopy(r.wire) for r in self._shards[shard_id].records]

    # -- internals ----------------------------------------------------------

    def _allocate(self, depth: int) -> int:
        self._counter += 1
        return (depth + 1) * _SEQ_DEPTH + self._counter * _SEQ_STEP

    def _next_position(self, depth: int) -> int:
        """A position that every future record of a shard at this depth is at or after."""
        return (depth + 1) * _SEQ_DEPTH + (self._counter + 1) * _SEQ_STEP

    def _live_shard(self, shard_id: str) -> _Shard:
        shard = self._shards.get(shard_id)
        if shard is None:
            raise KeyError(f"no shard {shard_id}")
        if shard.removed:
            raise ValueError(f"shard {shard_id} was removed")
        return shard

    def _check_record(self, event_name, keys, new_image, old_image, ttl_delete) -> None:
        if set(keys) != set(self.key_names):
            raise ValueError(f"keys must have exactly the key attributes {self.key_names}, got {sorted(keys)}")
        if event_name == "INSERT" and old_image is not None:
            raise ValueError("an INSERT has no old image")
        if event_name == "REMOVE" and new_image is not None:
            raise ValueError("a REMOVE has no new image")
        if ttl_delete and event_name != "REMOVE":
            raise ValueError("ttl_delete is for REMOVE records")
        view = self.view_type
        if view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") and event_name != "REMOVE" and new_image is None:
            raise ValueError(f"a {view} stream's {event_name} record needs new_image")
        if view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") and event_name != "INSERT" and old_image is None:
            raise ValueError(f"a {view} stream's {event_name} record needs old_image")
        for name, image in (("new_image", new_image), ("old_image", old_image)):
            if image is not None and any(image.get(k) != keys[k] for k in self.key_names):
                raise ValueError(f"{name} must hold the same key values as keys")

    # -- serving (handler threads) ------------------------------------------

    def serve(self, target: str | None, body: bytes) -> tuple[int, dict] | None:
        """The (HTTP status, JSON body) answering one request; None: drop the connection."""
        operation = (target or "").removeprefix(TARGET_PREFIX)
        try:
            request = json.loads(body or b"{}")
            malformed = not isinstance(request, dict)
        except ValueError:
            request, malformed = None, True
        if malformed:
            request = {"_malformed": body[:200]}
        with self._lock:
            self._calls.append((operation, request))
            self._counts[operation] += 1
            hooks = list(self._hooks)
        if not target or not target.startswith(TARGET_PREFIX) or operation not in OPERATIONS:
            return self._error(StreamApiError("UnknownOperationException", f"unknown operation {target!r}"))
        if malformed:
            return self._error(StreamApiError("SerializationException", "request body is not a JSON object"))
        try:
            for hook in hooks:
                hook(operation, request)
            with self._lock:
                fault = self._take_fault(operation, request)
                if fault == "drop":
                    self._fault_counts["drop"] += 1
                    return None
                if fault is not None:
                    raise StreamApiError(fault, f"injected fault: {fault}")
                answer = getattr(self, "_op_" + operation)(request)
                for answer_hook in self._answer_hooks:
                    answer_hook(operation, request, answer)
                return 200, answer
        except StreamApiError as error:
            return self._error(error)
        except Exception as error:  # a hook's or the server's own bug: say so, keep serving
            with self._lock:
                self.errors.append(error)
            return self._error(StreamApiError("InternalServerError", f"server bug: {error!r}"))

    def _error(self, error: StreamApiError) -> tuple[int, dict]:
        status, error_type = ERRORS[error.code]
        with self._lock:
            self._fault_counts[error.code] += 1
        return status, {"__type": error_type, "message": error.message}

    def _take_fault(self, operation: str, request: dict) -> str | None:
        shard_id = None
        serial = None
        if operation == "GetShardIterator":
            shard_id = request.get("ShardId")
        elif operation == "GetRecords":
            try:
                shard_id, _, _, serial, _ = self.decode_iterator(request.get("ShardIterator"))
            except StreamApiError:
                pass
        for queue in (self._faults.get(operation), self._faults.get(None)):
            for fault in list(queue or ()):
                if fault.shard_id is not None and fault.shard_id != shard_id:
                    continue
                fault.times -= 1
                if fault.times == 0:
                    queue.remove(fault)
                if fault.code == "ExpiredIteratorException" and serial is not None:
                    self._expired_serials.add(serial)
                return fault.code
        return None

    def _check_arn(self, request: dict) -> None:
        arn = request.get("StreamArn")
        if not arn:
            raise StreamApiError("ValidationException", "StreamArn is required")
        if arn != self.stream_arn:
            raise StreamApiError("ResourceNotFoundException", f"Requested resource not found: Stream: {arn}")

    def _shard_for(self, shard_id: Any) -> _Shard:
        shard = self._shards.get(shard_id) if isinstance(shard_id, str) else None
        if shard is None or shard.removed:
            raise StreamApiError(
                "ResourceNotFoundException",
                f"Requested resource not found: Shard does not exist: {shard_id} in {self.stream_arn}",
            )
        return shard

    @staticmethod
    def _limit(request: dict, default: int, upper: int) -> int:
        limit = request.get("Limit", default)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= upper:
            raise StreamApiError("ValidationException", f"Limit must be from 1 to {upper}, got {limit!r}")
        return limit

    def _ordered_shards(self) -> list[_Shard]:
        shards = list(self._shards.values())
        return shards[::-1] if self.shard_order == "reverse" else shards

    # -- operations (under the lock) ----------------------------------------

    def _op_ListStreams(self, request: dict) -> dict:
        limit = self._limit(request, 100, 100)
        streams = []
        table = request.get("TableName")
        start = request.get("ExclusiveStartStreamArn")
        if (table is None or table == self.table_name) and start != self.stream_arn:
            streams.append(
                {"StreamArn": self.stream_arn, "TableName": self.table_name, "StreamLabel": self.stream_label}
            )
        response: dict[str, Any] = {"Streams": streams[:limit]}
        if len(streams) >= limit:
            response["LastEvaluatedStreamArn"] = streams[limit - 1]["StreamArn"]
        return response

    def _op_DescribeStream(self, request: dict) -> dict:
        self._check_arn(request)
        limit = self._limit(request, 100, 100)
        ordered = self._ordered_shards()
        start = request.get("ExclusiveStartShardId")
        if start is not None:
            index = next((i for i, s in enumerate(ordered) if s.shard_id == start), None)
            if index is None:
                raise StreamApiError("ValidationException", f"ExclusiveStartShardId {start}: no such shard")
            ordered = ordered[index + 1 :]
        shard_filter = request.get("ShardFilter")
        # Unlisting stands for a listing pass that missed a shard; a lookup of one parent's children is no pass.
        shards = [s for s in ordered if not s.removed and (shard_filter or not self._unlisted[s.shard_id])]
        if start is None and not shard_filter:  # one answer of a listing (its first page) uses up one unlisting
            for shard_id in [shard_id for shard_id, left in self._unlisted.items() if left]:
                self._unlisted[shard_id] -= 1
        if shard_filter:
            if shard_filter.get("Type") != "CHILD_SHARDS" or not shard_filter.get("ShardId"):
                raise StreamApiError("ValidationException", "ShardFilter needs Type CHILD_SHARDS and a ShardId")
            shards = [s for s in shards if s.parent_id == shard_filter["ShardId"]]
        page = shards[:limit]
        description: dict[str, Any] = {
            "StreamArn": self.stream_arn,
            "StreamLabel": self.stream_label,
            "StreamStatus": "ENABLED",
            "StreamViewType": self.view_type,
            "CreationRequestDateTime": self.created_at,
            "TableName": self.table_name,
            "KeySchema": [dict(k) for k in self.key_schema],
            "Shards": [_describe_shard(s) for s in page],
        }
        if len(page) == limit:
            description["LastEvaluatedShardId"] = page[-1].shard_id
        return {"StreamDescription": description}

    def _op_GetShardIterator(self, request: dict) -> dict:
        self._check_arn(request)
        shard = self._shard_for(request.get("ShardId"))
        kind = request.get("ShardIteratorType")
        if kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            raw = request.get("SequenceNumber")
            if not isinstance(raw, str) or not raw.isdigit():
                raise StreamApiError("ValidationException", f"{kind} needs a decimal SequenceNumber: {raw!r}")
            number = int(raw)
            if number < shard.start or (shard.closed and number > shard.end):
                raise StreamApiError(
                    "ValidationException",
                    f"Invalid SequenceNumber for ShardIteratorType {kind}: {raw} not in {shard.shard_id}",
                )
            position = number if kind == "AT_SEQUENCE_NUMBER" else number + 1
            if shard.trimmed_through is not None and position <= shard.trimmed_through:
                raise StreamApiError(
                    "TrimmedDataAccessException",
                    f"The data you are trying to access has been trimmed: {kind} {raw} in {shard.shard_id}",
                )
        elif kind == "TRIM_HORIZON":
            position = shard.horizon()
        elif kind == "LATEST":
            position = shard.end + 1 if shard.closed else self._next_position(shard.depth)
        elif kind == "AT_TIMESTAMP":
            when = request.get("Timestamp")
            if not isinstance(when, (int, float)):
                raise StreamApiError("ValidationException", "AT_TIMESTAMP needs a Timestamp")
            first = next((r for r in shard.records if r.created >= when), None)
            if first is not None:
                position = first.seq
            else:
                position = shard.end + 1 if shard.closed else self._next_position(shard.depth)
        else:
            raise StreamApiError("ValidationException", f"invalid ShardIteratorType {kind!r}")
        return {"ShardIterator": self._issue_iterator(shard.shard_id, position)}

    def _op_GetRecords(self, request: dict) -> dict:
        shard_id, position, issued_at, serial, arn = self.decode_iterator(request.get("ShardIterator"))
        limit = self._limit(request, 1000, 1000)
        if arn != self.stream_arn:
            raise StreamApiError("ResourceNotFoundException", f"Requested resource not found: Stream: {arn}")
        shard = self._shard_for(shard_id)
        if (
            serial < self._expired_before.get(None, 0)
            or serial < self._expired_before.get(shard_id, 0)
            or serial in self._expired_serials
            or (self.iterator_ttl is not None and time.time() - issued_at > self.iterator_ttl)
        ):
            raise StreamApiError("ExpiredIteratorException", f"Iterator expired (shard {shard_id})")
        if shard.trimmed_through is not None and position <= shard.trimmed_through:
            raise StreamApiError(
                "TrimmedDataAccessException",
                f"The data you are trying to access has been trimmed: iterator of shard {shard_id}",
            )
        if self.shard_read_limit is not None:
            now = time.monotonic()
            reads = self._reads[shard_id]
            while reads and now - reads[0] >= 1.0:
                reads.popleft()
            if len(reads) >= self.shard_read_limit:
                raise StreamApiError("LimitExceededException", f"Rate exceeded for shard {shard_id}")
            reads.append(now)
        available = [r for r in shard.records if r.seq >= position]
        page = available[:limit]
        next_position = page[-1].seq + 1 if page else position
        response: dict[str, Any] = {"Records": [copy.deepcopy(r.wire) for r in page]}
        at_end = len(page) == len(available)
        if shard.closed and at_end and not (self.end_with_empty_page and page):
            return response  # no NextShardIterator: the shard is done
        response["NextShardIterator"] = self._issue_iterator(shard_id, next_position)
        return response

    # -- iterators ----------------------------------------------------------

    def _issue_iterator(self, shard_id: str, position: int) -> str:
        self._iterator_serial += 1
        payload = [self.stream_arn, shard_id, str(position), round(time.time(), 3), self._iterator_serial]
        encoded = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode())
        return _ITERATOR_PREFIX + encoded.decode().rstrip("=")

    def decode_iterator(self, iterator: Any) -> tuple[str, int, float, int, str]:
        """(shard, position, issue time, serial, stream ARN) of an iterator this server issued; tests read it too."""
        try:
            if not isinstance(iterator, str) or not iterator.startswith(_ITERATOR_PREFIX):
                raise ValueError
            text = iterator[len(_ITERATOR_PREFIX) :]
            payload = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            arn, shard_id, position, issued_at, serial = json.loads(payload)
            return shard_id, int(position), float(issued_at), int(serial), arn
        except (ValueError, TypeError):
            message = f"Invalid ShardIterator: {str(iterator)[:60]!r}"
            raise StreamApiError("ValidationException", message) from None

def _describe_shard(shard: _Shard) -> dict:
    numbers = {"StartingSequenceNumber": str(shard.start)}
    if shard.closed:
        numbers["EndingSequenceNumber"] = str(shard.end)
    described: dict[str, Any] = {"ShardId": shard.shard_id, "SequenceNumberRange": numbers}
    if shard.parent_id is not None:
        described["ParentShardId"] = shard.parent_id
    return described


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    inner = getattr(value, "value", None)  # boto3.dynamodb.types.Binary
    if isinstance(inner, (bytes, bytearray)):
        return bytes(inner)
    raise TypeError(f"B values must be bytes, got {type(value).__name__}")


def _serialize_value(value: dict) -> dict:
    """Wire-form attribute value (bytes for B, BS) -> its JSON form (base64 for B, BS)."""
    if not isinstance(value, dict) or len(value) != 1:
        raise ValueError(f"an attribute value is a one-key dict like {{'S': 'x'}}, got {value!r}")
    (kind, inner), = value.items()
    if kind == "B":
        return {"B": base64.b64encode(_as_bytes(inner)).decode()}
    if kind == "BS":
        return {"BS": [base64.b64encode(_as_bytes(v)).decode() for v in inner]}
    if kind == "M":
        return {"M": _serialize_map(inner)}
    if kind == "L":
        return {"L": [_serialize_value(v) for v in inner]}
    if kind in ("S", "N", "BOOL", "NULL"):
        return {kind: inner}
    if kind in ("SS", "NS"):
        return {kind: list(inner)}
    raise ValueError(f"unknown attribute type {kind!r}")


def _serialize_map(item: dict[str, dict]) -> dict[str, dict]:
    return {name: _serialize_value(value) for name, value in item.items()}


class _Handler(KeepAliveHandler):
    """Answers the DynamoDB Streams JSON protocol from the scripted state."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        answer = self.server.service.serve(self.headers.get("X-Amz-Target"), body)
        if answer is None:
            self.close_connection = True  # hang up without a word
            return
        status, payload = answer
        data = json.dumps(payload, separators=(",", ":")).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("x-amzn-RequestId", uuid.uuid4().hex)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ScriptedStreamServer.handler = _Handler  # defined after the class it serves
