"""How a block reaches its service: endpoint, region, credentials (or a role to assume), pool settings.

Every source and target block, and savepoints kept in S3, extend `ConnectedBlock`, whose
`client_spec` is the picklable `migrator.connection.ClientSpec` executors build clients from.
Credentials are `Secret`s from the moment they are read, so no message or log can print them.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BeforeValidator, Field, model_validator

from migrator.config.base import ConfigModel
from migrator.connection import AlternatorNodes, ClientSpec
from migrator.redact import REDACTED, Secret

# Paths under these schemes are reached through boto3 with a block's region, endpoint and credentials.
S3_SCHEMES = ("s3", "s3a")


def check_s3_path(path: str, credentials_key: str) -> None:
    """An s3:// path names a bucket and holds no credentials; raises ValueError (the config's message) otherwise.
    `credentials_key` is where credentials go instead (target.credentials, ...)."""
    refuse_credentials_in(path, credentials_key)
    if not path.partition("://")[2].partition("/")[0]:
        raise ValueError(f"{path!r} names no bucket: write s3://bucket/prefix")


def refuse_credentials_in(path: str, credentials_key: str, hint: str = "") -> None:
    """A URI whose authority holds user:secret@ is refused without repeating it (it holds a secret)."""
    if "@" in path.partition("://")[2].partition("/")[0]:
        raise ValueError(f"the path holds credentials (user:secret@host): put them in {credentials_key}{hint}")


def with_addressing_style(spec: ClientSpec, use_path_style_access: bool | None) -> ClientSpec:
    """usePathStyleAccess as S3's addressing style; unset, botocore's: path-style on custom endpoints, virtual on AWS."""
    if use_path_style_access is None:
        return spec
    return replace(spec, s3_addressing_style="path" if use_path_style_access else "virtual")


def _to_secret(value: Any) -> Any:
    if value is None or isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if value == REDACTED:
        raise ValueError(
            "is '<redacted>': this file is a savepoint, whose credentials are removed; "
            "put the credentials back or delete the key to use the default AWS credential chain"
        )
    return Secret(value)


SecretValue = Annotated[Secret, BeforeValidator(_to_secret)]


class Endpoint(ConfigModel):
    host: str = Field(min_length=1)
    port: int | None = Field(default=None, ge=1, le=65535)

    @property
    def url(self) -> str:
        """`host` may be bare or carry a scheme; bare hosts get https:// like AWS SDKs do."""
        base = self.host.rstrip("/")
        if "://" not in base:
            base = f"https://{base}"
        return f"{base}:{self.port}" if self.port else base


class AssumeRole(ConfigModel):
    arn: str = Field(pattern=r"^arn:[a-z-]+:iam::\d{12}:role/.+$")
    session_name: str = "dynamodb-migrator"
    # STS's limits: ExternalId 2-1224 characters of [\w+=,.@:/-], DurationSeconds 900 to 43,200
    # (and no more than the role's MaxSessionDuration, which STS checks).
    external_id: str | None = Field(default=None, min_length=2, max_length=1224, pattern=r"^[\w+=,.@:\/-]+$")
    duration_seconds: int | None = Field(default=None, ge=900, le=43200)


class Credentials(ConfigModel):
    access_key: SecretValue | None = None
    secret_key: SecretValue | None = None
    session_token: SecretValue | None = None
    assume_role: AssumeRole | None = None

    @model_validator(mode="after")
    def _keys_come_in_pairs(self) -> "Credentials":
        if (self.access_key is None) != (self.secret_key is None):
            raise ValueError("accessKey and secretKey must be given together")
        if self.session_token is not None and self.access_key is None:
            raise ValueError("sessionToken needs accessKey and secretKey")
        return self


class AlternatorOptions(ConfigModel):
    """ScyllaDB Migrator's Alternator connection settings that change something here.

    The node discovery settings reach ScyllaDB's `alternator-client` library (see
    `migrator.alternator_routing`); the others are dropped with a warning before validation
    (see COMPAT_ONLY_KEYS).
    """

    max_connections: int | None = Field(default=None, ge=1)
    connection_timeout_ms: int | None = Field(default=None, ge=1)
    datacenter: str | None = Field(default=None, min_length=1)
    rack: str | None = Field(default=None, min_length=1)
    active_refresh_interval_ms: int = Field(default=1000, ge=1)
    idle_refresh_interval_ms: int = Field(default=60000, ge=1)
    compression: bool = False
    # (new) false sends every request to the endpoint: for a load balancer or NAT in front of the
    # nodes, whose own addresses (what /localnodes lists) the workers cannot reach.
    load_balancing: bool = True

    @model_validator(mode="after")
    def _rack_needs_datacenter(self) -> "AlternatorOptions":
        if self.rack and not self.datacenter:
            raise ValueError("rack needs datacenter: a rack is named within its datacenter")
        return self

    def nodes(self, endpoint_url: str) -> AlternatorNodes | None:
        """How requests spread over the nodes of the cluster `endpoint_url` reaches, or None when off."""
        if not self.load_balancing:
            return None
        url = urlsplit(endpoint_url)
        return AlternatorNodes(
            seed_host=url.hostname or "",
            port=url.port or (443 if url.scheme == "https" else 80),
            scheme=url.scheme,
            datacenter=self.datacenter,
            rack=self.rack,
            active_refresh_interval_ms=self.active_refresh_interval_ms,
            idle_refresh_interval_ms=self.idle_refresh_interval_ms,
            compression=self.compression,
        )


class ConnectedBlock(ConfigModel):
    """Endpoint, region and credentials: shared by every source and target block."""

    region: str | None = None
    endpoint: Endpoint | None = None
    credentials: Credentials | None = None

    @model_validator(mode="after")
    def _assume_role_needs_region(self):
        if self.credentials and self.credentials.assume_role and not self.region:
            raise ValueError("region is required with credentials.assumeRole")
        return self

    def client_spec(self, label: str) -> ClientSpec:
        """The picklable connection description executors build clients from."""
        creds = self.credentials or Credentials()
        region = self.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region is None and self.endpoint is not None:
            region = "us-east-1"  # custom endpoints ignore the region, but botocore needs one
        return ClientSpec(
            label=label,
            endpoint_url=self.endpoint.url if self.endpoint else None,
            region=region,
            access_key=creds.access_key,
            secret_key=creds.secret_key,
            session_token=creds.session_token,
            role_arn=creds.assume_role.arn if creds.assume_role else None,
            role_session_name=(
                creds.assume_role.session_name if creds.assume_role else "dynamodb-migrator"
            ),
            role_external_id=creds.assume_role.external_id if creds.assume_role else None,
            role_duration_seconds=creds.assume_role.duration_seconds if creds.assume_role else None,
        )
