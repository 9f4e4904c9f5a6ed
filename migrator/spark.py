"""The Spark session, built only after every check has passed."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from pyspark import SparkContext
from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

# Spark's default redaction pattern plus our credential key names in every spelling
# (accessKey, access.key, access_key), set before the session starts so nothing in the UI,
# event logs or `spark.conf` shows a credential.
REDACTION_REGEX = r"(?i)secret|password|token|access[._-]?key|credential"

# For a driver that runs the whole job (local[*]): the JVM only schedules and relays while
# Python workers do the data work, so its CPU is mostly a fixed start-up cost.
# - -XX:TieredStopAtLevel=1 -XX:+UseSerialGC: its C2 JIT compiler and parallel GC threads cost
#   more CPU than they save on such a driver.
# - -XX:-BytecodeVerificationRemote: start-up loads ~12,000 classes from pyspark's own jars, and
#   the JVM verifies the bytecode of each (it trusts only its own modules). The jars are the
#   installed pyspark's, so verifying them again at every launch buys nothing. The flag is
#   diagnostic since JDK 13, hence the unlock, and unlike -Xverify:none it prints no deprecation
#   warning. A class with invalid bytecode would then fail when run rather than when loaded:
#   local mode only, where the classpath is the user's own installation.
# What each option saves, and the options tried and not kept: docs/benchmarks.md, "Driver JVM options".
# They must be given at launch:
#   spark-submit --driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
#     -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote" ...
# `create_session` adds them itself when it is the one starting the JVM (plain `python`).
LOCAL_DRIVER_JAVA_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote"
)


# Spark's WARN lines that say nothing to the user of a migration, shown only when asked for
# (--log-level DEBUG, or a log4j configuration of their own): a cancelled job group that had
# no running job (every stop of the replication's query), and the first micro-batch taking
# longer than the trigger interval (the migrator reports its own lag). Both classes' names,
# as Spark 4.0 and 4.1+ place the streaming executor.
QUIET_LOGGERS = (
    "org.apache.spark.scheduler.DAGScheduler",
    "org.apache.spark.sql.execution.streaming.ProcessingTimeExecutor",
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor",
)


def create_session(app_name: str, master: str | None = None, quiet: bool = True) -> SparkSession:
    """The session `spark-submit` configured (master, resources), with our defaults added.

    `master` is for tests and notebooks; under spark-submit, leave it to `--master`. Spark's
    log level is set to WARN (and `QUIET_LOGGERS` to ERROR when `quiet`) unless the user gave
    log4j a configuration of their own, which is then left as they wrote it.
    """
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.redaction.regex", REDACTION_REGEX)
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master:
        builder = builder.master(master)
    if _launches_a_local_jvm(master):
        builder = builder.config("spark.driver.extraJavaOptions", LOCAL_DRIVER_JAVA_OPTIONS)
    session = builder.getOrCreate()
    if not _has_own_log4j_configuration(session):
        session.sparkContext.setLogLevel("WARN")
        if quiet:
            _quiet(session, QUIET_LOGGERS)
    return session


def _has_own_log4j_configuration(spark: SparkSession) -> bool:
    """Whether the JVM was started with -Dlog4j2.configurationFile (or log4j's older property)."""
    system = spark.sparkContext._jvm.java.lang.System
    return any(system.getProperty(name) for name in ("log4j2.configurationFile", "log4j.configurationFile"))


def _quiet(spark: SparkSession, loggers: tuple[str, ...]) -> None:
    jvm = spark.sparkContext._jvm
    for name in loggers:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.ERROR)


class Silencer:
    """Turns log4j and Python loggers off when asked, from any thread; leaving its `with` block
    gives them back their levels (a log4j logger that had no level of its own gets none again, so
    it goes on following its parent's, as `setLogLevel` sets it)."""

    def __init__(self, spark: SparkSession, jvm_loggers: tuple[str, ...], python_loggers: tuple[str, ...]):
        self._log4j = spark.sparkContext._jvm.org.apache.logging.log4j
        self._jvm_loggers, self._python_loggers = jvm_loggers, python_loggers
        self._saved: tuple[dict[str, Any], dict[str, int]] | None = None  # a JVM logger's own level, or None
        self._lock = threading.Lock()

    def silence(self) -> None:
        with self._lock:
            if self._saved is not None:
                return
            own = self._log4j.LogManager.getContext(False).getConfiguration().getLoggers()
            self._saved = (
                {name: own.get(name).getLevel() if own.containsKey(name) else None for name in self._jvm_loggers},
                {name: logging.getLogger(name).level for name in self._python_loggers},
            )
            for name in self._jvm_loggers:
                self._log4j.core.config.Configurator.setLevel(name, self._log4j.Level.OFF)
            for name in self._python_loggers:
                logging.getLogger(name).setLevel(logging.CRITICAL + 1)

    def __enter__(self) -> "Silencer":
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            if self._saved is None:
                return
            jvm_levels, python_levels = self._saved
            context = self._log4j.LogManager.getContext(False)
            for name, level in jvm_levels.items():
                if level is None:
                    context.getConfiguration().removeLogger(name)
                else:
                    self._log4j.core.config.Configurator.setLevel(name, level)
            context.updateLoggers()
            for name, level in python_levels.items():
                logging.getLogger(name).setLevel(level)
            self._saved = None


def running_tasks(spark: SparkSession) -> int:
    """Tasks running on every executor (the driver's, in local mode), as the task scheduler counts
    them: a task counts from its launch until its executor reports its end, which it does after
    the task's completion listeners have run. (Spark's status store, which the UI reads, is
    written at most every 100 ms and misses tasks that start between two writes.)"""
    by_executor = spark.sparkContext._jsc.sc().taskScheduler().runningTasksByExecutors().valuesIterator()
    count = 0
    while by_executor.hasNext():
        count += by_executor.next()
    return count


def wait_for_running_tasks(spark: SparkSession, timeout_seconds: float) -> bool:
    """Wait until no task runs, so that what a killed task logs is logged before this returns;
    False on timeout."""
    deadline = time.monotonic() + timeout_seconds
    while running_tasks(spark):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _launches_a_local_jvm(master: str | None) -> bool:
    """Whether getOrCreate will start a local-mode JVM here (not under spark-submit, which
    started the JVM already and exports its gateway port, nor in a running session)."""
    starting = SparkContext._active_spark_context is None and "PYSPARK_GATEWAY_PORT" not in os.environ
    return starting and (master is None or master.startswith("local"))


def leave_ctrl_c_to_the_driver(spark: SparkSession) -> None:
    """Make the JVM ignore SIGINT, so Ctrl+C stops the job through the Python driver.

    Under spark-submit the JVM is the Python driver's parent and gets Ctrl+C too: its
    shutdown hooks would stop Spark under the running work, and it could exit before the
    driver's last lines ("interrupted: rerun to resume", the replication summary) are
    relayed. The driver then decides: it stops cleanly and exits with its own code, which
    spark-submit passes on. (Launched from plain Python, PySpark already starts it this way.)
    """
    jvm = spark.sparkContext._jvm
    jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("INT"), jvm.sun.misc.SignalHandler.SIG_IGN)


def forward_sigterm_to_the_driver(spark: SparkSession | None = None) -> None:
    """Make the JVM hand SIGTERM to the Python driver instead of shutting down.

    Schedulers send SIGTERM to the process they started: under spark-submit that is the JVM
    (spark-submit execs it), whose default is to run its shutdown hooks and stop Spark under
    the running work, before the Python driver, its child, hears anything. Here the JVM's
    handler calls back into this process (py4j's callback server) and delivers SIGTERM to the
    main thread, as if it had been sent here: the driver stops as on Ctrl+C and exits with its
    own code, which spark-submit passes on (`migrator.stopping`).

    Without a session: under spark-submit, the JVM already runs while the driver checks the
    tables, so it is told at once; launched from plain Python there is no JVM yet (call again
    with the session).
    """
    if spark is not None:
        gateway = spark.sparkContext._gateway
    elif "PYSPARK_GATEWAY_PORT" in os.environ:  # spark-submit's JVM, reached before any session
        SparkContext._ensure_initialized()
        gateway = SparkContext._gateway
    else:
        return
    ensure_callback_server_started(gateway)
    jvm = gateway.jvm
    jvm.sun.misc.Signal.handle(jvm.sun.misc.Signal("TERM"), _SigtermToMainThread())


class _SigtermToMainThread:
    """A `sun.misc.SignalHandler` implemented in Python; runs in a py4j callback thread."""

    def handle(self, _signal) -> None:
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)

    class Java:
        implements = ["sun.misc.SignalHandler"]


def submitted_setting(key: str) -> str | None:
    """A Spark setting spark-submit was given (--conf, spark-defaults.conf), read without starting a SparkContext.

    spark-submit's JVM runs before the Python driver and holds its settings as system
    properties; plain Python has no JVM yet, and no setting (None).
    """
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, as forward_sigterm_to_the_driver does
    return SparkContext._gateway.jvm.System.getProperty(key)
