"""Run moto's AWS emulator over HTTP (foreground or as a subprocess), so tests, the demo and benchmarks hit a real endpoint the way Spark executors do.

Command line (runs in the foreground until SIGTERM/SIGINT, then exits 0):

    python scripts/emulator.py --port 4566 [--host 127.0.0.1] [--auth]
    python -m testsupport.emulator --port 4566     # the same, from the checkout's root

From Python (with the checkout's root on ``sys.path``):

    from testsupport.emulator import EmulatorProcess, create_admin_keys
    with EmulatorProcess(auth=True) as emu:
        key_id, secret = create_admin_keys(emu.endpoint_url)

Extensions: a module named in ``EXTENSIONS`` (a module of ``testsupport``)
must define ``install() -> None``; ``install_extensions()`` calls each one in
the server process after moto is configured and before the server accepts
requests, so it may patch moto's backends or responses.
"""

from __future__ import annotations

import argparse
import http.client
import importlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout: testsupport's parent
READY_LINE = re.compile(r"^emulator ready on (http://\S+)$", re.MULTILINE)
HEALTH_PATH = "/moto-api/config"  # cheap, side-effect free, never counted as an AWS action
LISTEN_BACKLOG = 1024  # werkzeug's default of 128 drops connects under executor bursts

# Extension modules installed (in this order) before the server starts.
# Each is a documented module in testsupport/; the table lock comes last so it encloses the others.
EXTENSIONS: tuple[str, ...] = tuple(
    f"testsupport.{name}"
    for name in (
        "moto_kinesis_destination", "moto_kinesis_resharding", "moto_kinesis_retention", "moto_stream_reenable",
        "moto_stream_binary_keys", "moto_scan_binary_segments", "moto_scan_pages", "moto_dynamodb_plain_json",
        "moto_table_lock",
    )
)

# --auth lets exactly this many AWS actions through unauthenticated: the
# three IAM calls made by create_admin_keys(). Everything after is checked.
AUTH_BOOTSTRAP_ACTIONS = 3
ADMIN_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
}


# --------------------------------------------------------------------------
# Server side (runs inside the emulator process)
# --------------------------------------------------------------------------


def configure_moto(auth: bool) -> None:
    """Set moto's environment switches; must run before moto is imported."""
    # Accept any region name (e.g. "local"), not only real AWS regions.
    os.environ["MOTO_ALLOW_NONEXISTENT_REGION"] = "true"
    # moto reads this once, at import time.
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = (
        str(AUTH_BOOTSTRAP_ACTIONS) if auth else "inf"
    )


def install_extensions(names: tuple[str, ...] = EXTENSIONS) -> None:
    """Import each extension module and call its ``install()``."""
    for name in names:
        importlib.import_module(name).install()


def build_server(host: str, port: int):
    """Create (bind and listen) moto's threaded WSGI server; port 0 picks a free one."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import ThreadedWSGIServer

    class EmulatorServer(ThreadedWSGIServer):
        request_queue_size = LISTEN_BACKLOG

    app = DomainDispatcherApplication(create_backend_app)
    return EmulatorServer(host, port, app, handler=MotoRequestHandler)


def serve(host: str, port: int, auth: bool, log_requests: bool = False) -> None:
    """Serve until SIGTERM or SIGINT, printing the ready line once requests are answered."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())

    configure_moto(auth)
    install_extensions()
    if not log_requests:
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = build_server(host, port)
    url = f"http://{host}:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, name="emulator", daemon=True)
    thread.start()
    wait_until_answering(url, timeout=30.0)
    print(f"emulator ready on {url}", flush=True)

    while not stop.wait(1.0):  # a timed wait keeps signal delivery prompt
        pass
    server.shutdown()
    server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--auth", action="store_true", help="enforce IAM credentials")
    parser.add_argument("--log-requests", action="store_true")
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.auth, args.log_requests)
    return 0


# --------------------------------------------------------------------------
# Client side (used by tests, the demo and benchmarks)
# --------------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def is_answering(endpoint_url: str, timeout: float = 1.0) -> bool:
    """True if the emulator at endpoint_url answers an HTTP request (any status)."""
    url = urllib.parse.urlsplit(endpoint_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    try:
        conn.request("GET", HEALTH_PATH)
        conn.getresponse().read()
        return True
    except OSError:
        return False
    finally:
        conn.close()


def wait_until_answering(endpoint_url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not is_answering(endpoint_url):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{endpoint_url} did not answer within {timeout}s")
        time.sleep(0.05)


class EmulatorProcess:
    """``python -m testsupport.emulator`` running as a subprocess; a context manager."""

    def __init__(
        self,
        port: int | None = None,
        auth: bool = False,
        host: str = "127.0.0.1",
        startup_timeout: float = 30.0,
    ):
        self.port = port
        self.auth = auth
        self.host = host
        self.startup_timeout = startup_timeout
        self.endpoint_url: str | None = None
        self._proc: subprocess.Popen | None = None
        self._stdout = None
        self._stderr = None

    def __enter__(self) -> EmulatorProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> EmulatorProcess:
        """Launch the subprocess and block until it answers HTTP."""
        # Port 0 lets the server bind a free port itself (no race); it
        # reports the real one in its ready line.
        cmd = [sys.executable, "-m", "testsupport.emulator", "--host", self.host, "--port", str(self.port or 0)]
        if self.auth:
            cmd.append("--auth")
        # The checkout's root first on the path, from whatever directory the caller runs in.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        # Files, not pipes: a full pipe would block the server.
        self._stdout = tempfile.TemporaryFile()
        self._stderr = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._stdout, stderr=self._stderr, env=env
        )
        try:
            self.endpoint_url = self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> str:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise RuntimeError(
                    f"emulator exited with code {code} before it was ready;"
                    f" stderr tail:\n{self.stderr_tail()}"
                )
            match = READY_LINE.search(_read(self._stdout, tail=False))
            if match and is_answering(match.group(1)):
                return match.group(1)
            time.sleep(0.05)
        raise TimeoutError(
            f"emulator not answering after {self.startup_timeout}s;"
            f" stderr tail:\n{self.stderr_tail()}"
        )

    def stderr_tail(self, lines: int = 30) -> str:
        if self._stderr is None:
            return ""
        return "\n".join(_read(self._stderr, tail=True).splitlines()[-lines:])

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The subprocess's exit code once it has exited, else None."""
        return None if self._proc is None else self._proc.poll()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the subprocess and wait; SIGKILL it if it does not exit in time."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in (self._stdout, self._stderr):
            if log is not None:
                log.close()
        self._stdout = self._stderr = None


def _read(log, tail: bool, size: int = 64 * 1024) -> str:
    """The first (or last) bytes written to a log file, without moving its offset."""
    start = max(0, os.fstat(log.fileno()).st_size - size) if tail else 0
    return os.pread(log.fileno(), size, start).decode(errors="replace")


def create_admin_keys(endpoint_url: str, user_name: str = "admin") -> tuple[str, str]:
    """Create an IAM user with an access key and an allow-all policy; returns (key id, secret).

    In ``--auth`` mode this must be the first thing to talk to the emulator:
    it spends the AUTH_BOOTSTRAP_ACTIONS unauthenticated actions.
    """
    import boto3
    from botocore.config import Config

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="bootstrap",
        aws_secret_access_key="bootstrap",
        config=Config(retries={"total_max_attempts": 1}),  # a retry would spend an action
    )
    iam.create_user(UserName=user_name)
    key = iam.create_access_key(UserName=user_name)["AccessKey"]
    iam.put_user_policy(
        UserName=user_name, PolicyName="admin", PolicyDocument=json.dumps(ADMIN_POLICY)
    )
    return key["AccessKeyId"], key["SecretAccessKey"]


if __name__ == "__main__":
    sys.exit(main())
