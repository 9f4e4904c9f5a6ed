"""Command line: `jobs/migrate.py --config FILE`; one clear line and an exit code on failure.

Exit codes: 0 done (or replication stopped by Ctrl+C or SIGTERM), 1 the migration failed while
running, 2 bad input (config, tables, credentials, endpoints) or a failed start (Spark,
metricsPort, any OSError before Spark runs) found before anything was written, 130 interrupted
by Ctrl+C and 143 by SIGTERM before the snapshot or import finished.
"""

from __future__ import annotations

import argparse
import logging
import sys

from pyspark.errors import PySparkRuntimeError

from migrator import __version__
from migrator.config import load_config
from migrator.errors import MigratorError, StartupFailed, describe_os_error
from migrator.spark import create_session, forward_sigterm_to_the_driver, leave_ctrl_c_to_the_driver
from migrator.stopping import Terminated, exit_code, handle_sigterm_as_ctrl_c

log = logging.getLogger("migrator")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    _configure_logging(args.log_level)
    handle_sigterm_as_ctrl_c()
    spark_started = False  # until then, every check runs before anything is written
    try:
        loaded = load_config(args.config)
        for warning in loaded.warnings:
            log.warning(warning)
        from migrator import run  # imported late: a bad config must not wait for pyspark's import

        forward_sigterm_to_the_driver()  # spark-submit's JVM runs already: SIGTERM during the checks too

        def spark_factory():
            nonlocal spark_started
            session = _start_spark(f"dynamodb-migrator {loaded.config.source.table} → {loaded.config.target.name}")
            spark_started = True
            return session

        summary = run.migrate(loaded, spark_factory)
    except MigratorError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except OSError as exc:  # a local failure no layer translated: still one line, never a traceback
        log.debug("unexpected OSError", exc_info=True)
        return _report_os_error(exc, spark_started)
    except KeyboardInterrupt as stop:
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(
            f"{how}: copied segments are saved in the savepoint; rerun the same command to resume "
            "(an S3 export being written is not resumed: delete its unfinished folder, named above, first)",
            file=sys.stderr,
            flush=True,
        )
        return exit_code(stop)
    print(summary.render(), flush=True)
    return 0


def _report_os_error(exc: OSError, spark_started: bool) -> int:
    """One line for an OSError; exit 2 when it came before Spark started, when nothing was written yet."""
    if not spark_started:
        error = StartupFailed("starting the migration", describe_os_error(exc), "Fix the cause and run again")
        print(f"error: {error}", file=sys.stderr, flush=True)
        return error.exit_code
    print(
        f"error: the migration failed: {describe_os_error(exc)}; fix the cause and rerun the same command to resume",
        file=sys.stderr,
        flush=True,
    )
    return 1


def _start_spark(app_name: str):
    """The Spark session, or StartupFailed when Spark cannot be launched (no Java, no Spark where SPARK_HOME says)."""
    try:
        session = create_session(app_name)
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


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="migrate.py", description="Copy a DynamoDB table to DynamoDB or ScyllaDB Alternator."
    )
    parser.add_argument("--config", required=True, help="YAML configuration file")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--version", action="version", version=f"dynamodb-migrator {__version__}")
    return parser.parse_args(argv)


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # botocore logs retries at DEBUG only; keep third-party chatter out of INFO.
    for noisy in ("botocore", "boto3", "urllib3", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
