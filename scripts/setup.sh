#!/usr/bin/env bash
# Prepare a checkout on a fresh machine: a JDK when `java` is missing, and a virtualenv with
# the project and its test dependencies installed from the lock in requirements/ (exact versions
# and hashes). Idempotent: a second run only checks.
#
#   VENV=.venv                  where the virtualenv lives (default: .venv in the checkout)
#   PYSPARK_VERSION=4.0.2       install requirements/lock-pyspark-4.0.2.txt, e.g. to run the suite on
#                               EMR's Spark 4.0.x (uses .venv-pyspark-4.0.2 unless VENV is set)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ -n "${PYSPARK_VERSION:-}" ]]; then
  VENV="${VENV:-.venv-pyspark-${PYSPARK_VERSION}}"
else
  VENV="${VENV:-.venv}"
fi

install_jdk() {
  echo "setup: java not found; installing OpenJDK 17 with the system package manager" >&2
  local sudo=""
  [[ "$(id -u)" == "0" ]] || sudo="sudo"
  if command -v apt-get >/dev/null; then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  elif command -v dnf >/dev/null; then
    $sudo dnf install -y -q java-17-openjdk-headless
  elif command -v yum >/dev/null; then
    $sudo yum install -y -q java-17-openjdk-headless
  elif command -v brew >/dev/null; then
    brew install openjdk@17
  else
    echo "setup: no known package manager; install a Java 17 runtime and rerun" >&2
    exit 1
  fi
}

command -v java >/dev/null || install_jdk

PYTHON="${PYTHON:-python3}"
"$PYTHON" - <<'PY' || { echo "setup: Python 3.10 or newer is required (set PYTHON=...)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 10) else 1)
PY

# The lock pins every package with its hashes (scripts/lock.sh writes it from pyproject.toml), so
# this machine gets exactly what the suite was last run on, not whatever was released since.
LOCK="requirements/$("$PYTHON" -c 'import sys; sys.path.insert(0, "."); from testsupport.locks import lock_name; print(lock_name(sys.argv[1] or None))' "${PYSPARK_VERSION:-}")"
if [[ ! -f "$LOCK" ]]; then
  echo "setup: no lock for pyspark ${PYSPARK_VERSION:-}: $LOCK is missing; pick one of $(ls requirements/lock*.txt | tr '\n' ' ')or add the version to PINNED_PYSPARK and run ./scripts/lock.sh" >&2
  exit 1
fi

stamp="$VENV/.installed-$(cat "$LOCK" pyproject.toml | sha256sum | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  pip_install=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${pip_install[@]}" --require-hashes --no-deps -r "$LOCK"
  # The project itself, from this checkout; everything it needs came from the lock.
  "${pip_install[@]}" --no-deps --no-build-isolation -e .
  "$VENV/bin/python" -m pip check >&2
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
echo "setup: ready ($VENV from $LOCK; $("$VENV/bin/python" - <<'PY'
from importlib.metadata import version
print(", ".join(f"{name} {version(name)}" for name in ("pyspark", "moto", "boto3", "deltalake", "pyarrow")))
PY
); $(java -version 2>&1 | head -n 1))" >&2
