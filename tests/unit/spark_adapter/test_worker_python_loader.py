"""Spark's Python workers must import zerorename: which interpreter Spark runs, the one-line
refusal, and the writers' loader that names the same fix where a worker lacks zerorename
(a subprocess without zerorename unpickles a writer as an executor would)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from needs import need_module
from zerorename.spark_adapter.workerpython import missing_message, probe, worker_python

pyspark = need_module("pyspark", "pip install -e '.[spark]'")


def test_the_workers_interpreter_is_the_contexts_then_the_conf_then_the_env() -> None:
    env = {"PYSPARK_PYTHON": "/env/python"}
    assert worker_python("/ctx/python", "/conf/python", env) == "/ctx/python"
    assert worker_python(None, "/conf/python", env) == "/conf/python"
    assert worker_python(None, None, env) == "/env/python"
    assert worker_python(None, None, {}) == "python3"  # Spark's own default


def test_the_refusal_is_one_line_naming_the_interpreter_and_the_fix() -> None:
    text = missing_message("python3", "No module named 'zerorename'")
    assert "\n" not in text
    assert "'python3'" in text and f"PYSPARK_PYTHON={sys.executable}" in text
    assert "spark.pyspark.python" in text


def test_probe_runs_the_interpreter(tmp_path: Path) -> None:
    assert probe(sys.executable, os.environ) is None  # this one has zerorename
    assert probe(str(tmp_path / "nope"), os.environ) == "no such program"


def test_a_worker_without_zerorename_names_the_fix_when_it_unpickles_a_writer(
    tmp_path: Path,
) -> None:
    import pickle

    import py4j
    from pyspark import cloudpickle

    from zerorename.spark_adapter.datasource import ZeroRenameWriter
    from zerorename.spark_adapter.options import WriteOptions

    writer = ZeroRenameWriter(WriteOptions.parse({"path": "s3://b/p", "commitWindow": "3"}), "j")
    data = cloudpickle.dumps(lambda: writer)  # as Spark ships it: inside the write function
    back = pickle.loads(data)()
    assert type(back) is ZeroRenameWriter and (back.opts, back.job_id) == (writer.opts, "j")
    plain = pickle.loads(pickle.dumps(writer))  # plain pickle too (the loader by reference)
    assert (plain.opts, plain.job_id) == (writer.opts, "j")
    # an interpreter that has pyspark (as every worker does) but not zerorename
    path = tmp_path / "path"
    path.mkdir()
    for mod in (pyspark, py4j):
        (path / mod.__name__).symlink_to(Path(mod.__file__).parent)
    (tmp_path / "w.pkl").write_bytes(data)
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            f"import pickle; pickle.loads(open({str(tmp_path / 'w.pkl')!r}, 'rb').read())",
        ],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: zerorename: Spark's Python worker runs"), last
    assert "PYSPARK_PYTHON" in last and "spark.pyspark.python" in last
