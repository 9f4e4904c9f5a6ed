"""What it takes to reach one AWS-compatible endpoint, as a small picklable value.

Executors receive a `ClientSpec` inside each task and build their own boto3 clients from
it (see `migrator.aws`), so the spec holds only plain values and `Secret`s: nothing that
needs pydantic or boto3 to unpickle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from migrator.redact import Secret

# Long by default: throttling slows a migration down; only a table nobody can write for an
# hour stops it.
DEFAULT_THROTTLING_GIVE_UP_SECONDS = 3600.0


@dataclass(frozen=True)
class AlternatorNodes:
    """How requests spread over an Alternator cluster's nodes (see `migrator.alternator_routing`).

    The endpoint's host is the seed asked for the live nodes (`/localnodes`); every node
    answers on the endpoint's scheme and port.
    """

    seed_host: str
    port: int
    scheme: str = "http"
    datacenter: str | None = None
    rack: str | None = None
    active_refresh_interval_ms: int = 1000  # the node list's refresh while requests flow
    idle_refresh_interval_ms: int = 60000  # and while none do
    compression: bool = False  # gzip request bodies (ScyllaDB 2026.1 and later accept them)


@dataclass(frozen=True)
class ClientSpec:
    """Endpoint, region and credentials for one side (source or target) of a migration."""

    label: str  # "source" or "target": used in error messages
    endpoint_url: str | None = None
    region: str | None = None
    access_key: Secret | None = None
    secret_key: Secret | None = None
    session_token: Secret | None = None
    role_arn: str | None = None
    role_session_name: str = "dynamodb-migrator"
    role_external_id: str | None = None  # the role's trust policy may ask for one (not a secret, says AWS)
    role_duration_seconds: int | None = None  # None: the role's default (one hour); refreshed before it ends
    max_pool_connections: int = 32
    connect_timeout_seconds: float = 10.0
    read_timeout_seconds: float = 60.0
    # Adaptive retries: attempts per call, including the first (botocore's max_attempts).
    max_attempts: int = 10
    # DynamoDB data plane: how long a throttled request may go without progress before the job
    # gives up (throttlingGiveUpMinutes; see migrator.throttling).
    throttling_give_up_seconds: float = DEFAULT_THROTTLING_GIVE_UP_SECONDS
    # S3 only: "path" or "virtual" (source.usePathStyleAccess); None leaves botocore's choice.
    s3_addressing_style: str | None = None
    # Alternator only: spread requests over the cluster's live nodes; None sends them all to the endpoint.
    alternator_nodes: AlternatorNodes | None = None

    @property
    def where(self) -> str:
        """Human-readable location of the endpoint, for messages."""
        return self.endpoint_url or f"AWS region {self.region or '(default)'}"

    def for_control_plane(self) -> "ClientSpec":
        """A variant for the driver's start-up checks: fail fast on an unreachable endpoint."""
        return replace(self, max_attempts=3, connect_timeout_seconds=5.0, read_timeout_seconds=30.0)
