"""Command line: `jobs/migrate.py --config FILE [--dry-run]` and `jobs/validate.py --config FILE [--report FILE]`;
one clear line and an exit code on failure.

Exit codes: 0 done (or replication stopped by Ctrl+C or SIGTERM), 1 the migration failed while
running, 2 bad input (config, tables, credentials, endpoints) or a failed start (Spark,
metricsPort, any OSError before Spark runs) found before anything was written, 130 interrupted
by Ctrl+C and 143 by SIGTERM before the snapshot or import finished. The validator: 0 the
tables are equal, 1 differences remain, 2 bad input, 3 the validation could not finish.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.errors import PySparkRuntimeError

from migrator import __version__
from migrator.config import LoadedConfig, parse_config
from migrator.config_text import read_config_text
from migrator.errors import MigratorError, StartupFailed, SummaryUnwritable, describe_os_error
from migrator.spark import create_session, forward_sigterm_to_the_driver, leave_ctrl_c_to_the_driver
from migrator.stopping import Terminated, exit_code, handle_sigterm_as_ctrl_c
from migrator.summary_json import phase_json, problem_writing, write_whole

log = logging.getLogger("migrator")


def main(argv: list[str] | None = None, spark_factory: Callable[[], Any] | None = None) -> int:
    """`jobs/migrate.py`'s command line; its exit code. With `spark_factory`, the job runs in this
    process on the session it returns (a test's or a notebook's), which the caller owns: no Spark
    is started or stopped and no signal handler is installed."""
    args = _parse_args(argv)
    phases: dict[str, Any] = {}  # for --summary-json: what finished, even when a later phase fails

    def migrate(loaded: LoadedConfig, spark_factory) -> tuple[str, int]:
        from migrator import run  # imported late: a bad config must not wait for pyspark's import

        if args.dry_run:  # every check, then the plan: the factory is never called
            from migrator.dry_run import dry_run

            return dry_run(loaded).render(), 0
        result = phases["result"] = run.MigrationResult()
        # A bar only beside text logs: --log-format json is for log shippers.
        return run.migrate(loaded, spark_factory, result=result, progress_bar=args.log_format == "text").render(), 0

    def finished() -> dict[str, Any]:
        result = phases.get("result")
        if result is None:
            return {"stoppedIn": "checks"}
        return {
            "stoppedIn": result.phase,
            "snapshot": phase_json(result.snapshot) if result.snapshot is not None else None,
            "replication": phase_json(result.replication) if result.replication is not None else None,
        }

    return _command(args, MIGRATION, migrate, finished, spark_factory)


def validate_main(argv: list[str] | None = None, spark_factory: Callable[[], Any] | None = None) -> int:
    """`jobs/validate.py --config FILE [--report FILE]`: exit 0 equal, 1 differences remain,
    2 bad input, 3 the validation could not finish, 130/143 interrupted. `spark_factory` as for `main`."""
    args = _parse_args(argv, validating=True)
    phases: dict[str, Any] = {}

    def validate(loaded: LoadedConfig, spark_factory) -> tuple[str, int]:
        from migrator.validate import driver  # imported late, as the migration's run

        summary = phases["validation"] = driver.validate(loaded, spark_factory, args.report)
        return summary.render(), summary.exit_code

    def finished() -> dict[str, Any]:
        summary = phases.get("validation")
        return {"validation": {**summary.report(), "seconds": round(summary.seconds, 3)} if summary else None}

    return _command(args, VALIDATION, validate, finished, spark_factory)


@dataclass(frozen=True)
class _Job:
    """What a command is called in messages and the Spark UI, and what a rerun does."""

    name: str
    on_interrupt: str
    rerun: str
    spark_app: str


MIGRATION = _Job(
    "migration",
    "copied segments are saved in the savepoint; rerun the same command to resume "
    "(an S3 export being written is not resumed: delete its unfinished folder, named above, first)",
    "rerun the same command to resume",
    "dynamodb-migrator",
)
VALIDATION = _Job(
    "validation",
    "nothing was reported; the units it finished are saved in its savepoint: rerun the same command to resume",
    "rerun the same command",
    "dynamodb-migrator validation",
)


def _command(
    args: argparse.Namespace,
    job: _Job,
    work: Callable[[LoadedConfig, Callable], tuple[str, int]],
    finished: Callable[[], dict[str, Any]],
    given_spark: Callable[[], Any] | None = None,
) -> int:
    """Run the command; with --summary-json, write how it ended whatever the ending."""
    started = time.monotonic()
    outcome = _Outcome()
    try:
        if args.summary_json is not None:
            problem = problem_writing(args.summary_json)
            if problem is not None:
                raise SummaryUnwritable(args.summary_json, problem)
        code = _run(args, job, work, outcome, given_spark)
    except MigratorError as exc:  # only the summary path's check: nothing ran
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    if args.summary_json is not None:
        document = {"command": job.name, "exitCode": code, "outcome": outcome.kind, "error": outcome.error,
                    "seconds": round(time.monotonic() - started, 3), **finished()}  # fmt: skip
        try:
            write_whole(args.summary_json, document)
        except OSError as exc:
            print(f"error: {SummaryUnwritable(args.summary_json, describe_os_error(exc))}", file=sys.stderr, flush=True)
            return code or 1
    return code


@dataclass
class _Outcome:
    """How the command ended, in words for --summary-json: done, differences, failed, bad input, interrupted."""

    kind: str = "done"
    error: str | None = None


def _run(args: argparse.Namespace, job: _Job, work: Callable, outcome: _Outcome, given_spark: Callable | None) -> int:
    """Load the config and run `work` with a Spark factory; one line and an exit code on failure."""
    _configure_logging(args.log_level, args.log_format)
    owns_the_process = given_spark is None
    if owns_the_process:
        handle_sigterm_as_ctrl_c()
    spark_started = False  # until then, every check runs before anything is written
    try:
        loaded = parse_config(read_config_text(args.config), args.config)
        for warning in loaded.warnings:
            log.warning(warning)
        if owns_the_process:
            forward_sigterm_to_the_driver()  # spark-submit's JVM runs already: SIGTERM during the checks too

        def spark_factory():
            nonlocal spark_started
            if given_spark is not None:
                session = given_spark()
            else:
                session = _start_spark(f"{job.spark_app} {loaded.config.source.table} → {loaded.config.target.name}")
            spark_started = True
            return session

        output, code = work(loaded, spark_factory)
    except MigratorError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        outcome.kind, outcome.error = ("bad input" if exc.exit_code == 2 else "failed"), str(exc)
        return exc.exit_code
    except OSError as exc:  # a local failure no layer translated: still one line, never a traceback
        log.debug("unexpected OSError", exc_info=True)
        outcome.kind, outcome.error = "failed", describe_os_error(exc)
        return _report_os_error(exc, spark_started, job)
    except KeyboardInterrupt as stop:
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(f"{how}: {job.on_interrupt}", file=sys.stderr, flush=True)
        outcome.kind = "terminated" if isinstance(stop, Terminated) else "interrupted"
        return exit_code(stop)
    print(output, flush=True)
    outcome.kind = "differences" if code == 1 else "done"
    return code


def _report_os_error(exc: OSError, spark_started: bool, job: _Job) -> int:
    """One line for an OSError; exit 2 when it came before Spark started, when nothing was written yet."""
    if not spark_started:
        error = StartupFailed(f"starting the {job.name}", describe_os_error(exc), "Fix the cause and run again")
        print(f"error: {error}", file=sys.stderr, flush=True)
        return error.exit_code
    print(
        f"error: the {job.name} failed: {describe_os_error(exc)}; fix the cause and {job.rerun}",
        file=sys.stderr,
        flush=True,
    )
    return 1


def _start_spark(app_name: str):
    """The Spark session, or StartupFailed when Spark cannot be launched (no Java, no Spark where SPARK_HOME says)."""
    try:
        session = create_session(app_name, quiet=logging.getLogger().getEffectiveLevel() > logging.DEBUG)
    except (OSError, PySparkRuntimeError) as exc:
        cause = describe_os_error(exc) if isinstance(exc, OSError) else str(exc).strip().splitlines()[0][:300].rstrip(".")
        raise StartupFailed(
            "starting Spark",
            cause,
            "Check that SPARK_HOME (when set) is a Spark installation and that Java 17 or later is installed "
            "(java on PATH, or JAVA_HOME); or launch the job with spark-submit",
        ) from None
    leave_ctrl_c_to_the_driver(session)  # Ctrl+C: the driver stops, reports and exits 130
    forward_sigterm_to_the_driver(session)  # SIGTERM to the JVM: the same, exit 143
    return session


def _parse_args(argv: list[str] | None, validating: bool = False) -> argparse.Namespace:
    if validating:
        parser = argparse.ArgumentParser(
            prog="validate.py", description="Compare a migration's target with its source, key by key."
        )
        parser.add_argument("--report", help="write the JSON report to this file")
    else:
        parser = argparse.ArgumentParser(
            prog="migrate.py", description="Copy a DynamoDB table to DynamoDB or ScyllaDB Alternator."
        )
        parser.add_argument(
            "--dry-run", action="store_true",
            help="run every check and print the plan; create, enable and write nothing, start no Spark",
        )  # fmt: skip
    parser.add_argument(
        "--config", required=True, help="YAML configuration file: a local path, s3://bucket/key or any Hadoop URI"
    )
    parser.add_argument(
        "--summary-json", metavar="FILE", help="write how the run ended (exit code, phases, counts) as JSON to FILE"
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--log-format", default="text", choices=["text", "json"], help="json: one JSON object per log line"
    )
    parser.add_argument("--version", action="version", version=f"dynamodb-migrator {__version__}")
    return parser.parse_args(argv)


def _configure_logging(level: str, log_format: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":  # one JSON object per line, for log shippers
        from pythonjsonlogger.json import JsonFormatter  # only this format needs it on the driver

        handler.setFormatter(JsonFormatter("{asctime}{levelname}{name}{message}", style="{",
                                           rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                                           json_ensure_ascii=False))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)  # force: a second run in one process (tests)
    # botocore logs retries at DEBUG only; keep third-party chatter out of INFO (alternator-client
    # logs each refresh of the node list, every second while requests flow).
    for noisy in ("botocore", "boto3", "urllib3", "py4j", "alternator"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
