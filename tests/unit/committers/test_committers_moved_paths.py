"""The committers' folders (issue 21): every module path of before still imports, as the
moved module itself (so a test that patches a name through an old path patches the module
the code runs), and nothing the committers ship to Spark or name in the package's lazy
exports points at an old path."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from needs import need_module

PACKAGE = "zerorename.committers"
FOLDER = Path(__file__).resolve().parents[3] / "src" / "zerorename" / "committers"

#: old module (flat, before issue 21) -> where it lives now
MOVED = {
    "jobcommit": "commit.run",
    "jobscan": "commit.scan",
    "jobcomplete": "commit.complete",
    "jobstorage": "commit.storage",
    "jobresult": "commit.result",
    "jobpolicy": "commit.policy",
    "journal": "commit.journal",
    "window": "commit.window",
    "spool": "commit.spool",
    "commitlock": "commit.lock",
    "records": "codec.pending",
    "successdata": "codec.success",
    "validate": "codec.validate",
    "jsonstream": "codec.jsonstream",
    "s3alayout": "s3a.layout",
    "s3aformat": "codec.hadoop",
    "s3aread": "s3a.read",
    "s3ajobs": "s3a.jobs",
    "s3aabort": "s3a.abort",
}


#: the command's modules, moved out of committers to the cli/ folder (their aliases are
#: tested with the command's, in tests/unit/test_cli_moved_paths.py)
TO_CLI = {"cli", "cliargs", "cmdclaim"}


def test_the_aliases_are_exactly_the_moved_modules() -> None:
    """A module of the folder that imports as another module is an alias: MOVED lists each
    (and the command's, which went to cli/)."""
    aliases = set()
    for path in sorted(FOLDER.glob("*.py")):
        if path.stem != "__init__":
            name = f"{PACKAGE}.{path.stem}"
            if importlib.import_module(name).__name__ != name:
                aliases.add(path.stem)
    assert aliases == set(MOVED) | TO_CLI


def test_no_new_path_takes_an_old_name() -> None:
    """A folder and an alias of the same name cannot both exist: no folder is named after
    an old module, and no moved module is left behind beside its alias."""
    folders = {p.name for p in FOLDER.iterdir() if (p / "__init__.py").exists()}
    assert not folders & set(MOVED)
    assert {new.partition(".")[0] for new in MOVED.values()} <= folders


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_path_is_the_moved_module(old: str, new: str) -> None:
    moved = importlib.import_module(f"{PACKAGE}.{new}")
    assert importlib.import_module(f"{PACKAGE}.{old}") is moved
    assert sys.modules[f"{PACKAGE}.{old}"] is moved
    assert getattr(importlib.import_module(PACKAGE), old) is moved  # the package's attribute
    assert moved.__name__ == f"{PACKAGE}.{new}"
    namespace: dict[str, Any] = {}
    exec(f"from {PACKAGE}.{old} import *", namespace)  # as old code wrote it, too
    public = getattr(moved, "__all__", [n for n in vars(moved) if not n.startswith("_")])
    assert public
    for name in public:
        assert namespace[name] is getattr(moved, name), name


def test_a_patch_through_an_old_path_reaches_the_moved_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What tests do with ``monkeypatch.setattr("zerorename.committers.<old>.X", ...)``."""
    from zerorename.committers.commit import window

    marker = object()
    monkeypatch.setattr(f"{PACKAGE}.window.CompletionWindow", marker)
    assert window.CompletionWindow is marker


def test_the_old_paths_that_other_code_imports_give_the_same_objects() -> None:
    """What the CLI (committers/cli.py, cmdclaim.py), testing/s3acrash.py and the tests still
    import by the old paths, private names included."""
    from zerorename.committers.codec import pending, validate
    from zerorename.committers.commit import lock, run, spool
    from zerorename.committers.commitlock import LockLost, held_by_job
    from zerorename.committers.jobcommit import CommitProgress, JobCommitRun
    from zerorename.committers.records import PendingRecord, SuccessData, read_pendingset
    from zerorename.committers.s3a import jobs, layout
    from zerorename.committers.s3ajobs import list_s3a_jobs
    from zerorename.committers.s3alayout import S3AJobLayout, s3a_id_problem
    from zerorename.committers.spool import PendingSetCache
    from zerorename.committers.validate import Fields, load_json

    pairs = [
        (LockLost, lock.LockLost),
        (held_by_job, lock.held_by_job),
        (CommitProgress, run.CommitProgress),
        (JobCommitRun, run.JobCommitRun),
        (PendingRecord, pending.PendingRecord),
        (SuccessData, pending.SuccessData),
        (read_pendingset, pending.read_pendingset),
        (list_s3a_jobs, jobs.list_s3a_jobs),
        (S3AJobLayout, layout.S3AJobLayout),
        (s3a_id_problem, layout.s3a_id_problem),
        (PendingSetCache, spool.PendingSetCache),
        (Fields, validate.Fields),
        (load_json, validate.load_json),
    ]
    assert all(old is new for old, new in pairs)


def test_the_package_exports_load_from_the_new_paths() -> None:
    """``from zerorename.committers import X`` (the README's imports) loads X's module by its
    new path: the lazy table names no alias."""
    import zerorename.committers as committers

    lazy: dict[str, str] = vars(committers)["_LAZY"]
    assert not set(lazy.values()) & set(MOVED)
    for name, module in sorted(lazy.items()):
        assert getattr(committers, name) is getattr(
            importlib.import_module(f"{PACKAGE}.{module}"), name
        ), name


def test_what_spark_pickles_names_no_old_path() -> None:
    """The batch writer, a task's message and the stream writer, pickled as Spark pickles
    them: no committers path of before appears (a worker would unpickle through an alias)."""
    need_module("pyspark")
    need_module("pyarrow")
    from pyspark import cloudpickle
    from pyspark.sql.types import LongType, StructField, StructType

    from zerorename.spark_adapter.datasource import (
        ZeroRenameCommitMessage,
        ZeroRenameDataSource,
        ZeroRenameWriter,
    )
    from zerorename.spark_adapter.options import WriteOptions
    from zerorename.spark_adapter.write import TaskResult

    opts = WriteOptions.parse({"path": "s3://bucket/t", "conflict": "replace"})
    result = TaskResult(0, 0, 0, rows=5, files=1, bytes=10, summary=None)
    schema = StructType([StructField("id", LongType())])
    stream_writer = ZeroRenameDataSource(
        {"path": "s3://bucket/t", "checkpointLocation": "/tmp/ck"}
    ).streamWriter(schema, False)
    for obj in (ZeroRenameWriter(opts, "job"), ZeroRenameCommitMessage(result), stream_writer):
        blob: bytes = cloudpickle.dumps(obj)
        old = [o for o in MOVED if f"{PACKAGE}.{o}".encode() in blob]
        assert old == [], type(obj).__name__
