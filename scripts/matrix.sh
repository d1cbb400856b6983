#!/bin/bash
# The dependency matrix a maintainer runs before a release (CI runs the newest set only):
#   bash scripts/matrix.sh [ENTRY...]      entries: floors pyspark-4.0 pyspark-4.1 pyspark-4.2 pyspark-4.3
#                                          (default: all of them, in that order)
# Each entry builds a fresh virtual environment in $ZR_MATRIX_DIR/ENTRY (default
# /tmp/zr-matrix), runs pip install -e '.[dev,spark]' under a constraints file, then a narrow
# selection of the suite (engine, committers and Spark parts; moto only, no RGW), niced:
#   floors       every direct dependency (pyproject's [project] dependencies and the spark
#                extra) pinned to its declared minimum: 'pkg==min'
#   pyspark-4.N  pyspark==4.N.* with everything else at its newest (not run, and said so,
#                when 4.N is below the spark extra's declared pyspark floor)
# The result (date, python, each entry's installed versions of the direct dependencies,
# pass/fail and pytest's summary line) goes to docs/matrix.md, one row per entry (rows of
# entries not run this time are kept): commit it. Logs stay in
# $ZR_MATRIX_DIR/ENTRY.log. Environment: ZR_MATRIX_DIR, PYTHON (default python3),
# ZR_MATRIX_TESTS (pytest arguments replacing the selection below), ZR_MATRIX_REUSE=1 (run
# the tests in an entry's existing environment: no new venv, no install).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIR=${ZR_MATRIX_DIR:-/tmp/zr-matrix}
OUT=docs/matrix.md
say() { echo "[matrix.sh] $*" >&2; }
mkdir -p "$DIR"
entries=("$@")
[ ${#entries[@]} -gt 0 ] || entries=(floors pyspark-4.0 pyspark-4.1 pyspark-4.2 pyspark-4.3)

# the narrow selection: pure engine/committer/Spark tests, moto round trips, real Spark writes
ENGINE_TESTS=(tests/unit/engine/test_engine_planning.py tests/unit/engine/test_engine_retry.py
    tests/unit/engine/test_engine_records.py tests/unit/committers/commit/test_round_trips.py
    tests/integration/test_engine_uploads.py tests/integration/committers/test_committers_it_basic.py)
SPARK_TESTS=(tests/unit/spark_adapter/test_spark_pure.py tests/unit/spark_adapter/test_commit_options_parsing.py
    tests/spark/test_spark_write.py tests/spark/test_spark_streaming.py
    tests/spark/test_spark_connect.py)

constraints() { # $1: entry -> a pip constraints file's lines
    case $1 in
    floors)
        "$PY" - <<'EOF'
import re, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
for req in p["dependencies"] + p["optional-dependencies"]["spark"]:
    m = re.match(r"\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*>=\s*([^;,\s]+)", req)
    if m:
        print(f"{m.group(1)}=={m.group(3)}")
EOF
        ;;
    pyspark-*) echo "pyspark==${1#pyspark-}.*" ;;
    *) say "unknown entry $1 (floors, pyspark-4.N)"; return 1 ;;
    esac
}

versions() { # $1: python -> the direct dependencies as installed, one line
    "$1" - <<'EOF'
from importlib.metadata import version
names = ["aiobotocore", "botocore", "uvloop", "anyio", "tenacity", "crc32c", "pyspark", "pyarrow",
         "grpcio", "pandas"]
print(", ".join(f"{n} {version(n)}" for n in names))
EOF
}

rows=()
for entry in "${entries[@]}"; do
    venv="$DIR/$entry"
    log="$DIR/$entry.log"
    : >"$log"
    cons="$DIR/$entry.constraints"
    constraints "$entry" >"$cons" || exit 2
    say "$entry: venv $venv, constraints: $(tr '\n' ' ' <"$cons")"
    tests=("${ENGINE_TESTS[@]}" "${SPARK_TESTS[@]}")
    [ "$entry" = floors ] || tests=("${SPARK_TESTS[@]}")
    if [ -n "${ZR_MATRIX_TESTS:-}" ]; then read -ra tests <<<"$ZR_MATRIX_TESTS"; fi
    for t in "${tests[@]}"; do # a renamed test file: say so before building anything
        [[ $t == -* || -e ${t%%::*} ]] || { say "no test file $t: fix the selection in $0"; exit 2; }
    done
    if [[ $entry == pyspark-* ]]; then # below the declared floor: pip would refuse it
        floor=$(grep -o 'pyspark\[connect\]>=[0-9.]*' pyproject.toml | head -1 | cut -d= -f2)
        if [ "$(printf '%s\n' "${entry#pyspark-}" "$floor" | sort -V | head -1)" != "$floor" ]; then
            rows+=("| $entry | $(date -u +%F) | - | not run: below the declared floor pyspark>=$floor (pyproject.toml) | below floor |")
            say "$entry: below the declared floor pyspark>=$floor: not run"
            continue
        fi
    fi
    reuse=0
    [ "${ZR_MATRIX_REUSE:-0}" = 1 ] && [ -x "$venv/bin/python" ] && reuse=1
    if [ $reuse = 0 ]; then
        rm -rf "$venv"
        nice -n 19 "$PY" -m venv "$venv"
    fi
    pip=(nice -n 19 "$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
    if [ $reuse = 1 ]; then
        say "$entry: reusing the environment in $venv (ZR_MATRIX_REUSE=1)"
    elif [ "$entry" = floors ]; then
        # boto3 (dev, perf) must match the botocore that aiobotocore's floor pins: the same
        # version number (they are released in lock-step); unpinned, pip backtracks for ages
        "${pip[@]}" -c "$cons" aiobotocore >"$log" 2>&1 &&
            echo "boto3==$("$venv/bin/python" -c 'from importlib.metadata import version as v; print(v("botocore"))')" >>"$cons"
    fi
    if [ $reuse = 0 ] && ! "${pip[@]}" -c "$cons" -e '.[dev,spark]' >>"$log" 2>&1; then
        rows+=("| $entry | $(date -u +%F) | $(tr '\n' ' ' <"$cons") | install failed: $(grep -m1 -i error "$log" | cut -c1-200) | FAIL |")
        say "$entry: install failed (see $log)"
        continue
    fi
    vers=$(versions "$venv/bin/python")
    say "$entry: $vers; running ${#tests[@]} test files"
    env -u PYTHONPATH PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv" PYSPARK_PYTHON="$venv/bin/python" \
        SPARK_LOCAL_IP=127.0.0.1 ZR_SKIP_RGW=1 \
        nice -n 19 "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow and not rgw" \
        "${tests[@]}" >>"$log" 2>&1
    rc=$?
    summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
    verdict=PASS
    [ $rc -eq 0 ] || verdict=FAIL
    rows+=("| $entry | $(date -u +%F) | $vers | $summary | $verdict |")
    say "$entry: $verdict ($summary)"
done

# rows of entries not run this time stay (one row per entry, the newest run's)
kept=()
if [ -f "$OUT" ]; then
    while IFS= read -r line; do
        [[ $line == "| "* && $line != "| entry "* && $line != "| --- "* ]] || continue
        mine=0
        for e in "${entries[@]}"; do [[ $line == "| $e |"* ]] && mine=1; done
        [ $mine = 1 ] || kept+=("$line")
    done <"$OUT"
fi
{
    echo "# Dependency matrix (scripts/matrix.sh)"
    echo
    echo "Last written: $(date -u +%Y-%m-%dT%H:%MZ) on $("$PY" -c 'import platform; print("Python", platform.python_version(), platform.system(), platform.machine())'), Java $(java -version 2>&1 | head -1 | cut -d'"' -f2)."
    echo "Tests: engine, committer and Spark parts of the suite on moto"
    echo "(floors: the engine, committer and Spark selection; pyspark-4.N: the Spark selection)."
    echo
    echo "| entry | date | installed | pytest | result |"
    echo "| --- | --- | --- | --- | --- |"
    printf '%s\n' "${kept[@]}" "${rows[@]}" | grep . | sort -t'|' -k2,2
    missing=()
    for e in floors pyspark-4.0 pyspark-4.1 pyspark-4.2 pyspark-4.3; do
        printf '%s\n' "${kept[@]}" "${rows[@]}" | grep -q "^| $e |" || missing+=("$e")
    done
    [ ${#missing[@]} = 0 ] || (IFS=,; printf '\nNot run yet: %s.\n' "${missing[*]}" | sed 's/,/, /g')
} >"$OUT"
say "wrote $OUT"
grep -q '| FAIL |' "$OUT" && exit 1
exit 0
