"""``zerorename perf``: measure zerorename against what users would run instead.

Scenarios: SCENARIO_NAMES (``zerorename perf --help`` says what each
measures), next to boto3, obstore and Hadoop's rename, on moto, Ceph RGW, the sink
(:mod:`zerorename.servers.sink`) or any S3 endpoint. ``harness`` runs each measurement in
a fresh child process and reports medians, ratios, JSON and plots. Needs the ``perf``
extra; ``zerorename perf --help`` lists the options.
"""

#: the scenarios, in the order they are listed: what ``zerorename --help`` and this
#: docstring name (without importing a scenario), and what ``harness.SCENARIOS`` holds
SCENARIO_NAMES = ("upload", "many", "commit", "stream", "sweep", "tune", "spark")

if __doc__:  # the names above, not a copy that can go stale
    __doc__ = __doc__.replace("SCENARIO_NAMES", ", ".join(f"``{n}``" for n in SCENARIO_NAMES))
