"""The Spark session, built only after every check has passed."""

from __future__ import annotations

from pyspark.sql import SparkSession

# Spark's default redaction pattern plus our credential key names, set before the session
# starts so nothing in the UI, event logs or `spark.conf` shows a credential.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|credential|sessionToken"


def create_session(app_name: str, master: str | None = None) -> SparkSession:
    """The session `spark-submit` configured (master, resources), with our defaults added.

    `master` is for tests and notebooks; under spark-submit, leave it to `--master`.
    """
    builder = (
        SparkSession.builder.appName(app_name)
        .config("spark.redaction.regex", REDACTION_REGEX)
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master:
        builder = builder.master(master)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
