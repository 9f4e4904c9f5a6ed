"""The IAM actions behind a job's requests, and the actions the documented policies grant (docs/iam/).

A request log (`S3AccessLog.requests`: method, path, X-Amz-Target) becomes the set of IAM actions
AWS would authorize for it. JSON-protocol services name the operation in X-Amz-Target, and the IAM
action has the operation's name (DynamoDB Streams' actions are in the `dynamodb` namespace). S3
requests are path-style here (a custom endpoint), mapped as the S3 User Guide's "Actions, resources
and condition keys for Amazon S3" maps each operation: HEAD/GET of an object is s3:GetObject,
listing a bucket (ListObjectsV2, HeadBucket) is s3:ListBucket, a multipart upload's parts and its
completion are s3:PutObject.

A policy statement whose Sid starts with "Only" grants actions that a mode calls only on a path
a run may not take (its Sid says which); one whose Sid starts with "CheckedByAws" grants actions
the job never calls but AWS checks on the caller of another action (DynamoDB's Kinesis streaming
destination: kinesis:PutRecords and DescribeStream); the other statements grant what every run calls.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs, unquote, urlsplit

from testsupport.jobs import REPO

POLICIES = REPO / "docs" / "iam"
# Sid prefixes of statements a run need not call (see the module doc).
CONDITIONAL_SIDS = ("Only", "CheckedByAws")
# X-Amz-Target prefixes (service name and API version) → IAM namespace.
JSON_SERVICES = {"DynamoDB_20120810": "dynamodb", "DynamoDBStreams_20120810": "dynamodb", "Kinesis_20131202": "kinesis"}
# Query parameters of a bucket listing; any other (?location, ?uploads, ...) is another action.
LIST_PARAMETERS = {"list-type", "prefix", "delimiter", "continuation-token", "max-keys", "start-after", "encoding-type"}


def actions_of(requests: list[tuple[str, str, str | None]]) -> set[str]:
    """The IAM actions of logged requests; an unknown request fails the caller's test, naming it."""
    return {action_of(method, path, target) for method, path, target in requests}


def action_of(method: str, path: str, target: str | None) -> str:
    if target:
        prefix, _, operation = target.partition(".")
        if prefix not in JSON_SERVICES:
            raise AssertionError(f"no IAM namespace known for X-Amz-Target {target!r}")
        return f"{JSON_SERVICES[prefix]}:{operation}"
    return _s3_action(method, path)


def _s3_action(method: str, path: str) -> str:
    url = urlsplit(path)
    bucket, _, key = unquote(url.path).lstrip("/").partition("/")
    query = parse_qs(url.query, keep_blank_values=True)
    if not bucket:
        raise AssertionError(f"not an S3 request (no bucket): {method} {path}")
    if key:
        if method in ("GET", "HEAD"):
            return "s3:GetObject"
        if method in ("PUT", "POST"):  # PutObject, UploadPart, Create/CompleteMultipartUpload
            return "s3:PutObject"
        if method == "DELETE":
            return "s3:AbortMultipartUpload" if "uploadId" in query else "s3:DeleteObject"
    elif method == "POST" and "delete" in query:  # DeleteObjects: s3:DeleteObject per key
        return "s3:DeleteObject"
    elif method in ("GET", "HEAD") and not set(query) - LIST_PARAMETERS:  # ListObjectsV2, HeadBucket
        return "s3:ListBucket"
    raise AssertionError(f"no IAM action mapped for S3 request {method} {path}")


def policy(name: str) -> dict:
    """docs/iam/<name>.json: an IAM policy document."""
    return json.loads((POLICIES / f"{name}.json").read_text(encoding="utf-8"))


def granted(*documents: dict) -> tuple[set[str], set[str]]:
    """Of policies attached together: (actions every run calls, actions granted for a path a run may
    not take or AWS checks besides: Sid "Only...", "CheckedByAws...")."""
    always, conditional = set(), set()
    for statement in (s for document in documents for s in document["Statement"]):
        assert statement["Effect"] == "Allow", statement
        actions = statement["Action"]
        actions = {actions} if isinstance(actions, str) else set(actions)
        (conditional if statement.get("Sid", "").startswith(CONDITIONAL_SIDS) else always).update(actions)
    return always, conditional
