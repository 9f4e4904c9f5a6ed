#!/usr/bin/env bash
# Set up (see setup.sh) and run the demo: the embedded emulator, a seeded 10,000-item table
# with every attribute type, `spark-submit jobs/migrate.py --config conf/demo.yaml`, a check
# that the copy is exact, then the emulator stops.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export PATH="$PWD/$VENV/bin:$PATH"
export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
exec "$VENV/bin/python" scripts/demo.py "$@"
