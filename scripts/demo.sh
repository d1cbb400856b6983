#!/bin/bash
# Set up a fresh machine (Debian 12, Python 3.11, Java 17) and run the main job:
# `zerorename demo` starts an embedded S3 server (moto), a local Spark session, writes a
# generated dataset partitioned as Parquet through the magic committer, reads it back,
# verifies rows and checksums and prints a summary. Its write time is bound by Spark generating
# the rows (SHA-256 payloads) and Parquet on local cores, next to moto: not an upload speed;
# `zerorename perf` measures zerorename's uploads and commits against a store.
#   bash scripts/demo.sh [zerorename demo options...]     e.g. --size 50MB, --endpoint-url URL
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { echo "[demo.sh] $*" >&2; }
"$PY" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' ||
    { say "Python >= 3.11 is required ($PY)"; exit 1; }
if ! java -version >/dev/null 2>&1; then
    say "java not found: PySpark needs Java 17 (apt-get install -y openjdk-17-jre-headless)"
    exit 1
fi
if [ "${ZR_SKIP_INSTALL:-0}" != 1 ]; then
    # a virtual environment of its own (Debian's python3 refuses pip installs outside one)
    venv=${ZR_VENV:-.venv-demo}
    [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv" ||
        { say "could not create a venv with $PY (apt-get install -y python3-venv)"; exit 1; }
    venv=$(cd "$venv" && pwd)
    PY="$venv/bin/python"
    export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
    say "installing zerorename with extras demo into $venv"
    "$PY" -m pip install --quiet --disable-pip-version-check -e '.[demo]'
fi
export SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-127.0.0.1}
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PY}
exec "$PY" -m zerorename.cli demo "$@"
