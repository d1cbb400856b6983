"""The interpreter of Spark's Python workers must import zerorename: checked, and said in one line.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (spark-submit sets it from
``spark.pyspark.python``), else ``python3`` from PATH: a script run with a venv's python
without activating the venv gets workers that cannot import zerorename, and a 40-line
Java stack. :func:`check_local_workers` (``register(spark)`` calls it) runs the workers'
interpreter once, in local mode, and refuses with the fix. On a cluster the executors'
interpreters are not reachable from the driver: :func:`guarded_reduce` makes the data
source's writers unpickle through a small loader that names the same fix in the executor's
error when zerorename is missing there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from zerorename.spark_adapter.errors import OptionError

#: Spark's interpreter for Python workers when nothing is set.
DEFAULT_WORKER_PYTHON = "python3"


def worker_python(python_exec: str | None, conf: str | None, env: Mapping[str, str]) -> str:
    """The interpreter Spark's Python workers will run: the context's ``pythonExec`` (a
    classic session: what Spark hands its Python functions), else ``spark.pyspark.python``,
    else ``PYSPARK_PYTHON``, else ``python3``."""
    return python_exec or conf or env.get("PYSPARK_PYTHON") or DEFAULT_WORKER_PYTHON


def missing_message(python: str, why: str) -> str:
    """The one line that says which interpreter cannot import zerorename and what to set."""
    return (
        f"Spark's Python workers run {python!r}, which cannot import zerorename ({why}); "
        f"set PYSPARK_PYTHON={sys.executable} (an interpreter that has zerorename) before "
        "the session starts, or --conf spark.pyspark.python=... with spark-submit"
    )


def probe(python: str, env: Mapping[str, str], timeout: float = 120.0) -> str | None:
    """Run ``python -c 'import zerorename'`` as Spark would start it (this environment,
    which a local Spark's workers inherit): None if it imports, else why not (one line)."""
    try:
        done = subprocess.run(
            [python, "-c", "import zerorename"],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return "no such program"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    if done.returncode == 0:
        return None
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else f"exit status {done.returncode}"


def _conf(spark: Any, key: str) -> str | None:
    try:
        value = spark.conf.get(key, None)
    except Exception:
        return None
    return str(value) if value else None


def check_local_workers(spark: Any) -> None:
    """In local mode, refuse (one line) when the workers' interpreter cannot import
    zerorename; elsewhere do nothing (executors are checked when they unpickle)."""
    master = _conf(spark, "spark.master") or ""
    if not master.startswith("local"):
        return
    python_exec = None
    try:  # classic sessions: the interpreter Spark hands its Python functions
        python_exec = spark.sparkContext.pythonExec
    except Exception:  # Spark Connect: no SparkContext on the client
        python_exec = None
    python = worker_python(python_exec, _conf(spark, "spark.pyspark.python"), os.environ)
    why = probe(python, os.environ)
    if why is not None:
        raise OptionError(missing_message(python, why))


def load_zerorename_object(payload: bytes) -> Any:
    """Rebuild a writer from :func:`guarded_reduce`'s bytes, first checking that zerorename
    imports here (one line naming the fix when it does not). Shipped by value by cloudpickle
    (:func:`guarded_reduce` registers this module so), so it runs before anything of
    zerorename is imported; only stdlib names inside."""
    import pickle
    import sys

    try:
        import zerorename  # noqa: F401
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"zerorename: Spark's Python worker runs {sys.executable!r}, which cannot "
            f"import zerorename ({exc}); install zerorename for it, or set "
            "PYSPARK_PYTHON (spark-submit: --conf spark.pyspark.python=...) to an "
            "interpreter that has it"
        ) from None
    cls, state = pickle.loads(payload)
    obj = cls.__new__(cls)
    obj.__dict__.update(state)
    return obj


def guarded_reduce(obj: Any) -> tuple[Callable[[bytes], Any], tuple[bytes]]:
    """``__reduce__`` of the data source's writers: the class and state pickled inside
    bytes, loaded by :func:`load_zerorename_object`, which first checks that zerorename
    imports and names the fix when it does not. cloudpickle (Spark's pickler) ships that
    loader by value; plain pickle by reference, as any function."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]
    payload = cloudpickle.dumps((type(obj), obj.__dict__))  # type: ignore[no-untyped-call]
    return load_zerorename_object, (payload,)
