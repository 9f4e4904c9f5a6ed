"""The one place that builds boto3 clients and the one place botocore errors become ours.

Clients are cached per process and per `ClientSpec`, so the tasks an executor's Python
worker runs reuse one connection pool. The lean data plane (`migrator.wire`) sends through the
same client: its endpoint, signer and HTTP session, so every request of a spec goes where
boto3 sends it. Retries use botocore's adaptive mode (exponential
back-off with jitter plus client-side rate limiting after throttling); the number of
retries a call needed is read from its response, so summaries can count them.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlsplit

import boto3
import botocore.exceptions as bx
from botocore.config import Config
from botocore.credentials import RefreshableCredentials
from botocore.hooks import BaseEventHooks, HierarchicalEmitter
from botocore.session import get_session

from migrator import alternator_routing, errors
from migrator.connection import AlternatorNodes, ClientSpec

F = TypeVar("F", bound=Callable[..., Any])

_clients: dict[tuple[ClientSpec, str], Any] = {}
_request_hooks: dict[ClientSpec, BaseEventHooks] = {}
_node_managers: dict[ClientSpec, Any] = {}
_clients_lock = threading.Lock()

# Error codes, grouped by what the user or a retry loop can do about them.
_CREDENTIAL_CODES = {
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "ExpiredTokenException",
    "ExpiredToken",
    "MissingAuthenticationToken",
    "IncompleteSignature",
    "InvalidAccessKeyId",  # S3's code for an access key it does not know
}
_DENIED_CODES = {"AccessDeniedException", "AccessDenied", "UnauthorizedOperation"}
_TRANSIENT_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "Throttling",
    "RequestLimitExceeded",
    "LimitExceededException",
    "InternalServerError",
    "InternalFailure",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "TransactionInProgressException",
}
_NOT_FOUND_CODES = {"ResourceNotFoundException", "TableNotFoundException", "NoSuchBucket", "NoSuchKey"}


def client(spec: ClientSpec, service: str = "dynamodb") -> Any:
    """A cached boto3 client for `service` at the endpoint `spec` describes."""
    key = (spec, service)
    with _clients_lock:
        cached = _clients.get(key)
        if cached is None:
            cached = _clients[key] = _build_client(spec, service)
        elif spec.alternator_nodes and service == "dynamodb":
            _node_manager(spec, spec.alternator_nodes)  # resumes a discovery paused since the last task or run
        return cached


def request_hooks(spec: ClientSpec) -> BaseEventHooks:
    """The `request-created` handlers of `spec`'s DynamoDB requests, for requests built outside
    botocore (`migrator.wire`): for Alternator, the choice of a live node and compression; none otherwise."""
    with _clients_lock:
        hooks = _request_hooks.get(spec)
        if hooks is None:
            hooks = _request_hooks[spec] = HierarchicalEmitter()
            nodes = spec.alternator_nodes
            if nodes:
                alternator_routing.route_requests(hooks, _node_manager(spec, nodes), nodes)
        elif spec.alternator_nodes:
            _node_manager(spec, spec.alternator_nodes)  # resumes a discovery paused since the last task or run
        return hooks


def route_context(context: dict[str, Any]) -> dict[str, Any]:
    """A built request's context without what belongs to that request alone (its node plan)."""
    return {key: value for key, value in context.items() if key not in alternator_routing.PER_REQUEST_CONTEXT_KEYS}


def _build_client(spec: ClientSpec, service: str) -> Any:
    session = _session(spec)
    built = session.client(service, endpoint_url=spec.endpoint_url, config=_botocore_config(spec))
    if spec.alternator_nodes and service == "dynamodb":
        nodes = spec.alternator_nodes
        alternator_routing.route_requests(built.meta.events, _node_manager(spec, nodes), nodes)
    return built


def _node_manager(spec: ClientSpec, nodes: AlternatorNodes) -> Any:
    """One node discovery per process and spec, shared by its boto3 client and its raw requests,
    refreshing its node list in the background (called with `_clients_lock` held)."""
    manager = _node_managers.get(spec)
    if manager is None:
        timeout = spec.connect_timeout_seconds
        manager = _node_managers[spec] = alternator_routing.start_discovery(nodes, timeout, spec.label)
    else:
        manager.start()  # when paused: asks for the live nodes at once, then on its schedule again
    return manager


def pause_node_discovery() -> None:
    """Stop refreshing every Alternator node list until a client of its spec is asked for again.

    Called at the end of each executor task and of each run: a Python worker outlives its tasks and
    a notebook's process its runs, and a refresh left running would poll the cluster (or whatever
    later listens at its address) for as long as the process lives.
    """
    with _clients_lock:  # held: a client asked for meanwhile must find its discovery running afterwards
        for manager in _node_managers.values():
            manager.stop()


def pauses_node_discovery(run: F) -> F:
    """`run`, then every Alternator node discovery paused, however it ends: for the entry point
    of a run, whose process may go on (a notebook, a test session)."""

    @functools.wraps(run)
    def run_then_pause(*args: Any, **kwargs: Any) -> Any:
        try:
            return run(*args, **kwargs)
        finally:
            pause_node_discovery()

    return run_then_pause  # type: ignore[return-value]


def _botocore_config(spec: ClientSpec) -> Config:
    return Config(
        region_name=spec.region,
        retries={"mode": "adaptive", "max_attempts": spec.max_attempts},
        max_pool_connections=spec.max_pool_connections,
        connect_timeout=spec.connect_timeout_seconds,
        read_timeout=spec.read_timeout_seconds,
        tcp_keepalive=True,
        user_agent_extra="dynamodb-migrator",
        s3={"addressing_style": spec.s3_addressing_style} if spec.s3_addressing_style else None,
    )


def object_store_options(spec: ClientSpec) -> dict[str, str]:
    """S3 settings for a library with its own S3 client (the Delta writer, delta-rs): the endpoint,
    region, addressing style and credentials boto3 resolves for `spec` (an assumed role's included).

    Holds secrets: pass it to the library only, never log it. Credentials the chain resolves on
    this machine are passed as they are now; a role's last for its session (an hour by default).
    """
    s3 = client(spec, "s3")
    options = {"AWS_REGION": s3.meta.region_name or "us-east-1"}
    endpoint = s3.meta.endpoint_url or ""
    if endpoint and not (urlsplit(endpoint).hostname or "").endswith(_AWS_DOMAINS):
        options["AWS_ENDPOINT_URL"] = endpoint  # a custom endpoint (config or AWS_ENDPOINT_URL*): as boto3 sends
        options["AWS_ALLOW_HTTP"] = "true" if endpoint.startswith("http://") else "false"
        options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "true" if spec.s3_addressing_style == "virtual" else "false"
    credentials = _session(spec).get_credentials()
    if credentials is not None:
        frozen = credentials.get_frozen_credentials()
        options["AWS_ACCESS_KEY_ID"] = frozen.access_key
        options["AWS_SECRET_ACCESS_KEY"] = frozen.secret_key
        if frozen.token:
            options["AWS_SESSION_TOKEN"] = frozen.token
    return options


_AWS_DOMAINS = (".amazonaws.com", ".amazonaws.com.cn")


def private_trust_of(spec: ClientSpec, service: str = "s3") -> str | None:
    """The CA bundle boto3 would trust `spec`'s custom HTTPS endpoint with (AWS_CA_BUNDLE, or ca_bundle in the
    AWS config file); None when it needs none: no bundle, plain HTTP, or an AWS endpoint (publicly trusted)."""
    endpoint = client(spec, service).meta.endpoint_url or ""
    host = urlsplit(endpoint).hostname or ""
    if not endpoint.startswith("https://") or host.endswith(_AWS_DOMAINS):
        return None
    return _session(spec)._session.get_config_variable("ca_bundle")


def _session(spec: ClientSpec) -> boto3.session.Session:
    """Explicit keys, else the default credential chain; then assume the role if asked."""
    base = boto3.session.Session(
        aws_access_key_id=spec.access_key.reveal() if spec.access_key else None,
        aws_secret_access_key=spec.secret_key.reveal() if spec.secret_key else None,
        aws_session_token=spec.session_token.reveal() if spec.session_token else None,
        region_name=spec.region,
    )
    if not spec.role_arn:
        return base
    sts = sts_client(spec, base)

    def fetch() -> dict[str, str]:
        creds = sts.assume_role(**assume_role_request(spec))["Credentials"]
        return {
            "access_key": creds["AccessKeyId"],
            "secret_key": creds["SecretAccessKey"],
            "token": creds["SessionToken"],
            "expiry_time": creds["Expiration"].isoformat(),
        }

    # Refreshable, so a replication running for days outlives the role's one-hour session.
    botocore_session = get_session()
    botocore_session._credentials = RefreshableCredentials.create_from_metadata(
        metadata=fetch(), refresh_using=fetch, method="assume-role"
    )
    return boto3.session.Session(botocore_session=botocore_session, region_name=spec.region)


def sts_client(spec: ClientSpec, base: boto3.session.Session) -> Any:
    """STS where boto3 sends it (AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL, else the region's STS):
    never the block's own endpoint, which is DynamoDB's, Alternator's or S3's."""
    return base.client("sts", config=_botocore_config(spec))


def assume_role_request(spec: ClientSpec) -> dict[str, Any]:
    request: dict[str, Any] = {"RoleArn": spec.role_arn, "RoleSessionName": spec.role_session_name}
    if spec.role_external_id is not None:
        request["ExternalId"] = spec.role_external_id
    if spec.role_duration_seconds is not None:
        request["DurationSeconds"] = spec.role_duration_seconds
    return request


def retries_of(response: dict[str, Any]) -> int:
    """How many retries botocore needed for this response (0 when it succeeded at once)."""
    return int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


@contextmanager
def translated(action: str, resource: str) -> Iterator[None]:
    """Run AWS calls, turning botocore's exceptions into migrator errors that say what failed."""
    try:
        yield
    except (bx.BotoCoreError, bx.ClientError) as exc:
        raise translate_error(exc, action, resource) from exc


def translate_error(exc: Exception, action: str, resource: str) -> errors.MigratorError:
    """Map a botocore exception to the migrator error that tells the user what to do."""
    if isinstance(exc, bx.ClientError):
        return _translate_client_error(exc, action, resource)
    if isinstance(exc, (bx.EndpointConnectionError, bx.ConnectTimeoutError)):
        return errors.EndpointUnreachable(
            action, resource, f"cannot connect to {_endpoint_of(exc)}: check the endpoint and network"
        )
    if isinstance(exc, (bx.ConnectionClosedError, bx.ReadTimeoutError, bx.HTTPClientError)):
        return errors.EndpointUnreachable(action, resource, f"the connection failed: {exc}")
    if isinstance(exc, bx.NoCredentialsError):
        return errors.InvalidCredentials(
            action,
            resource,
            "no AWS credentials found: set credentials.accessKey/secretKey in the config, "
            "or configure the default chain (environment, profile, instance role)",
        )
    if isinstance(exc, bx.NoRegionError):
        return errors.ConfigError("region", f"{action} {resource}: no AWS region: set region in the config or AWS_REGION")
    return errors.AwsRequestFailed(action, resource, f"{type(exc).__name__}: {exc}")


def _translate_client_error(exc: bx.ClientError, action: str, resource: str) -> errors.MigratorError:
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", "")) or code
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    # Some emulators answer an unknown key with an XML 403 botocore cannot parse a code from.
    if code in _CREDENTIAL_CODES or (status == 403 and code in ("", "403")):
        return errors.InvalidCredentials(
            action,
            resource,
            f"the endpoint rejected the credentials ({code if code != '403' else 'HTTP 403'}): "
            "check credentials in the config or the default chain",
            code,
        )
    if code in _DENIED_CODES:
        return errors.AccessDenied(action, resource, f"access denied ({code}): {message}; grant the permission to these credentials", code)
    if code in _NOT_FOUND_CODES:
        return errors.ResourceNotFound(action, resource, f"not found ({code})", code)
    if code in _TRANSIENT_CODES or status >= 500:
        return errors.TransientAwsError(action, resource, f"{code or status}: {message}; retries exhausted", code)
    return errors.AwsRequestFailed(action, resource, f"{code}: {message}", code)


def _endpoint_of(exc: Exception) -> str:
    return str(getattr(exc, "kwargs", {}).get("endpoint_url", "the endpoint"))
