"""The snapshot's progress bar on a terminal (a table copy, an S3 export imported or written), drawn on the
driver by tqdm in place of the progress lines.

Drawn only when someone watches a terminal and logs are text (`--log-format json` is for log
shippers): the driver's stdout is a terminal, or, under spark-submit, whose JVM relays the Python
driver's output through a pipe, the JVM's console is. Elsewhere (a pipe, a file, a notebook)
progress stays a log line every few seconds. Log lines printed while the bar is drawn go above it
(tqdm's logging redirect), so neither garbles the other.
"""

from __future__ import annotations

import shutil
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

if TYPE_CHECKING:  # progress imports this module
    from migrator.snapshot.progress import ProgressScale


def watched_on_a_terminal(spark: SparkSession) -> bool:
    """Does the driver's output reach a terminal: its own stdout, or (spark-submit) the JVM's console?"""
    if sys.stdout.isatty():
        return True
    try:
        console = spark.sparkContext._jvm.System.console()
        if console is None:  # JDK 17 to 21: no console unless stdin and stdout are terminals
            return False
        try:
            return bool(console.isTerminal())  # JDK 22 and later always have a console; it says
        except Py4JError:
            return True
    except Py4JError:  # the JVM is going away: no bar
        return False


class ProgressBar:
    """Items copied out of the copy's expected items, units done; the rate and ETA are this run's.

    The bar starts at the items the units done before this run hold, so tqdm's ETA, the items
    left at this run's average rate, is right on a resume too.
    """

    def __init__(self, bar: tqdm, items_before: int, unit: str):
        self._bar = bar
        self._items_before = items_before
        self._unit = unit

    def update(self, items_this_run: int, units_done: int, units_total: int) -> None:
        self._bar.update(self._items_before + items_this_run - self._bar.n)
        self._bar.set_postfix_str(f"{units_done}/{units_total} {self._unit}")


@contextmanager
def progress_bar(scale: ProgressScale) -> Iterator[ProgressBar]:
    """Draw the bar on stdout until the block ends, log lines above it."""
    items_before = round(scale.items_before)
    with logging_redirect_tqdm(), tqdm(
        total=scale.expected_items, initial=items_before, desc=scale.name, unit=f" {scale.counts}", unit_scale=True,
        smoothing=0, file=sys.stdout, ncols=shutil.get_terminal_size().columns, mininterval=0.5,
    ) as bar:  # fmt: skip
        yield ProgressBar(bar, items_before, scale.unit)
