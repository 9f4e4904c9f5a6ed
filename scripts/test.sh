#!/usr/bin/env bash
# Set up (see setup.sh) and run the whole test suite: unit tests, then integration tests
# against the embedded emulator (or LocalStack when AWS_ENDPOINT_URL is set) and a local
# Spark. Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit -k config`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# spark-submit finds pyspark through the `python` on PATH.
export PATH="$PWD/$VENV/bin:$PATH"
export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
exec "$VENV/bin/python" -m pytest "$@"
