"""What ScyllaDB Migrator's alternator options become in alternator-client's configuration."""

from __future__ import annotations

from alternator import ClusterScope, CompressionAlgorithm, DatacenterScope, RackScope

from migrator import aws
from migrator.alternator_routing import PER_REQUEST_CONTEXT_KEYS, _library_config
from migrator.connection import AlternatorNodes

SEED = AlternatorNodes(seed_host="10.0.0.1", port=8000)


def test_the_options_reach_the_library():
    nodes = AlternatorNodes(
        seed_host="10.0.0.1", port=8043, scheme="https", datacenter="dc1", rack="r2",
        active_refresh_interval_ms=250, idle_refresh_interval_ms=9000, compression=True,
    )  # fmt: skip

    config = _library_config(nodes, connect_timeout_seconds=3.0)

    assert (config.seed_hosts, config.port, config.scheme) == (("10.0.0.1",), 8043, "https")
    assert config.routing_scope == RackScope("dc1", "r2")
    assert (config.node_list_polling.active_interval_ms, config.node_list_polling.idle_interval_ms) == (250, 9000)
    assert config.request_compression.algorithm == CompressionAlgorithm.GZIP
    assert config.timeouts.discovery_seconds == 3.0


def test_without_a_rack_the_datacenter_and_without_either_the_seeds_datacenter():
    in_dc2 = AlternatorNodes("10.0.0.1", 8000, datacenter="dc2")

    assert _library_config(in_dc2, 5.0).routing_scope == DatacenterScope("dc2")
    assert _library_config(SEED, 5.0).routing_scope == ClusterScope()
    assert _library_config(SEED, 5.0).request_compression.algorithm == CompressionAlgorithm.NONE


def test_a_route_keeps_no_requests_node_plan():
    (plan_key,) = PER_REQUEST_CONTEXT_KEYS
    context = {"signing": {"region": "us-east-1"}, plan_key: iter(["http://10.0.0.2:8000"])}

    assert aws.route_context(context) == {"signing": {"region": "us-east-1"}}
