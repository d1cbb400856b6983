#!/bin/bash
# Issue 21: the tree before the moves (OLD) against the tree after (NEW), each a src/ folder,
# two rounds, old then new in each; text and JSON land beside this script.
# usage: OLD=/path/to/old/src NEW=/path/to/new/src bash docs/benchmarks/structure/run.sh
set -u
cd "$(dirname "$0")"
for round in 1 2; do
for tree in old new; do
  if [ $tree = old ]; then export PYTHONPATH=$OLD; else export PYTHONPATH=$NEW; fi
  python -m zerorename perf upload --target sink --size 256MiB --part-size 16MiB --concurrency 16 --reps 3 --clients zerorename,floor --quiet --json up-$tree-$round.json > up-$tree-$round.txt 2>&1
  python -m zerorename perf commit --target sink --uploads 2000 --pendingsets 20 --reps 3 --clients zerorename,floor --quiet --json commit-$tree-$round.json > commit-$tree-$round.txt 2>&1
  python -m zerorename perf stream --target sink --files 1,8 --batches 20 --reps 2 --quiet --json stream-$tree-$round.json > stream-$tree-$round.txt 2>&1
  echo "$tree $round done $(date +%T)"
done; done
