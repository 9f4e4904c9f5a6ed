#!/usr/bin/env bash
# Prepare a checkout on a fresh machine: a JDK when `java` is missing, and a virtualenv with
# the project and its test dependencies. Idempotent: a second run only checks.
#
#   VENV=.venv                  where the virtualenv lives (default: .venv in the checkout)
#   PYSPARK_VERSION=4.0.2       pin pyspark, e.g. to run the suite on EMR's Spark 4.0.x
#                               (uses .venv-pyspark-4.0.2 unless VENV is set)
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

stamp="$VENV/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)-${PYSPARK_VERSION:-latest}"
if [[ ! -f "$stamp" ]]; then
  [[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  pin=()
  [[ -n "${PYSPARK_VERSION:-}" ]] && pin=("pyspark==${PYSPARK_VERSION}")
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e ".[test]" "${pin[@]}"
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi
echo "setup: ready ($VENV, $("$VENV/bin/python" -c 'import pyspark; print("pyspark", pyspark.__version__)'), $(java -version 2>&1 | head -n 1))" >&2
