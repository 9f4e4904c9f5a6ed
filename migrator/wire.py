"""Scan and BatchWriteItem as raw DynamoDB JSON: the snapshot's data plane, without (de)serialization;
and GetRecords of DynamoDB Streams, which replication's driver calls on every shard at every trigger.

botocore turns every response into Python objects shape by shape and every request back,
validating each parameter: about 0.3 CPU-seconds per thousand items copied, several times
what the copy itself costs. A snapshot only moves items from one table to another, so
here the JSON DynamoDB sends is parsed by the C `json` module and sent back as it came:
numbers stay the service's strings and binary stays its base64 text, which is as exact
as a copy can be. Failures are classified by the same error mapping as every other call
(`aws.translate_error`).

Only the (de)serialization is skipped, never botocore's resolution: each request goes where
the boto3 client that `aws.client` builds from the same `ClientSpec` sends it, signed by that
client's signer (its credentials, session token or assumed role, its signing region and name),
over that client's HTTP session (its proxies, NO_PROXY, CA bundle, client certificate, pool
and timeouts). The URL, extra headers and signing context of an operation on a table are
resolved once, by letting the boto3 client build that request and stopping it just before
signing (`_resolve_route`): the region chain (config, AWS_REGION, profile), AWS_ENDPOINT_URL
and AWS_ENDPOINT_URL_DYNAMODB, profile `endpoint_url` and `services`, partitions (China,
GovCloud), FIPS, dual-stack and account-based endpoints all come out as boto3's.

Responses look like boto3's where the migrator reads them: `Items`, `LastEvaluatedKey`,
`UnprocessedItems`, `ConsumedCapacity`, and `ResponseMetadata.RetryAttempts`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from botocore import xform_name
from botocore.awsrequest import AWSPreparedRequest, AWSRequest, AWSResponse
from botocore.exceptions import ClientError
from botocore.exceptions import ConnectionError as BotocoreConnectionError
from botocore.exceptions import HTTPClientError

from migrator import aws, errors
from migrator.aws import translate_error, translated
from migrator.collector import collector_paused
from migrator.connection import ClientSpec
from migrator.scan_page import parse_keeping_item_texts
from migrator.throttling import THROTTLING_CODES, ThrottledRetry, backoff_seconds

_clients: dict[tuple[ClientSpec, str], "WireClient"] = {}
_clients_lock = threading.Lock()

# Error codes worth another attempt: throttling (retried until the side's give-up time passes
# without progress, see migrator.throttling) and the service's own transient failures (retried
# `max_attempts` times in all).
RETRYABLE_CODES = THROTTLING_CODES | {"InternalServerError", "ServiceUnavailable", "LimitExceededException"}
# What each operation does, for messages: "scanning source table 'orders'".
_ACTIONS = {"Scan": "scanning", "BatchWriteItem": "writing to", "GetItem": "reading from"}


def parse_without_collector(document: bytes) -> Any:
    """json.loads with the cyclic garbage collector paused (`migrator.collector`): a Scan page is a tree
    of some 100,000 containers."""
    with collector_paused():
        return json.loads(document)


def wire_client(spec: ClientSpec, service: str = "dynamodb") -> "WireClient":
    """A cached client per process, spec and service, so tasks on one Python worker share its pool."""
    with _clients_lock:
        cached = _clients.get((spec, service))
        if cached is None:
            cached = _clients[(spec, service)] = WireClient(spec, service)
        return cached


class WireClient:
    """`scan`, `batch_write_item` and `get_item` of DynamoDB, `get_records` of DynamoDB Streams (keyword
    requests as boto3's) over HTTP, signed, retried."""

    def __init__(self, spec: ClientSpec, service: str = "dynamodb"):
        self._spec = spec
        with translated("connecting to", spec.where):
            self._boto = aws.client(spec, service)
        self._event_service = self._boto.meta.service_model.service_id.hyphenize()  # "dynamodb", "dynamodb-streams"
        # botocore's own signer and HTTP session of that client (attributes of every botocore client,
        # private by name; tests/unit/test_wire_routing.py checks what they produce against boto3's).
        self._signer = self._boto._request_signer
        self._http = self._boto._endpoint.http_session
        self._hooks = aws.request_hooks(spec)
        self._routes: dict[tuple[str, tuple[str, ...]], _Route] = {}
        self._routes_lock = threading.Lock()

    def scan(self, **request: Any) -> dict[str, Any]:
        return self._call("Scan", request)

    def scan_keeping_texts(self, **request: Any) -> dict[str, Any]:
        """`scan`, the response also holding each item's text as sent, in `ItemTexts` (`migrator.scan_page`)."""
        return self._call("Scan", request, parse=parse_keeping_item_texts)

    def batch_write_item(self, **request: Any) -> dict[str, Any]:
        return self._call("BatchWriteItem", request)

    def get_item(self, **request: Any) -> dict[str, Any]:
        return self._call("GetItem", request)

    def get_records(self, **request: Any) -> dict[str, Any]:
        """DynamoDB Streams' GetRecords. Records as the wire sends them (binary as base64, the creation time
        in epoch seconds); an error that is not retried raises botocore's `ClientError`, as boto3's call
        would, since what it means (an expired iterator, trimmed records, a shard gone) is the caller's."""
        return self._call("GetRecords", request, client_errors=True)

    def _call(
        self, operation: str, request: dict[str, Any], client_errors: bool = False,
        parse: Callable[[bytes], dict[str, Any]] = parse_without_collector,
    ) -> dict[str, Any]:  # fmt: skip
        body = json.dumps(request, separators=(",", ":")).encode("utf-8")
        route = self._route(operation, request)
        # One context for all attempts: an Alternator request's retry goes on to the next node of its plan.
        context = dict(route.context)
        failures = 0  # transient failures other than throttling
        throttled: ThrottledRetry | None = None
        while True:
            response, transient = self._attempt(operation, route, body, context, client_errors, parse)
            if response is not None:
                retries = failures + (throttled.retries if throttled else 0)
                response.setdefault("ResponseMetadata", {})["RetryAttempts"] = retries
                return response
            if transient.code in THROTTLING_CODES:
                throttled = throttled or self._throttled_retry(operation, request)
                throttled.wait(transient.code)  # raises Throttled once the give-up time has passed
                continue
            failures += 1
            if failures >= self._spec.max_attempts:
                raise transient
            time.sleep(backoff_seconds(failures))

    def _throttled_retry(self, operation: str, request: dict[str, Any]) -> ThrottledRetry:
        table = request.get("TableName") or next(iter(request.get("RequestItems", {})), "?")
        resource = f"{self._spec.label} table {table!r}"
        action = _ACTIONS.get(operation, operation)
        return ThrottledRetry(action, resource, self._spec.label, self._spec.throttling_give_up_seconds)

    def _attempt(
        self, operation: str, route: "_Route", body: bytes, context: dict[str, Any], client_errors: bool = False,
        parse: Callable[[bytes], dict[str, Any]] = parse_without_collector,
    ) -> tuple[dict[str, Any] | None, errors.MigratorError | None]:  # fmt: skip
        """(parsed response, None), or (None, the transient error of this attempt); terminal errors raise,
        translated, or as botocore's `ClientError` with `client_errors`."""
        prepared = self._signed(operation, route, body, context)
        try:
            response = self._http.send(prepared)
        except (BotocoreConnectionError, HTTPClientError) as exc:  # refused, reset, dropped, timed out
            return None, errors.EndpointUnreachable(operation, prepared.url, f"the connection failed: {exc}")
        if response.status_code == 200:
            return parse(response.content), None
        error = _client_error(operation, response)
        code = error.response["Error"]["Code"]
        if code in RETRYABLE_CODES or response.status_code >= 500:
            return None, errors.TransientAwsError(operation, prepared.url, f"{code}: retries exhausted", code)
        if client_errors:
            raise error
        raise translate_error(error, f"{operation} on", prepared.url)

    def prepare(self, operation: str, request: dict[str, Any]) -> AWSPreparedRequest:
        """The signed HTTP request this client sends for `operation` (the routing tests compare it with boto3's)."""
        body = json.dumps(request, separators=(",", ":")).encode("utf-8")
        route = self._route(operation, request)
        return self._signed(operation, route, body, dict(route.context))

    def _signed(self, operation: str, route: "_Route", body: bytes, context: dict[str, Any]) -> AWSPreparedRequest:
        """The request, signed by the boto3 client's own signer with the context botocore resolved.

        Before signing, the spec's request hooks run as botocore runs them on its own requests:
        for Alternator they point the request at a live node and may gzip its body."""
        request = AWSRequest(method="POST", url=route.url, data=body, headers=dict(route.headers))
        request.context = context
        self._hooks.emit(f"request-created.{self._event_service}.{operation}", request=request, operation_name=operation)
        with translated(f"signing {operation} for", request.url):  # no credentials found, a role not assumed
            self._signer.sign(operation, request)
        # A plain dict of headers: what the HTTP session reads of them, without botocore's slower header types.
        headers = dict(request.headers.items())
        sent = request.data  # the body the hooks left: gzipped when Alternator compression is on
        headers["Content-Length"] = str(len(sent))
        return AWSPreparedRequest("POST", request.url, headers, sent, stream_output=False)

    def _route(self, operation: str, request: dict[str, Any]) -> "_Route":
        """Where `operation` on the request's table goes: resolved by botocore once per operation and table
        (a stream's shard iterator names no table: once per operation)."""
        tables = (request["TableName"],) if "TableName" in request else tuple(request.get("RequestItems", ()))
        key = (operation, tables)
        with self._routes_lock:  # held while resolving: one hook on the shared client at a time
            route = self._routes.get(key)
            if route is None:
                with translated(f"resolving the endpoint of {operation} for", self._spec.where):
                    route = self._routes[key] = _resolve_route(self._boto, operation, tables)
        return route


@dataclass(frozen=True)
class _Route:
    """What botocore decided for one operation on one table: the URL, its extra headers, the signing context."""

    url: str
    headers: tuple[tuple[str, str], ...]
    context: dict[str, Any]


class _Built(Exception):
    """Raised from botocore's before-sign hook: the request is built, and is not sent."""


# Headers that belong to one request, not to the route: the signature and its date, the body's
# length (botocore's per-call `amz-sdk-*` retry headers are left out too).
_PER_REQUEST_HEADERS = {"authorization", "x-amz-date", "x-amz-security-token", "content-length"}


def _resolve_route(boto_client: Any, operation: str, tables: tuple[str, ...]) -> _Route:
    """Let the boto3 client build `operation` on `tables` as its own call would, and keep where it goes.

    botocore runs its whole resolution (endpoint rules with the region, partition, FIPS, dual-stack,
    AWS_ENDPOINT_URL*, account ID; the signing context) while building the request, then signs it:
    the hook stops it there, on this thread only (the client is shared), so nothing is sent.
    """
    builder, built = threading.get_ident(), []

    def stop_before_signing(request: AWSRequest, **_: Any) -> None:
        if threading.get_ident() == builder and not built:  # once: a stale copy of the hook stays inert
            built.append(request)
            raise _Built()

    event = f"before-sign.{boto_client.meta.service_model.service_id.hyphenize()}.{operation}"
    hook_id = f"migrator-wire-route-{builder}"
    boto_client.meta.events.register_first(event, stop_before_signing, unique_id=hook_id)
    try:
        getattr(boto_client, xform_name(operation))(**_smallest_request(operation, tables))
    except _Built:
        pass
    finally:
        boto_client.meta.events.unregister(event, unique_id=hook_id)
    if not built:
        raise errors.AwsRequestFailed(f"resolving {operation} for", ", ".join(tables), "botocore never signed the request")
    (request,) = built
    headers = tuple(
        (name, value if isinstance(value, str) else value.decode())
        for name, value in request.headers.items()
        if name.lower() not in _PER_REQUEST_HEADERS and not name.lower().startswith("amz-sdk-")
    )
    return _Route(url=request.url, headers=headers, context=aws.route_context(request.context))


def _smallest_request(operation: str, tables: tuple[str, ...]) -> dict[str, Any]:
    """A valid request of `operation` naming `tables`: the parameters the endpoint rules may read."""
    if operation == "BatchWriteItem":
        return {"RequestItems": {table: [{"PutRequest": {"Item": {}}}] for table in tables}}
    if operation == "GetRecords":
        return {"ShardIterator": "route"}
    request: dict[str, Any] = {"TableName": tables[0]}
    if operation == "GetItem":
        request["Key"] = {}
    return request


def _client_error(operation: str, response: AWSResponse) -> ClientError:
    """The error DynamoDB's JSON protocol describes, as the botocore error the mapping knows."""
    try:
        document = json.loads(response.content or b"{}")
    except ValueError:
        document = {}
    code = str(document.get("__type", "")).rpartition("#")[2] or str(response.status_code)
    message = document.get("message") or document.get("Message") or ""
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": response.status_code}},
        operation,
    )
