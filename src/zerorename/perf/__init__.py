"""``zerorename perf``: measure zerorename against what users would run instead.

Scenarios: ``upload`` (one large object), ``many`` (many objects), ``commit`` (a job
commit of N deferred uploads), ``sweep`` (pool x concurrency x part size) and ``spark``
(DataFrame writes against a rename-based commit), next to boto3, obstore and Hadoop's
rename, on moto, Ceph RGW, the sink (:mod:`zerorename.servers.sink`) or any S3 endpoint.
``harness`` runs each measurement in a fresh child process and reports medians, ratios,
JSON and plots. Needs the ``perf`` extra; ``zerorename perf --help`` lists the options.
"""
