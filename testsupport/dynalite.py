"""dynalite, a fast DynamoDB emulator in node, run as a subprocess for the snapshot benchmark.

moto's Scan walks the whole table for every page, so on moto a copy measures moto. dynalite
keeps a table in an in-memory LevelDB and answers a Scan page from where the last one ended,
so the client's own cost shows. It is installed on first use from the npm registry into
`.cache/dynalite` of the checkout (pinned below; about 6 s), started on a free port with its
table-state delays set to 0, and its CPU is read from /proc, so a benchmark can tell the
emulator's cost per item from the client's.

    with DynaliteProcess() as dynalite:
        boto3.client("dynamodb", endpoint_url=dynalite.endpoint_url, ...)
        dynalite.cpu_seconds()
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from testsupport.emulator import free_port, is_answering

ROOT = Path(__file__).resolve().parent.parent
VERSION = "4.0.0"
INSTALL_DIR = ROOT / ".cache" / "dynalite"
TICKS = os.sysconf("SC_CLK_TCK")


def installed_command() -> Path:
    """The dynalite executable, installed with npm first if this checkout has not got it yet."""
    command = INSTALL_DIR / "node_modules" / ".bin" / "dynalite"
    if command.exists():
        return command
    if shutil.which("npm") is None:
        raise RuntimeError("dynalite needs node and npm on PATH (https://nodejs.org)")
    INSTALL_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run(["npm", "install", "--prefix", str(INSTALL_DIR), "--no-audit", "--no-fund", "--silent",
                    f"dynalite@{VERSION}"], check=True)  # fmt: skip
    return command


class DynaliteProcess:
    """dynalite on a free port of 127.0.0.1, in memory; a context manager."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> DynaliteProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 30.0) -> DynaliteProcess:
        command = [str(installed_command()), "--host", "127.0.0.1", "--port", str(self.port),
                   "--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"]  # fmt: skip
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + timeout
        while not is_answering(self.endpoint_url):
            if self._process.poll() is not None:
                raise RuntimeError(f"dynalite exited with code {self._process.returncode} at start-up")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"dynalite did not answer on {self.endpoint_url} within {timeout} s")
            time.sleep(0.05)
        return self

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def cpu_seconds(self) -> float:
        """User + system CPU of the node process so far (proc(5): fields 14 and 15 of /proc/PID/stat)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def stop(self, timeout: float = 10.0) -> None:
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
