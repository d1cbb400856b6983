#!/bin/bash
# every scenario x every embedded target at a tiny size, from the CLI
# bash docs/benchmarks/matrix.sh: outputs go to the current directory
declare -A ARGS=(
 [upload]="--size 16MiB --part-size 5MiB --concurrency 2"
 [many]="--count 10 --size 64KiB"
 [commit]="--uploads 50 --pendingsets 2"
 [sweep]="--size 16MiB --pools 4,8 --concurrencies 2 --part-sizes 8MiB"
 [spark]="--sizes-mb 4 --partitions 2"
)
for t in sink moto rgw; do for s in upload many commit sweep spark; do
  t0=$(date +%s)
  zerorename perf $s --target $t --reps 1 --quiet ${ARGS[$s]} --json $s-$t.json > $s-$t.txt 2>&1
  echo "$s $t exit=$? $(( $(date +%s)-t0 ))s"
done; done
