#!/bin/bash
# The runs behind BENCHMARKS.md, one after another (on a quiet machine):
#   [PHASES="sink moto rgw spark tls"] bash docs/benchmarks/run.sh
# Each run writes NAME.txt (the table), NAME.json (every sample) and for some NAME.png here.
cd "$(dirname "$0")"
run() { name=$1; shift; echo "=== $name: zerorename perf $* ($(date +%T), load $(cut -d' ' -f1-3 /proc/loadavg))";
  zerorename perf "$@" --quiet --json $name.json > $name.txt 2>&1; echo "exit=$? $(date +%T)"; }
for phase in ${PHASES:-sink moto rgw spark tls}; do case $phase in
sink)
run sink-upload-file upload --target sink --size 1GiB --reps 3 --plot sink-upload-file.png
run sink-upload-mem upload --target sink --size 1GiB --source memory --reps 3 --clients zerorename,boto3-default,boto3-matched
run sink-many many --target sink --count 2000 --reps 3
run sink-commit commit --target sink --uploads 5000 --reps 3
run sink-commit-100k commit --target sink --uploads 100000 --pendingsets 1000 --clients zerorename --reps 1
run sink-sweep sweep --target sink --size 512MiB --reps 3 --plot sink-sweep.png ;;
moto)
run moto-upload upload --target moto --size 512MiB --reps 3
run moto-many many --target moto --count 500 --reps 3
run moto-commit commit --target moto --uploads 2000 --reps 3 ;;
rgw)
run rgw-upload upload --target rgw --size 1GiB --reps 3 --run-timeout 600
run rgw-many many --target rgw --count 1000 --reps 3
run rgw-commit commit --target rgw --uploads 2000 --reps 3
run rgw-sweep sweep --target rgw --size 256MiB --pools 8,16 --concurrencies 4,8,16 --part-sizes 8MiB,16MiB --reps 2 --plot rgw-sweep.png ;;
spark)
run rgw-spark spark --target rgw --reps 3 --sizes-mb 100,1000 --clients magic,rename --copy-threshold 16m --copy-part-size 16m --plot rgw-spark.png
run rgw-spark-copy spark --target rgw --reps 2 --sizes-mb 100,1000 --copy-threshold 16m --copy-part-size 16m
run rgw-spark-s3a spark --target rgw --reps 2 --sizes-mb 100,1000 --clients magic,rename ;;
tls)  # HTTPS: a CA made per run, every client verifies; the report adds the AES-GCM floor
run tls-sink-upload-file upload --target sink --tls --size 1GiB --reps 3
run tls-ref-sink-upload-http upload --target sink --size 1GiB --reps 3 --clients zerorename,boto3-default
run tls-sink-many many --target sink --tls --count 2000 --reps 3
run tls-sink-commit commit --target sink --tls --uploads 5000 --reps 3
run tls-rgw-upload upload --target rgw --tls --size 1GiB --reps 3 --run-timeout 600 --clients zerorename,boto3-default,boto3-when-required,obstore
run tls-sink-upload-profile upload --target sink --tls --size 1GiB --reps 1 --clients zerorename --profile tls-profile ;;
esac; done
