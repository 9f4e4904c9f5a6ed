"""Scan and BatchWriteItem as raw DynamoDB JSON: the snapshot's data plane, without (de)serialization.

botocore turns every response into Python objects shape by shape and every request back,
validating each parameter: about 0.3 CPU-seconds per thousand items copied, several times
what the copy itself costs. A snapshot only moves items from one table to another, so
here the JSON DynamoDB sends is parsed by the C `json` module and sent back as it came:
numbers stay the service's strings and binary stays its base64 text, which is as exact
as a copy can be. Requests are signed with botocore's SigV4 (credentials, session tokens
and assumed roles come from `aws.credentials`); failures are classified by the same
error mapping as every other call (`aws.translate_error`).

Responses look like boto3's where the migrator reads them: `Items`, `LastEvaluatedKey`,
`UnprocessedItems`, `ConsumedCapacity`, and `ResponseMetadata.RetryAttempts`.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.exceptions import ClientError

from migrator import errors
from migrator.aws import credentials, translate_error
from migrator.connection import ClientSpec
from migrator.throttling import THROTTLING_CODES, ThrottledRetry, backoff_seconds

_clients: dict[ClientSpec, "WireClient"] = {}
_clients_lock = threading.Lock()

TARGET_PREFIX = "DynamoDB_20120810."
# Error codes worth another attempt: throttling (retried until the side's give-up time passes
# without progress, see migrator.throttling) and the service's own transient failures (retried
# `max_attempts` times in all).
RETRYABLE_CODES = THROTTLING_CODES | {"InternalServerError", "ServiceUnavailable", "LimitExceededException"}
# What each operation does, for messages: "scanning source table 'orders'".
_ACTIONS = {"Scan": "scanning", "BatchWriteItem": "writing to", "GetItem": "reading from"}


def wire_client(spec: ClientSpec) -> "WireClient":
    """A cached client per process and spec, so tasks on one Python worker share its pool."""
    with _clients_lock:
        cached = _clients.get(spec)
        if cached is None:
            cached = _clients[spec] = WireClient(spec)
        return cached


class WireClient:
    """`scan`, `batch_write_item` and `get_item` (keyword requests as boto3's) over HTTP, signed, retried."""

    def __init__(self, spec: ClientSpec):
        self._spec = spec
        self._credentials = credentials(spec)
        self._region = spec.region or "us-east-1"
        self._url = spec.endpoint_url or f"https://dynamodb.{self._region}.amazonaws.com"
        self._http = urllib3.PoolManager(
            maxsize=spec.max_pool_connections,
            timeout=urllib3.Timeout(connect=spec.connect_timeout_seconds, read=spec.read_timeout_seconds),
            retries=False,
        )

    def scan(self, **request: Any) -> dict[str, Any]:
        return self._call("Scan", request)

    def batch_write_item(self, **request: Any) -> dict[str, Any]:
        return self._call("BatchWriteItem", request)

    def get_item(self, **request: Any) -> dict[str, Any]:
        return self._call("GetItem", request)

    def _call(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(request, separators=(",", ":")).encode("utf-8")
        failures = 0  # transient failures other than throttling
        throttled: ThrottledRetry | None = None
        while True:
            response, transient = self._attempt(operation, body)
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

    def _attempt(self, operation: str, body: bytes) -> tuple[dict[str, Any] | None, errors.MigratorError | None]:
        """(parsed response, None), or (None, the transient error of this attempt); terminal errors raise."""
        headers = self._signed_headers(operation, body)
        try:
            response = self._http.urlopen("POST", self._url, body=body, headers=headers, redirect=False)
        except urllib3.exceptions.HTTPError as exc:  # refused, reset, dropped, timed out
            return None, errors.EndpointUnreachable(operation, self._url, f"the connection failed: {exc}")
        if response.status == 200:
            return json.loads(response.data), None
        error = _client_error(operation, response)
        code = error.response["Error"]["Code"]
        if code in RETRYABLE_CODES or response.status >= 500:
            return None, errors.TransientAwsError(operation, self._url, f"{code}: retries exhausted", code)
        raise translate_error(error, f"{operation} on", self._url)

    def _signed_headers(self, operation: str, body: bytes) -> dict[str, str]:
        request = AWSRequest(
            method="POST",
            url=self._url,
            data=body,
            headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": TARGET_PREFIX + operation},
        )
        SigV4Auth(self._credentials.get_frozen_credentials(), "dynamodb", self._region).add_auth(request)
        return dict(request.headers.items())


def _client_error(operation: str, response: urllib3.BaseHTTPResponse) -> ClientError:
    """The error DynamoDB's JSON protocol describes, as the botocore error the mapping knows."""
    try:
        document = json.loads(response.data or b"{}")
    except ValueError:
        document = {}
    code = str(document.get("__type", "")).rpartition("#")[2] or str(response.status)
    message = document.get("message") or document.get("Message") or ""
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": response.status}},
        operation,
    )
