#!/usr/bin/env bash
# Set up (see setup.sh) and run the whole test suite: unit tests, then integration tests
# against the embedded emulator (or LocalStack when AWS_ENDPOINT_URL is set) and a local
# Spark. Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit -k config`.
#
#   TEST_WORKERS=2      pytest-xdist workers, each with its own emulator and Spark session
#                       (0 runs in this process, e.g. for `-s` or a debugger)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# spark-submit finds pyspark through the `python` on PATH.
export PATH="$PWD/$VENV/bin:$PATH"
export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
# worksteal: an idle worker takes queued tests from the busy one, so a few long tests at the end
# do not leave a core idle. The slowest durations are printed for whoever next speeds the suite up.
exec "$VENV/bin/python" -m pytest -n "${TEST_WORKERS:-2}" --dist worksteal --durations=30 "$@"
