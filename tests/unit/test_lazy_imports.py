"""Each of Spark's Python processes imports what its step needs, and no more: the engine and
committers packages resolve their names on first use (every public name still imports), the
write options load no committer, engine core or HTTP stack, the data source
module loads no pyarrow, engine core or stream code, and the job commit's process
unpickles a writer and its tasks' messages without pyarrow (each probe a fresh interpreter)."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from needs import need_module

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _loaded_after(code: str) -> dict[str, bool]:
    """Run ``code`` in a fresh interpreter; which modules of WATCH it loaded."""
    probe = (
        code
        + "\nimport json, sys\nprint(json.dumps({m: m in sys.modules for m in "
        + repr(WATCH)
        + "}))"
    )
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    loaded: dict[str, bool] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


WATCH = (
    "aiohttp",
    "botocore",
    "pyarrow",
    "zerorename.engine.core",
    "zerorename.engine.config",
    "zerorename.committers.committer",
    "zerorename.spark_adapter.bridge",
    "zerorename.spark_adapter.stream.writer",
    "zerorename.spark_adapter.files.formats",
)


#: public names a package exports from a module outside it: the engine's ``run`` is the
#: portal's (issue 21: the loop runner lives with the portal, engine/runner.py is gone)
BORROWED = {"engine": {"run": "zerorename.portal"}}


@pytest.mark.parametrize("package", ["engine", "committers"])
def test_every_public_name_imports_and_is_its_modules_object(package: str) -> None:
    pkg = importlib.import_module(f"zerorename.{package}")
    folder = Path(SRC) / "zerorename" / package
    modules = [
        importlib.import_module(f"zerorename.{package}.{'.'.join(p.with_suffix('').parts)}")
        for p in sorted(q.relative_to(folder) for q in folder.rglob("*.py"))
        if p.stem != "__init__"
    ]
    for name in pkg.__all__:
        value = getattr(pkg, name)
        if name in BORROWED.get(package, {}):  # exported from a module outside the package
            assert value is getattr(importlib.import_module(BORROWED[package][name]), name)
            continue
        # the very object one of the package's modules defines (or the module itself)
        assert any(getattr(m, name, None) is value or m is value for m in modules), name
    namespace: dict[str, object] = {}
    exec(f"from zerorename.{package} import *", namespace)  # the star import, as users write it
    assert set(pkg.__all__) <= set(namespace)
    assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pkg.Nope  # noqa: B018


def test_reading_engine_settings_loads_no_http_stack() -> None:
    got = _loaded_after("from zerorename.engine import EngineConfig, RetryConfig")
    assert got["zerorename.engine.config"]
    assert not got["zerorename.engine.core"] and not got["aiohttp"] and not got["botocore"]


def test_write_options_load_no_committer_engine_core_or_http_stack() -> None:
    """What a planning process parses (Spark's options, commit options, conflict scope):
    the committers' light modules alone; a process that only reads them pays no
    committer, engine core, aiohttp or botocore import."""
    got = _loaded_after(
        "from zerorename.committers import CommitOptions, ConflictScope, Destination\n"
        "from zerorename.spark_adapter.options import WriteOptions\n"
        "WriteOptions.parse({'path': 's3://bucket/t', 'commitConcurrency': '8'})"
    )
    assert not any(
        got[m] for m in ("zerorename.committers.committer", "zerorename.engine.core", "aiohttp")
    ), got
    assert not got["botocore"], got


def test_the_data_source_module_loads_only_the_class() -> None:
    need_module("pyspark", "pip install -e '.[spark]'")
    got = _loaded_after("import zerorename.spark_adapter.datasource")
    assert not any(
        got[m]
        for m in (
            "pyarrow",
            "zerorename.engine.core",
            "zerorename.spark_adapter.bridge",
            "zerorename.spark_adapter.stream.writer",
            "zerorename.spark_adapter.files.formats",
        )
    ), got


def test_the_job_commit_unpickles_writer_and_messages_without_pyarrow(tmp_path: Path) -> None:
    """What Spark's commit process (commit_data_source_write) loads: the writer the
    planning step pickled (with its empty-output schema) and one message per task."""
    need_module("pyspark", "pip install -e '.[spark]'")
    pa = need_module("pyarrow", "pip install -e '.[spark]'")
    from pyspark import cloudpickle

    from zerorename.spark_adapter.datasource import ZeroRenameCommitMessage, ZeroRenameWriter
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.write import TaskResult

    schema = pa.schema([("id", pa.int64()), ("t", pa.timestamp("us", tz="UTC"))])
    writer = ZeroRenameWriter(WriteOptions.parse({"path": "s3://bucket/table"}), "job")
    writer.empty_schema = schema
    result = TaskResult(0, 0, 0, rows=5, files=1, bytes=10, summary=None)
    (tmp_path / "writer").write_bytes(cloudpickle.dumps(writer))
    (tmp_path / "message").write_bytes(cloudpickle.dumps(ZeroRenameCommitMessage(result)))

    again = pickle.loads((tmp_path / "writer").read_bytes())
    assert again.empty_schema.equals(schema) and again.opts == writer.opts
    got = _loaded_after(
        "import pickle, pyspark.sql.worker.commit_data_source_write\n"
        f"w = pickle.loads(open({str(tmp_path / 'writer')!r}, 'rb').read())\n"
        f"m = pickle.loads(open({str(tmp_path / 'message')!r}, 'rb').read())\n"
        "assert w.job_id == 'job' and m.result.rows == 5"
    )
    assert not got["pyarrow"], "the commit process imported pyarrow"


def test_a_stream_batch_commit_builds_its_writer_without_pyarrow() -> None:
    """Spark's stream commit process (python_streaming_sink_runner) builds the writer with
    ``streamWriter()`` before committing a micro-batch, and its planning process
    (write_into_data_source) builds and pickles it: options, schema checks and the writer
    class load no pyarrow, no file writer, no text encoder, no engine."""
    need_module("pyspark", "pip install -e '.[spark]'")
    got = _loaded_after(
        "from pyspark.sql.types import LongType, StructField, StructType\n"
        "from zerorename.spark_adapter.datasource import ZeroRenameDataSource\n"
        "source = ZeroRenameDataSource(options={'path': 's3://bucket/t', "
        "'checkpointLocation': '/tmp/c', 'partitionBy': 'k'})\n"
        "schema = StructType([StructField('id', LongType()), StructField('k', LongType())])\n"
        "assert type(source.streamWriter(schema, False)).__name__ == 'ZeroRenameStreamWriter'"
    )
    assert not got["pyarrow"] and not got["zerorename.spark_adapter.files.formats"], got
    # nor the task writer, the bridge, the committers, the engine or the HTTP stack: Spark's
    # planning process (write_into_data_source) builds and pickles this writer, no more
    assert not any(
        got[m]
        for m in (
            "zerorename.spark_adapter.bridge",
            "zerorename.committers.committer",
            "zerorename.engine.core",
            "aiohttp",
            "botocore",
        )
    ), got
