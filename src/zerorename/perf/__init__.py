"""Benchmarks: engine memory and throughput next to boto3 (engine_bench), job commit at
scale (commit_bench). ``zerorename perf --help`` lists them."""
