"""The policies of docs/iam/ are IAM policy documents docs/iam.md links, and requests map to the IAM
actions AWS authorizes them by (the integration test, tests/integration/test_iam_policy.py, compares
the two for every mode)."""

from __future__ import annotations

import re

import pytest

from testsupport.iam import POLICIES, action_of, granted, policy

NAMES = sorted(path.stem for path in POLICIES.glob("*.json"))
ARN = re.compile(r"^(\*|arn:aws:(dynamodb|kinesis|s3):(REGION)?:(ACCOUNT)?:[A-Za-z_/*.:-]+)$")


@pytest.mark.parametrize("name", NAMES)
def test_each_policy_is_an_iam_document_of_allow_statements_on_placeholder_arns(name):
    document = policy(name)
    assert document["Version"] == "2012-10-17"
    for statement in document["Statement"]:
        assert re.fullmatch(r"[A-Za-z0-9]+", statement["Sid"]), statement  # IAM allows only these in a Sid
        assert statement["Effect"] == "Allow"
        assert all(re.fullmatch(r"(dynamodb|kinesis|s3):[A-Za-z]+", a) for a in statement["Action"]), statement
        resources = statement["Resource"]
        assert all(ARN.match(r) for r in ([resources] if isinstance(resources, str) else resources)), statement


def test_docs_iam_md_links_every_policy():
    text = (POLICIES.parent / "iam.md").read_text(encoding="utf-8")
    assert {name for name in NAMES if f"(iam/{name}.json)" not in text} == set()


def test_statements_named_only_or_checked_by_aws_are_the_conditional_ones():
    always, conditional = granted(policy("table-target"), policy("kinesis-source"))
    assert "dynamodb:BatchWriteItem" in always and "dynamodb:CreateTable" in conditional
    assert {"kinesis:PutRecords", "dynamodb:EnableKinesisStreamingDestination"} <= conditional


@pytest.mark.parametrize(
    "method, path, target, action",
    [
        ("POST", "/", "DynamoDB_20120810.Scan", "dynamodb:Scan"),
        ("POST", "/", "DynamoDBStreams_20120810.GetRecords", "dynamodb:GetRecords"),
        ("POST", "/", "Kinesis_20131202.GetRecords", "kinesis:GetRecords"),
        ("GET", "/bucket/a/b.json.gz", None, "s3:GetObject"),
        ("HEAD", "/bucket/a/b", None, "s3:GetObject"),
        ("PUT", "/bucket/a/b", None, "s3:PutObject"),
        ("PUT", "/bucket/a/b?partNumber=1&uploadId=x", None, "s3:PutObject"),
        ("POST", "/bucket/a/b?uploads", None, "s3:PutObject"),
        ("DELETE", "/bucket/a/b?uploadId=x", None, "s3:AbortMultipartUpload"),
        ("DELETE", "/bucket/a/b", None, "s3:DeleteObject"),
        ("POST", "/bucket?delete", None, "s3:DeleteObject"),
        ("GET", "/bucket?list-type=2&prefix=a%2F", None, "s3:ListBucket"),
    ],
)
def test_requests_map_to_the_iam_action_aws_checks(method, path, target, action):
    assert action_of(method, path, target) == action


@pytest.mark.parametrize(
    "method, path, target",
    [
        ("POST", "/", "Other_2020.Call"),
        ("POST", "/", None),  # STS and other Query-protocol calls: no IAM namespace mapped here
        ("GET", "/bucket?location", None),
        ("PUT", "/bucket", None),
    ],
)
def test_an_unknown_request_fails_naming_it(method, path, target):
    with pytest.raises(AssertionError, match=re.escape(target or path)):
        action_of(method, path, target)
