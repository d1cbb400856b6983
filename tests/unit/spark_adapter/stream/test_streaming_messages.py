"""The streaming writer's driver-side checks (no Spark session, no server): options and
output modes refused before any task, Spark's commit messages checked before anything is
committed, writers that carry no I/O and a new job per batch run."""

# ruff: noqa: E402 (the imports after need_module() need what it checks)
from __future__ import annotations

import pickle
from typing import Any

import pytest

from needs import need_module  # skipped, or failed under CI=true

need_module("pyspark")

from pyspark.sql.types import LongType, StringType, StructField, StructType

from zerorename.errors import ConfigError
from zerorename.spark_adapter.datasource import ZeroRenameDataSource
from zerorename.spark_adapter.errors import CommitMessageError, StreamLogError
from zerorename.spark_adapter.stream.log import stream_job_id
from zerorename.spark_adapter.stream.writer import (
    StreamCommitMessage,
    ZeroRenameStreamWriter,
    batch_of,
)
from zerorename.spark_adapter.write import TaskResult

Q = "11111111-2222-4333-8444-555555555555"
SCHEMA = StructType([StructField("id", LongType()), StructField("s", StringType())])


def writer(overwrite: bool = False, **options: str) -> ZeroRenameStreamWriter:
    opts: dict[str, Any] = {"path": "s3://b/out", "checkpointLocation": "/tmp/ck", **options}
    return ZeroRenameDataSource(opts).streamWriter(SCHEMA, overwrite)


def test_a_writer_is_options_and_a_token() -> None:
    a, b = writer(), writer()
    assert a.token != b.token  # Spark builds one per batch: each run of a batch a new job
    assert a.opts.unknown == ()  # checkpointLocation is known
    assert pickle.loads(pickle.dumps(a)).token == a.token


@pytest.mark.parametrize(
    ("overwrite", "options", "match"),
    [
        (True, {}, r"outputMode\('append'\) only"),
        (False, {"conflict": "replace"}, "not for streams"),
        (False, {"conflict": "fail"}, "not for streams"),
        (False, {"format": "text"}, "one string column"),
        (False, {"partitionBy": "nope"}, "nope"),
    ],
)
def test_refused_before_any_task(overwrite: bool, options: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        writer(overwrite, **options)


def message(partition: int, batch: int = 3, job: str | None = None, query: str = Q) -> Any:
    job = job or stream_job_id(Q, "t", batch)
    return StreamCommitMessage(
        TaskResult(partition, 0, partition, 1, 1, 1, None), query, batch, job
    )


def test_messages_give_the_batch_job() -> None:
    got = batch_of([message(0), message(1)], 3)
    assert got is not None
    query, job, results = got
    assert (query, job, [r.partition for r in results]) == (Q, stream_job_id(Q, "t", 3), [0, 1])
    assert batch_of([], 3) is None


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ([message(0), None], "no commit message"),
        ([message(0), message(0)], "two accepted attempts"),
        ([message(0), message(1, job=stream_job_id(Q, "u", 3))], "2 jobs"),
        ([message(0, batch=2)], "messages of batch 2"),
    ],
)
def test_bad_messages_commit_nothing(messages: list[Any], match: str) -> None:
    with pytest.raises(CommitMessageError, match=match):
        batch_of(messages, 3)


def test_a_bad_query_id_is_refused() -> None:
    with pytest.raises(StreamLogError, match="not a UUID"):
        batch_of([message(0, query="../other")], 3)
