"""The commit's writer options (commitConcurrency, stagingDir, ...): parsing, defaults,
refusals, the staging directory's choice, and what streams refuse (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers import CommitOptions
from zerorename.spark_adapter.commitopts import (
    COMMIT_OPTION_DOCS,
    CommitSettings,
    spark_local_dir,
)
from zerorename.spark_adapter.errors import OptionError
from zerorename.spark_adapter.options import OPTION_DOCS, WriteOptions
from zerorename.spark_adapter.stream.writer import check_stream_options

BASE = {"path": "s3://b/p"}


def test_no_commit_option_gives_the_committers_defaults() -> None:
    got = WriteOptions.parse(BASE).commit.commit_options(env={}, tempdir="/t")
    assert got == CommitOptions(staging_dir=Path("/t"))


def test_every_commit_option_reaches_commit_options_any_key_case() -> None:
    o = WriteOptions.parse(
        {
            **BASE,
            "COMMITCONCURRENCY": "3",
            "commitWindow": "5",
            "commitscanconcurrency": "7",
            "taskCommitConcurrency": "2",
            "commitProgressInterval": "2.5",
            "rollbackOnFailure": "false",
            "pendingRecords": "no",
            "writeSuccess": "0",
            "stagingDir": " /data/stage ",
            "lockWait": "0",
            "lockStaleAfter": "60",
        }
    )
    assert o.unknown == ()
    assert o.commit.commit_options(env={"SPARK_LOCAL_DIRS": "/x"}, tempdir="/t") == (
        CommitOptions(
            concurrency=3,
            window=5,
            scan_concurrency=7,
            task_concurrency=2,
            progress_interval=2.5,
            rollback_on_failure=False,
            pending_records=False,
            write_success=False,
            staging_dir=Path("/data/stage"),
            lock_wait=0.0,
            lock_stale_after=60.0,
        )
    )


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("commitConcurrency", "0", "commitConcurrency must be >= 1, got 0"),
        ("commitWindow", "many", "commitWindow must be an integer, got 'many'"),
        ("taskCommitConcurrency", "-1", "taskCommitConcurrency must be >= 1"),
        ("commitProgressInterval", "0", "commitProgressInterval must be > 0 seconds"),
        ("lockWait", "-1", "lockWait must be >= 0 seconds"),
        ("lockStaleAfter", "nan", "lockStaleAfter must be >= 0 seconds"),
        ("lockWait", "soon", "lockWait must be a number of seconds"),
        ("writeSuccess", "maybe", "writeSuccess must be true or false, got 'maybe'"),
        ("stagingDir", "relative/dir", "stagingDir must be an absolute local path"),
    ],
)
def test_a_bad_commit_option_is_refused_in_one_line(key: str, value: str, says: str) -> None:
    with pytest.raises(OptionError) as exc:
        WriteOptions.parse({**BASE, key: value})
    assert says in str(exc.value) and "\n" not in str(exc.value)


@given(st.dictionaries(st.sampled_from(sorted(COMMIT_OPTION_DOCS)), st.text(max_size=12)))
def test_any_commit_option_text_parses_or_is_refused_with_option_error(
    opts: dict[str, str],
) -> None:
    try:
        got = CommitSettings.parse({k.lower(): v for k, v in opts.items()})
    except OptionError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(got.commit_options(env={}, tempdir="/t"), CommitOptions)


def test_the_options_table_has_every_commit_option() -> None:
    assert set(COMMIT_OPTION_DOCS) <= set(OPTION_DOCS)
    fields = {f for f in CommitOptions.__dataclass_fields__}
    assert len(COMMIT_OPTION_DOCS) == len(fields)  # one option per CommitOptions field


# ---------------------------------------------------------------- where tasks stage


def test_staging_defaults_to_sparks_local_dirs_then_yarns_then_the_temp_dir() -> None:
    env = {"SPARK_LOCAL_DIRS": "/d1/blockmgr-a,/d2/blockmgr-b", "LOCAL_DIRS": "/yarn"}
    assert spark_local_dir(env, "/tmp", pick=0) == Path("/d1/blockmgr-a")
    assert spark_local_dir(env, "/tmp", pick=3) == Path("/d2/blockmgr-b")  # spread by pick
    assert spark_local_dir({"SPARK_LOCAL_DIRS": " , ", "LOCAL_DIRS": "/y1,/y2"}, "/t") == Path(
        "/y1"
    )
    assert spark_local_dir({}, "/tmp/x") == Path("/tmp/x")


def test_the_option_wins_over_sparks_local_dirs() -> None:
    o = WriteOptions.parse({**BASE, "stagingDir": "/mine"})
    assert o.commit.commit_options(env={"SPARK_LOCAL_DIRS": "/spark"}).staging_dir == Path("/mine")
    d = WriteOptions.parse(BASE).commit.commit_options(env={"SPARK_LOCAL_DIRS": "/spark"})
    assert d.staging_dir == Path("/spark")


# ---------------------------------------------------------------- streams


def test_streams_keep_no_success_and_no_rollback_but_take_the_tuning() -> None:
    o = WriteOptions.parse({**BASE, "commitConcurrency": "4", "stagingDir": "/s"})
    check_stream_options(o, overwrite=False)
    got = o.commit.stream_commit_options(env={})
    assert (got.write_success, got.rollback_on_failure) == (False, False)
    assert (got.concurrency, got.staging_dir) == (4, Path("/s"))


@pytest.mark.parametrize("key", ["writeSuccess", "rollbackOnFailure"])
def test_a_stream_refuses_what_its_batches_never_do(key: str) -> None:
    o = WriteOptions.parse({**BASE, key: "true"})
    with pytest.raises(OptionError, match=f"option '{key}' is not for streams") as exc:
        check_stream_options(o, overwrite=False)
    assert "\n" not in str(exc.value)
