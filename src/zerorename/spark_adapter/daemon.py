"""A Spark Python daemon whose task workers start warm: ``spark.python.daemon.module``.

    SparkSession.builder.config("spark.python.daemon.module", "zerorename.spark_adapter.daemon")

Spark forks each Python task worker from one daemon process per executor (and Python
interpreter). pyspark's daemon (:mod:`pyspark.daemon`) imports nothing of the workers' code
before it forks, so every worker imports pyspark's worker, zerorename's engine and
committers, and parses botocore's S3 model afresh. This daemon loads those once
(:func:`preload`) and then runs pyspark's daemon unchanged (:func:`main`): its workers
inherit the loaded modules and the parsed model (copy-on-write), and run exactly the code
they would run under pyspark's daemon.

Only what starts no thread, no event loop and opens no socket runs before the fork (a
forked child has only the forking thread, and would share the parent's sockets): pyarrow,
numpy and pandas start native threads when imported (pyspark's own reason to import the
worker after the fork), so they, and the zerorename modules that import them, still load in
each worker. ``tests/unit/spark_adapter/test_spark_daemon_preload.py`` holds this: after
:func:`preload` the process has one thread, no socket, no event loop, and none of those
three modules.

Spark starts its data source planning workers (``writer()``, ``commit()``) through
pyspark's own daemon whatever this setting says; it concerns task workers only.
"""

from __future__ import annotations

import importlib

#: Modules loaded before the fork: what every zerorename task imports that starts no
#: thread when imported (pyarrow, numpy and pandas do; they are not here, nor is anything
#: that imports them).
PRELOAD = (
    "pyspark.worker",
    "pyspark.sql.datasource",
    "zerorename.engine",
    # the committers package loads its modules on first use: name the ones tasks run
    "zerorename.committers.committer",
    "zerorename.committers.sync",
    "zerorename.engine.core",
    "zerorename.spark_adapter.bridge",
    "zerorename.spark_adapter.options",
    "zerorename.spark_adapter.write",
    # what a task unpickles (the writers' classes) and a stream task runs
    "zerorename.spark_adapter.datasource",
    "zerorename.spark_adapter.stream.writer",
    "zerorename.spark_adapter.stream.task",
)

#: botocore data files an S3 client reads when it is created (``create_client("s3")``):
#: (service, type) for service models, (None, name) for botocore's shared data.
BOTOCORE_DATA = (
    ("s3", "service-2"),
    ("s3", "endpoint-rule-set-1"),
    (None, "endpoints"),
    (None, "partitions"),
    (None, "_retry"),
    (None, "sdk-default-configuration"),
)

#: True once :func:`preload` ran in this process (a worker forked by this daemon sees it)
PRELOADED = False


def warm_botocore() -> None:
    """Parse the botocore data an S3 client needs into the loader every zerorename engine
    of this process shares (:func:`zerorename.engine.wire.client.make_session`): pure JSON
    parsing, no credentials read, no connection."""
    from zerorename.engine.config import EngineConfig
    from zerorename.engine.wire.client import make_session

    loader = make_session(EngineConfig()).get_component("data_loader")
    for service, name in BOTOCORE_DATA:
        if service is None:
            loader.load_data(name)
        else:
            loader.load_service_model(service, name)


def preload() -> None:
    """Import :data:`PRELOAD` and warm botocore's data; idempotent."""
    global PRELOADED
    for module in PRELOAD:
        importlib.import_module(module)
    warm_botocore()
    PRELOADED = True


def main() -> None:
    """Preload, then run pyspark's daemon (it reads the worker module from ``sys.argv``)."""
    preload()
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    # run as ``python -m``, this file is ``__main__``: work through the importable module,
    # so that workers find it (and PRELOADED) under its own name
    importlib.import_module("zerorename.spark_adapter.daemon").main()
