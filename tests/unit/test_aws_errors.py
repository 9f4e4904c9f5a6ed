"""translate_error: botocore's exceptions become migrator errors that say what failed and whether to retry."""

from __future__ import annotations

import pickle

import botocore.exceptions as bx
import pytest

from migrator import errors
from migrator.aws import translate_error, translated

ACTION = "DescribeTable"
RESOURCE = "table orders at http://localhost:8000"


def client_error(code: str, message: str = "details from the service", status: int = 400) -> bx.ClientError:
    response = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": "REQ1"},
    }
    return bx.ClientError(response, ACTION)


def assert_names_action_and_resource(error: errors.MigratorError) -> None:
    assert f"{ACTION} {RESOURCE}: " in str(error)


CLIENT_ERROR_CASES = [
    # credentials the endpoint rejects
    ("UnrecognizedClientException", 400, errors.InvalidCredentials, ["rejected the credentials"]),
    ("InvalidClientTokenId", 403, errors.InvalidCredentials, ["rejected the credentials"]),
    ("InvalidSignatureException", 400, errors.InvalidCredentials, ["rejected the credentials"]),
    ("SignatureDoesNotMatch", 403, errors.InvalidCredentials, ["rejected the credentials"]),
    ("ExpiredTokenException", 400, errors.InvalidCredentials, ["rejected the credentials"]),
    ("ExpiredToken", 400, errors.InvalidCredentials, ["rejected the credentials"]),
    ("MissingAuthenticationToken", 403, errors.InvalidCredentials, ["rejected the credentials"]),
    ("IncompleteSignature", 400, errors.InvalidCredentials, ["rejected the credentials"]),
    # missing permissions
    ("AccessDeniedException", 400, errors.AccessDenied, ["access denied", "details from the service",
                                                         "grant the permission"]),
    ("AccessDenied", 403, errors.AccessDenied, ["access denied"]),
    ("UnauthorizedOperation", 403, errors.AccessDenied, ["access denied"]),
    # missing resources
    ("ResourceNotFoundException", 400, errors.ResourceNotFound, ["not found"]),
    ("TableNotFoundException", 400, errors.ResourceNotFound, ["not found"]),
    ("NoSuchBucket", 404, errors.ResourceNotFound, ["not found"]),
    ("NoSuchKey", 404, errors.ResourceNotFound, ["not found"]),
    # transient: throttling and server errors
    ("ProvisionedThroughputExceededException", 400, errors.TransientAwsError, ["retries exhausted"]),
    ("ThrottlingException", 400, errors.TransientAwsError, ["retries exhausted"]),
    ("Throttling", 400, errors.TransientAwsError, ["retries exhausted"]),
    ("RequestLimitExceeded", 400, errors.TransientAwsError, ["retries exhausted"]),
    ("LimitExceededException", 400, errors.TransientAwsError, ["retries exhausted"]),
    ("InternalServerError", 500, errors.TransientAwsError, ["retries exhausted"]),
    ("InternalFailure", 500, errors.TransientAwsError, ["retries exhausted"]),
    ("ServiceUnavailable", 503, errors.TransientAwsError, ["retries exhausted"]),
    ("ServiceUnavailableException", 503, errors.TransientAwsError, ["retries exhausted"]),
    ("TransactionInProgressException", 400, errors.TransientAwsError, ["retries exhausted"]),
    ("SomethingNew", 502, errors.TransientAwsError, ["SomethingNew", "retries exhausted"]),  # any 5xx
    # anything else is a rejection a retry will not fix
    ("ValidationException", 400, errors.AwsRequestFailed, ["ValidationException: details from the service"]),
    ("ConditionalCheckFailedException", 400, errors.AwsRequestFailed, ["ConditionalCheckFailedException"]),
    ("ItemCollectionSizeLimitExceededException", 400, errors.AwsRequestFailed, []),
]


@pytest.mark.parametrize(("code", "status", "expected", "parts"), CLIENT_ERROR_CASES,
                         ids=[c[0] for c in CLIENT_ERROR_CASES])
def test_client_error_codes(code, status, expected, parts):
    error = translate_error(client_error(code, status=status), ACTION, RESOURCE)

    assert type(error) is expected
    assert error.retryable is (expected is errors.TransientAwsError)
    assert error.code == code
    assert error.action == ACTION and error.resource == RESOURCE
    assert_names_action_and_resource(error)
    assert code in str(error)
    for part in parts:
        assert part in str(error)


def test_client_error_without_message_uses_the_code():
    error = translate_error(client_error("ValidationException", message=""), ACTION, RESOURCE)
    assert str(error) == f"{ACTION} {RESOURCE}: ValidationException: ValidationException"


def test_client_error_without_code_but_5xx_is_transient():
    response = {"Error": {}, "ResponseMetadata": {"HTTPStatusCode": 503}}
    error = translate_error(bx.ClientError(response, ACTION), ACTION, RESOURCE)

    assert type(error) is errors.TransientAwsError
    assert error.retryable
    assert "503" in str(error)


def test_endpoint_connection_error_is_retryable_and_names_the_endpoint():
    exc = bx.EndpointConnectionError(endpoint_url="http://localhost:8000/")

    error = translate_error(exc, ACTION, RESOURCE)

    assert type(error) is errors.EndpointUnreachable
    assert error.retryable
    assert_names_action_and_resource(error)
    assert "cannot connect to http://localhost:8000/" in str(error)
    assert "check the endpoint and network" in str(error)


def test_connect_timeout_is_endpoint_unreachable():
    error = translate_error(bx.ConnectTimeoutError(endpoint_url="https://dynamodb.eu-west-1.amazonaws.com"),
                            ACTION, RESOURCE)

    assert type(error) is errors.EndpointUnreachable
    assert error.retryable
    assert "https://dynamodb.eu-west-1.amazonaws.com" in str(error)


@pytest.mark.parametrize(
    "exc",
    [
        bx.ReadTimeoutError(endpoint_url="http://localhost:8000"),
        bx.ConnectionClosedError(endpoint_url="http://localhost:8000"),
        bx.HTTPClientError(error="connection reset by peer"),
    ],
    ids=["read-timeout", "connection-closed", "http-client"],
)
def test_broken_connections_are_endpoint_unreachable(exc):
    error = translate_error(exc, ACTION, RESOURCE)

    assert type(error) is errors.EndpointUnreachable
    assert error.retryable
    assert_names_action_and_resource(error)
    assert "the connection failed" in str(error)


def test_no_credentials_is_invalid_credentials_with_the_fix():
    error = translate_error(bx.NoCredentialsError(), ACTION, RESOURCE)

    assert type(error) is errors.InvalidCredentials
    assert not error.retryable
    assert_names_action_and_resource(error)
    assert "no AWS credentials found" in str(error)
    assert "credentials.accessKey/secretKey" in str(error)


def test_no_region_is_a_config_error_naming_the_region_key():
    error = translate_error(bx.NoRegionError(), ACTION, RESOURCE)

    assert type(error) is errors.ConfigError
    assert not error.retryable
    assert error.key_path == "region"
    assert f"{ACTION} {RESOURCE}" in str(error)
    assert "AWS_REGION" in str(error)


def test_other_botocore_errors_are_request_failures():
    exc = bx.ParamValidationError(report="Invalid length for parameter TableName")

    error = translate_error(exc, ACTION, RESOURCE)

    assert type(error) is errors.AwsRequestFailed
    assert not error.retryable
    assert_names_action_and_resource(error)
    assert "ParamValidationError" in str(error)
    assert "Invalid length for parameter TableName" in str(error)


@pytest.mark.parametrize(
    "exc",
    [client_error("ThrottlingException"), client_error("AccessDeniedException"),
     bx.EndpointConnectionError(endpoint_url="http://localhost:8000"), bx.NoCredentialsError()],
    ids=["throttled", "denied", "unreachable", "no-credentials"],
)
def test_translated_errors_pickle_intact(exc):
    error = translate_error(exc, ACTION, RESOURCE)

    copy = pickle.loads(pickle.dumps(error))

    assert (type(copy), str(copy), copy.retryable, copy.code) == (type(error), str(error), error.retryable, error.code)


def test_translated_context_raises_the_translation_from_the_cause():
    cause = client_error("ResourceNotFoundException")
    with pytest.raises(errors.ResourceNotFound) as caught:
        with translated(ACTION, RESOURCE):
            raise cause

    assert caught.value.__cause__ is cause
    assert_names_action_and_resource(caught.value)


def test_translated_context_leaves_other_exceptions_alone():
    with pytest.raises(KeyError):
        with translated(ACTION, RESOURCE):
            raise KeyError("not botocore")
