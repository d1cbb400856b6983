#!/usr/bin/env bash
# Issue 23: awscrt and the floor next to the engine, on the sink, moto and RGW, over HTTP
# and HTTPS (run from the repository root; awscrt importable: pip install awscrt).
# Each command's stdout goes to NAME.txt, its JSON to NAME.json, here.
set -u
out=docs/benchmarks/crt
run() { name=$1; shift; echo "== $name: zerorename perf $*" >&2
  python -m zerorename.perf "$@" --quiet --json "$out/$name.json" > "$out/$name.txt" 2>&1
  echo "   exit $? at $(date -u +%H:%M:%S)" >&2; }
UP=(--size 512MiB --part-size 16MiB --concurrency 16 --reps 3 --clients zerorename,awscrt,boto3-default,obstore,floor)
MANY=(--count 1000 --size 256KiB --concurrency 16 --reps 3 --clients zerorename,awscrt,boto3-default,obstore)
for target in sink moto rgw; do
  run "$target-upload" upload --target "$target" "${UP[@]}"
  run "$target-upload-tls" upload --target "$target" --tls "${UP[@]}"
done
for target in sink moto rgw; do
  run "$target-many" many --target "$target" "${MANY[@]}"
  run "$target-many-tls" many --target "$target" --tls "${MANY[@]}"
done
run sink-commit commit --target sink --uploads 5000 --pendingsets 50 --reps 3 --clients zerorename,boto3-64,floor
run sink-commit-tls commit --target sink --tls --uploads 5000 --pendingsets 50 --reps 3 --clients zerorename,boto3-64,floor
# run after the above (06:32 UTC): RGW over HTTPS with boto3 as Ceph users run it (its default
# trailing checksums are refused there), for the RSS-growth goal; then the profiles of the
# engine's commit and many-objects runs (the goals they miss; pyinstrument importable)
run rgw-upload-tls-when-required upload --target rgw --tls --size 512MiB --part-size 16MiB --concurrency 16 --reps 3 --clients zerorename,boto3-when-required,floor
run sink-commit-profile commit --target sink --uploads 5000 --pendingsets 50 --reps 1 --clients zerorename,floor --profile "$out/profile"
run sink-many-profile many --target sink --count 1000 --size 256KiB --concurrency 16 --reps 1 --clients zerorename,awscrt --profile "$out/profile"
