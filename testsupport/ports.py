"""Loopback ports for tests of bad endpoints: one nothing listens on, one another socket holds."""

from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import Iterator


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def busy_port() -> Iterator[int]:
    """A port another process listens on, on every address (as a second migrator's metrics would)."""
    with socket.socket() as listener:
        listener.bind(("", 0))
        listener.listen()
        yield listener.getsockname()[1]
