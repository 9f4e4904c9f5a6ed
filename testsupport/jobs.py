"""Running the migrator as a test does: config files, in process on a Spark session, as a process or
under spark-submit, and reading what such a process prints and its metrics endpoint serves."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pty
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from pathlib import Path
from typing import Any, Callable

import yaml


REPO = Path(__file__).resolve().parent.parent
LOG4J_CONFIG = REPO / "conf" / "log4j2.properties"  # Spark at WARN, as the README runs it


def write_config(directory: Path, document: dict[str, Any], name: str = "config.yaml") -> Path:
    document.setdefault("savepoints", {"path": str(directory / "savepoints")})
    path = directory / name
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def migrate_on_session(config_path: Path, spark_session):
    """Run a migration through migrate() on the given session, not its command line; returns the snapshot summary."""
    from migrator.config import load_config
    from migrator.run import migrate

    return migrate(load_config(str(config_path)), lambda: spark_session).snapshot


def run_job(
    config_path: Path | str,
    *,
    spark_submit: bool = False,
    process: bool = False,
    master: str = "local[2]",
    env=None,
    timeout=600,
    job: str = "migrate.py",
    args: tuple[str, ...] = (),
    spark_conf: dict[str, str] | None = None,
    env_reaches_only_the_driver: bool = False,
):
    """Run jobs/migrate.py (or another `job`, with `args`) as a user would; returns CompletedProcess.

    By default the whole command line (arguments, config, exit code, what it prints) runs in this
    process on the worker's shared Spark session, through `cli.main`'s `spark_factory`. A test that
    needs a process of its own says so: `spark_submit`, or `process` for `python jobs/<job>`; so
    does one that sets `env`, since Spark's Python workers inherit the environment the session
    started with, not the one a test sets later, unless it is `env_reaches_only_the_driver` (a
    config's ${VARIABLES}, a run refused before Spark starts).
    """
    if not (spark_submit or process or (env and not env_reaches_only_the_driver)):
        return run_in_this_process(config_path, job=job, args=args, env=env)
    _check_marked_e2e()
    if spark_submit:
        command = [str(Path(sys.executable).parent / "spark-submit"), "--master", master]
        command += ["--driver-java-options", f"-Dlog4j2.configurationFile={LOG4J_CONFIG}"]
        for key, value in (spark_conf or {}).items():
            command += ["--conf", f"{key}={value}"]
    else:
        command = [sys.executable]
    command += [str(REPO / "jobs" / job), "--config", str(config_path), *args]
    return subprocess.run(
        command,
        cwd=REPO,
        env=job_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_in_this_process(
    config_path: Path | str, *, job: str = "migrate.py", args: tuple[str, ...] = (), env=None, spark_factory=None
):
    """The command line of jobs/<job> on the shared session; stdout, stderr and the exit code as a process gives them.

    Its stderr also holds what the session's JVM and Python workers printed meanwhile. An exception
    the command lets through is printed as the interpreter would, exit 1, so a test that asserts
    there is no traceback still sees one. Logging and signal handlers are put back. `spark_factory`
    replaces the shared session (a dry run's, which must never call it).
    """
    from migrator import cli
    from testsupport.spark_session import jvm_output, jvm_output_size, shared_session

    entry = {"migrate.py": cli.main, "validate.py": cli.validate_main}[job]
    argv = ["--config", str(config_path), *args]
    stdout, stderr = io.StringIO(), io.StringIO()
    spark_printed_from = jvm_output_size()
    root = logging.getLogger()
    saved_logging = (root.handlers[:], root.level)
    saved_signals = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        with _environment(env or {}), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                code = entry(argv, spark_factory=spark_factory or shared_session)
            except SystemExit as exit_:  # argparse: --version, a bad argument
                code = exit_.code if isinstance(exit_.code, int) else 1
            except Exception:  # noqa: BLE001 - what the interpreter would print, and its exit code
                traceback.print_exc()
                code = 1
    finally:
        root.handlers[:] = saved_logging[0]
        root.setLevel(saved_logging[1])
        for number, handler in saved_signals.items():
            signal.signal(number, handler)
    # Spark's own lines and its Python workers' come after the driver's: they went to another stream.
    printed = stderr.getvalue() + jvm_output(spark_printed_from)
    return subprocess.CompletedProcess(["in-process", job, *argv], code, stdout.getvalue(), printed)


@contextlib.contextmanager
def _environment(extra: dict[str, str]):
    saved = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# Set by tests/conftest.py for each test: whether it is marked e2e, the tests that may start a process.
current_test_is_e2e: bool | None = None


def _check_marked_e2e() -> None:
    """A test that starts a process must say so (README, Testing): an unmarked one is caught here."""
    if current_test_is_e2e is False:
        raise AssertionError("this test starts the job as a process: mark it @pytest.mark.e2e and say why in the "
                             "README's testing section, or run it in process")  # fmt: skip


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(extra or {})
    return env


def assert_one_clear_line(result, texts: list[str]) -> None:
    """Exactly one `error:` line with every text, and no traceback.

    Under spark-submit the Python driver's stderr arrives on the JVM's stdout, so both count.
    """
    output = result.stdout + result.stderr
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, output
    for text in texts:
        assert text in errors[0], f"{text!r} not in {errors[0]!r}"
    assert "Traceback" not in output


def start_job(
    config: Path | str,
    job: str = "migrate.py",
    args: tuple[str, ...] = (),
    log4j_config: Path | None = LOG4J_CONFIG,
    env: dict[str, str] | None = None,
    submit_args: tuple[str, ...] = (),
) -> subprocess.Popen:
    """spark-submit jobs/<job> in its own process group, stdout and stderr merged; with
    `log4j_config` None, Spark's logging is left to the migrator, as a user who passes none;
    `env` is added to the environment; `submit_args` go to spark-submit (a later --master wins)."""
    _check_marked_e2e()
    return subprocess.Popen(
        spark_submit_command(config, job, args, log4j_config, submit_args),
        cwd=REPO,
        env=job_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: signals reach JVM and Python
    )


def spark_submit_command(
    config: Path | str, job: str = "migrate.py", args: tuple[str, ...] = (), log4j_config: Path | None = LOG4J_CONFIG,
    submit_args: tuple[str, ...] = (),
) -> list[str]:
    """spark-submit [submit_args] jobs/<job> --config <config> <args> on local[2] (unless submit_args name a master)."""
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", *submit_args]
    if log4j_config is not None:
        command += ["--driver-java-options", f"-Dlog4j2.configurationFile={log4j_config}"]
    return command + [str(REPO / "jobs" / job), "--config", str(config), *args]


def run_on_a_terminal(config: Path, *args: str) -> str:
    """spark-submit with a pseudo-terminal for stdin, stdout and stderr, as a user at a shell; all it printed."""
    _check_marked_e2e()
    controller, terminal = pty.openpty()
    job = subprocess.Popen(
        spark_submit_command(config, args=args), cwd=REPO, env=job_env(), stdin=terminal, stdout=terminal, stderr=terminal
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: every holder of the terminal has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert job.wait(timeout=60) == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


def wait_for_output(job: subprocess.Popen, text: str, lines: list[str], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = job.stdout.readline()
        if line:
            lines.append(line)
            if text in line:
                return
        elif job.poll() is not None:
            break
    raise AssertionError(f"{text!r} never appeared:\n{''.join(lines[-60:])}")


def scrape(port: int) -> dict[str, float]:
    """The Prometheus text exposition of the running job, as {"name{labels}": value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def scrape_until(
    job: subprocess.Popen, port: int, lines: list[str], wanted: Callable[[dict[str, float]], bool], timeout: float = 120
) -> dict[str, float]:
    """The first scrape of the running job's endpoint that is `wanted`; fails once the job ends or time is up.

    `lines` (filled by `drain`) end the failure's message."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job.poll() is None:
        try:
            metrics = scrape(port)
        except OSError:  # the endpoint is bound once the checks pass: not yet
            metrics = {}
        if metrics and wanted(metrics):
            return metrics
        time.sleep(0.2)
    raise AssertionError("the endpoint never served what the test waits for:\n" + "".join(lines[-40:]))


def drain(job: subprocess.Popen, lines: list[str]) -> threading.Thread:
    reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)
    reader.start()
    return reader
