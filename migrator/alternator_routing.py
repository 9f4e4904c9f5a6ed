"""Requests spread over an Alternator cluster's live nodes, by ScyllaDB's `alternator-client` library.

The library asks the seed (the endpoint's host) for the live nodes (`GET /localnodes`, with `dc`
and `rack` when the config names them), refreshes that list in a background thread (every
`activeRefreshIntervalMs` while requests flow, `idleRefreshIntervalMs` otherwise), and on each
request's `request-created` botocore event points the request at a node of a random per-request
plan; a retry of the same request moves on to the plan's next node. A node that stops answering
is left out of the next `/localnodes` answer, so it drops out of later plans. With
`compression`, the same event gzips bodies of 1 KB and more.

Its public entry points build their own boto3 client (static keys only, its own retries and
pool); the client factory instead builds the client as for any endpoint (credential chain,
adaptive retries, the pool sized to the workers) and attaches the library's node manager and
request handlers to it: the two steps the library's own `create_client` takes.
"""

from __future__ import annotations

from typing import Any

from alternator import ClusterScope, CompressionAlgorithm, Config, DatacenterScope, RackScope
from alternator.client import _create_manager
from alternator.config import DEFAULT_USER_AGENT, NodeListPollingConfig, RequestCompressionConfig, TimeoutConfig
from alternator.core.handlers import _QUERY_PLAN_ATTR, _register_alternator_handlers
from alternator.core.live_nodes import SyncLiveNodesManager
from botocore.hooks import BaseEventHooks

from migrator import errors
from migrator.connection import AlternatorNodes

USER_AGENT = f"{DEFAULT_USER_AGENT} dynamodb-migrator"
# A request's own place in its node plan: state of one request, never of a route shared by many.
PER_REQUEST_CONTEXT_KEYS = frozenset({_QUERY_PLAN_ATTR})


def start_discovery(nodes: AlternatorNodes, connect_timeout_seconds: float, label: str) -> SyncLiveNodesManager:
    """Ask the seed for the live nodes once (the seed alone if it cannot answer), then keep refreshing.

    A datacenter or rack in which the seed lists no node is a config error: nothing could be sent."""
    manager = _create_manager(_library_config(nodes, connect_timeout_seconds))
    if not manager.nodes:
        manager.stop()
        where = f"datacenter {nodes.datacenter!r}"
        if nodes.rack:
            where = f"rack {nodes.rack!r} of {where}"
        raise errors.ConfigError(
            f"{label}.rack" if nodes.rack else f"{label}.datacenter",
            f"the endpoint lists no live Alternator node in {where} (GET /localnodes): "
            "check the names against `nodetool status`, or remove the key to use the endpoint's datacenter",
        )
    manager.start()
    return manager


def route_requests(events: BaseEventHooks, manager: SyncLiveNodesManager, nodes: AlternatorNodes) -> None:
    """Point every DynamoDB request built with `events` at a live node (and gzip it when asked)."""
    # The library's last before-send handler sets the final User-Agent: its own, naming the migrator too.
    config = _library_config(nodes, 5.0)
    _register_alternator_handlers(events, manager, config, auth_enabled=True, user_agent=USER_AGENT)


def _library_config(nodes: AlternatorNodes, connect_timeout_seconds: float) -> Config:
    return Config(
        seed_hosts=(nodes.seed_host,),
        port=nodes.port,
        scheme="https" if nodes.scheme == "https" else "http",
        routing_scope=_scope(nodes),
        request_compression=RequestCompressionConfig(
            algorithm=CompressionAlgorithm.GZIP if nodes.compression else CompressionAlgorithm.NONE
        ),
        node_list_polling=NodeListPollingConfig(
            active_interval_ms=nodes.active_refresh_interval_ms, idle_interval_ms=nodes.idle_refresh_interval_ms
        ),
        timeouts=TimeoutConfig(discovery_seconds=connect_timeout_seconds),
    )


def _scope(nodes: AlternatorNodes) -> Any:
    """The nodes to use: the rack's, else the datacenter's, else the seed's datacenter's (`/localnodes`)."""
    if nodes.rack and nodes.datacenter:
        return RackScope(nodes.datacenter, nodes.rack)
    if nodes.datacenter:
        return DatacenterScope(nodes.datacenter)
    return ClusterScope()
