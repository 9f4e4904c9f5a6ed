"""A threaded keep-alive HTTP service on a free loopback port: the base of the test servers.

Subclasses (the fault proxy, the scripted stream server, the Alternator nodes) set `handler` to a subclass of
`KeepAliveHandler`, whose `self.server.service` is the running service. `stop()` cuts
open client connections so no handler thread lingers on an idle keep-alive connection.
With `ssl_context` set before `start()` it serves HTTPS (`self_signed_certificate` makes a
certificate for 127.0.0.1 that clients trust only when told to, as with AWS_CA_BUNDLE).
`host` and `port`, set before `start()`, bind another loopback address (127.0.0.2, ...) or a
given port: several services on one port, as the nodes of a cluster answer.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class KeepAliveHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: botocore and urllib3 reuse connections
    timeout = 120  # seconds an idle client connection is kept
    disable_nagle_algorithm = True  # else headers and body as two writes cost ~40 ms
    server: "_Server"

    def setup(self) -> None:
        super().setup()
        self.server.service.track(self.connection, True)

    def finish(self) -> None:
        self.server.service.track(self.connection, False)
        super().finish()

    def log_message(self, format: str, *args) -> None:
        pass  # quiet: tests send thousands of requests


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for client connections
    request_queue_size = 1024
    service: "LoopbackService"

    def handle_error(self, request, client_address) -> None:
        """A client that went away (a job killed with -9) is expected; anything else is printed."""
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class LoopbackService:
    """Serves `handler` on 127.0.0.1 in a background thread; a context manager."""

    handler: type[KeepAliveHandler] = KeepAliveHandler
    thread_name = "loopback"

    def __init__(self) -> None:
        self.endpoint_url: str | None = None
        self.ssl_context: ssl.SSLContext | None = None  # set before start() to serve HTTPS
        self.host = "127.0.0.1"
        self.port = 0  # a free port
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def open_connections(self) -> int:
        """Client connections currently open (kept alive between requests)."""
        with self._connections_lock:
            return len(self._connections)

    def start(self):
        self._server = _Server((self.host, self.port), self.handler)
        self._server.service = self
        scheme = "http"
        if self.ssl_context is not None:  # a failed handshake fails accept(), which the server shrugs off
            self._server.socket = self.ssl_context.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self.endpoint_url = f"{scheme}://{self.host}:{self._server.server_port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},  # how long stop() waits for the loop
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, then cut open client connections so no handler lingers."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its handler
        self._thread.join()

    def track(self, conn: socket.socket, open_: bool) -> None:
        with self._connections_lock:
            (self._connections.add if open_ else self._connections.discard)(conn)


def self_signed_certificate(directory) -> tuple[str, str]:
    """(certificate path, key path) of a fresh self-signed certificate for 127.0.0.1 and localhost."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dynamodb-migrator test endpoint")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = f"{directory}/endpoint-cert.pem", f"{directory}/endpoint-key.pem"
    with open(cert_path, "wb") as out:
        out.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return cert_path, key_path


def server_tls_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """A server-side TLS context serving this certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    return context
