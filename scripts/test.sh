#!/bin/bash
# Set up and run zerorename's tests on a fresh machine (Debian 12, Python 3.11, Java 17, root).
#   bash scripts/test.sh [pytest args...]      e.g. bash scripts/test.sh -k multipart -x
# Steps: build a fresh virtual environment (.venv-test, removed and made anew on every run, so a
# package that only a developer's machine has cannot make the run green); install -e
# '.[dev,spark]' into it (uv, which pip puts there first; pip itself when uv fails); check
# Java; install the Ceph RGW packages when missing (apt-get, root only); run pytest with that
# environment's python (Spark's workers too). Environment:
#   ZR_SKIP_INSTALL=1   no venv, no install: run with $PYTHON (default python3) as it is
#   ZR_VENV=DIR         where the fresh environment goes [.venv-test]
#   ZR_SKIP_RGW=1       skip the Ceph RGW tests
#   ZR_SKIP_SPARK=1     do not require Java (spark tests are deselected with -m 'not spark')
#   ZR_TEST_WORKERS     pytest-xdist worker processes running tests side by side [4]; 0 runs
#                       them serially in one process (most of a test's time is waiting on a
#                       server, Spark or a sleep, so more workers than cores pays)
#   ZR_TEST_TIMEOUT     per-test timeout in seconds [300]
#   ZR_RUN_TIMEOUT      whole pytest run: SIGINT after this many seconds (teardown still runs,
#                       the summary is printed), SIGKILL 60 s later [4200: under CI's 90-minute limit with the install]
# CI=true (or ZR_REQUIRE_RGW=1) makes a missing/broken RGW an error instead of a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { echo "[test.sh] $*" >&2; }
t0=$(date +%s)

"$PY" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' ||
    { say "Python >= 3.11 is required ($PY)"; exit 1; }

if [ "${ZR_SKIP_INSTALL:-0}" != 1 ]; then
    venv=${ZR_VENV:-.venv-test}
    say "building a fresh virtual environment in $venv"
    rm -rf "$venv"
    "$PY" -m venv "$venv" || { say "could not create a venv with $PY (apt-get install -y python3-venv)"; exit 1; }
    venv=$(cd "$venv" && pwd)
    PY="$venv/bin/python"
    export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
    say "installing zerorename with extras dev,spark into $venv (with uv, else pip)"
    # uv installs the same versions as pip in about a quarter of the time (pyspark's 400 MB
    # wheel is most of it: 34-39 s against pip's 130 s here); pip is the fallback
    if "$PY" -m pip install --quiet --disable-pip-version-check uv &&
        "$venv/bin/uv" pip install --quiet --python "$PY" -e '.[dev,spark]'; then
        :
    else
        say "uv could not install: installing with pip"
        "$PY" -m pip install --quiet --disable-pip-version-check -e '.[dev,spark]'
    fi
fi
say "python: $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')"

markers=()
if [ "${ZR_SKIP_SPARK:-0}" = 1 ]; then
    markers=(-m 'not spark')
elif ! java -version >/dev/null 2>&1; then
    say "java not found or not working: PySpark tests need Java 17 (apt-get install -y openjdk-17-jre-headless)"
    say "or set ZR_SKIP_SPARK=1 to run without the Spark tests"
    exit 1
else
    say "$(java -version 2>&1 | head -n 1)"
fi

if [ "${ZR_SKIP_RGW:-0}" != 1 ]; then
    # installs ceph-mon ceph-osd radosgw ceph-common when missing (apt-get update once; root)
    "$PY" -c 'from zerorename.servers.servers import ensure_rgw_installed; ensure_rgw_installed()' ||
        { say "could not install the Ceph RGW packages (set ZR_SKIP_RGW=1 to skip those tests)"; exit 1; }
fi

workers=${ZR_TEST_WORKERS:-4}
[[ $workers =~ ^[0-9]+$ ]] || { say "ZR_TEST_WORKERS must be a number of workers (0: serial), not '$workers'"; exit 1; }
parallel=()
if [ "$workers" != 0 ]; then
    "$PY" -c 'import xdist' 2>/dev/null ||
        { say "pytest-xdist is not installed (pip install pytest-xdist), or set ZR_TEST_WORKERS=0"; exit 1; }
    parallel=(-n "$workers")  # tests/conftest.py: the Spark tests in one worker
    say "running the tests in $workers worker processes (ZR_TEST_WORKERS=0: serially)"
fi

export SPARK_LOCAL_IP=${SPARK_LOCAL_IP:-127.0.0.1}
# bytecode is cached (a machine-wide PYTHONDONTWRITEBYTECODE would make every worker, CLI
# subprocess, harness child and Spark Python worker compile the sources and rewrite the
# test modules again)
unset PYTHONDONTWRITEBYTECODE
set +e
timeout -s INT -k 60 "${ZR_RUN_TIMEOUT:-4200}" \
    "$PY" -m pytest -ra --timeout="${ZR_TEST_TIMEOUT:-300}" --durations=15 "${parallel[@]}" \
    "${markers[@]}" "$@"
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    say "the test run exceeded ZR_RUN_TIMEOUT=${ZR_RUN_TIMEOUT:-4200}s and was stopped"
    rc=1
fi
set -e
if [ "$rc" = 5 ]; then
    say "pytest collected no tests: treating that as a failure"
    rc=1
fi
say "finished with exit code $rc in $(($(date +%s) - t0))s"
exit "$rc"
