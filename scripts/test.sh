#!/usr/bin/env bash
# Set up (see setup.sh) and run the whole test suite: unit tests, then integration tests
# against the embedded emulator (or LocalStack when AWS_ENDPOINT_URL is set) and a local
# Spark. Extra arguments go to pytest, e.g. `scripts/test.sh tests/unit -k config`.
#
#   TEST_WORKERS=3      pytest-xdist workers, each with its own emulator and Spark session
#                       (0 runs in this process, e.g. for `-s` or a debugger)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
# spark-submit finds pyspark through the `python` on PATH.
export PATH="$PWD/$VENV/bin:$PATH"
export PYSPARK_PYTHON="$PWD/$VENV/bin/python"
# Every JVM the run starts (Spark sessions, spark-submit, local-cluster executors) goes through a
# counting `java`: JAVA_HOME points at a shim that notes the start and execs the real one.
real_java="$(command -v java)"
[[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]] && real_java="$JAVA_HOME/bin/java"
counted="$(mktemp -d)"
trap 'rm -rf "$counted"' EXIT
mkdir -p "$counted/bin"
cat >"$counted/bin/java" <<SHIM
#!/usr/bin/env bash
case " \$* " in *" org.apache.spark.launcher.Main "*) echo launcher >>"$counted/starts" ;; *) echo jvm >>"$counted/starts" ;; esac
exec "$real_java" "\$@"
SHIM
chmod +x "$counted/bin/java"
export JAVA_HOME="$counted"
# Three workers on two cores: many tests wait (a throttled minute, a job being killed), and a third
# worker fills that time. worksteal: an idle worker takes queued tests from the busy one, so a few long tests at the end
# do not leave a core idle. The slowest durations are printed for whoever next speeds the suite up.
status=0
"$VENV/bin/python" -m pytest -n "${TEST_WORKERS:-3}" --dist worksteal --durations=30 "$@" || status=$?
touch "$counted/starts"
echo "test: the run started $(grep -cx jvm "$counted/starts") JVMs (and $(grep -cx launcher "$counted/starts") short ones of Spark's launcher)"
exit "$status"
