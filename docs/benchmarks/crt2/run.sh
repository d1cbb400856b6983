#!/usr/bin/env bash
# Issue 23, second run (stop 39): the tables of docs/benchmarks/crt/run.sh again, on the code
# with the single-part path and the smaller TLS reads, at normal priority while other work
# ran at nice 19 (run from the repository root; awscrt and obstore importable:
# pip install -e '.[perf]'). Each command's stdout goes to NAME.txt, its JSON to NAME.json.
set -u
out=docs/benchmarks/crt2
run() { name=$1; shift; echo "== $name: zerorename perf $* (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  python -m zerorename.perf "$@" --quiet --json "$out/$name.json" > "$out/$name.txt" 2>&1
  echo "   exit $? at $(date -u +%H:%M:%S)" >&2; }
UP=(--size 512MiB --part-size 16MiB --concurrency 16 --reps 3 --clients zerorename,awscrt,boto3-default,obstore,floor)
MANY=(--count 1000 --size 256KiB --concurrency 16 --reps 3 --clients zerorename,awscrt,boto3-default,obstore)
run sink-upload upload --target sink "${UP[@]}"
run sink-upload-tls upload --target sink --tls "${UP[@]}"
run sink-many many --target sink "${MANY[@]}"
run sink-many-tls many --target sink --tls "${MANY[@]}"
run sink-commit commit --target sink --uploads 5000 --pendingsets 50 --reps 3 --clients zerorename,boto3-64,floor
run sink-commit-tls commit --target sink --tls --uploads 5000 --pendingsets 50 --reps 3 --clients zerorename,boto3-64,floor
run rgw-upload upload --target rgw "${UP[@]}"
run rgw-upload-tls-when-required upload --target rgw --tls --size 512MiB --part-size 16MiB --concurrency 16 --reps 3 --clients zerorename,awscrt,boto3-when-required,obstore,floor
run rgw-many many --target rgw "${MANY[@]}"
run rgw-many-tls many --target rgw --tls --count 1000 --size 256KiB --concurrency 16 --reps 3 --clients zerorename,awscrt,boto3-when-required,obstore
run moto-upload upload --target moto "${UP[@]}"
run moto-upload-tls upload --target moto --tls "${UP[@]}"
run moto-many many --target moto "${MANY[@]}"
run moto-many-tls many --target moto --tls "${MANY[@]}"
