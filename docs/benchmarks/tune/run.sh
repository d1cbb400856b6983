#!/bin/bash
# usage: run.sh NAME perf-args...
name=$1; shift
cd "$(dirname "$0")/../../.."   # the repository
mkdir -p /tmp/tune-runs
out=/tmp/tune-runs/$name
{
  echo "start $(date -u +%H:%M:%S) $(uptime | sed 's/.*load average/load average/')"
  echo "command: zerorename perf tune $* --advice $out.advice.json --json $out.json --quiet"
  /usr/bin/time -f "elapsed %e s" python3 -m zerorename.perf tune "$@" --advice $out.advice.json --json $out.json --quiet
  echo "end $(date -u +%H:%M:%S) $(uptime | sed 's/.*load average/load average/')"
} > $out.txt 2>&1
