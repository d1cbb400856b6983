"""Task retries, attempts killed hard, failed jobs: exactly the accepted attempts' output,
and no pending upload or job record left behind."""

from __future__ import annotations

from typing import Any

import pytest

from zerorename.spark_adapter import read_success

pytestmark = pytest.mark.spark

N = 4000
PARTS = 4


@pytest.fixture(scope="module")
def faulty(spark: Any) -> Any:
    import faulty as mod  # tests/spark/faulty.py (pytest puts this directory on sys.path)

    mod.register_faulty(spark)
    return spark


def _write(spark: Any, zr: Any, mode: str = "append", **fault: str) -> None:
    df = spark.range(0, N, 1, PARTS).selectExpr("id", "repeat('x', 200) AS pad")
    (
        df.write.format("zerorename_faulty")
        .mode(mode)
        .options(**zr.options(partSize="5m"))
        .options(**fault)
        .save(zr.uri())
    )


def _assert_exact_output(zr: Any) -> None:
    keys = zr.data_keys()
    assert len(keys) == PARTS, keys  # one file per partition: the accepted attempts only
    assert sorted(k.split("-")[1] for k in keys) == [f"{i:05d}" for i in range(PARTS)]
    table = zr.read_parquet()
    assert sorted(table.column("id").to_pylist()) == list(range(N))
    assert zr.pending_uploads() == []
    assert [k for k in zr.list_keys() if "__magic" in k] == []


# every stage on moto, one on RGW: the stages differ in Spark and the writer, not in the
# store (each Spark write costs seconds of CPU; the store's side is tested without Spark)
@pytest.mark.parametrize(
    ("s3", "stage"),
    [("moto", "batch"), ("moto", "files_closed"), ("moto", "committed"), ("rgw", "committed")],
    indirect=["s3"],
)
def test_first_attempt_fails_then_retry(faulty: Any, zr_any: Any, stage: str) -> None:
    _write(
        faulty,
        zr_any,
        fault="raise",
        faultstage=stage,
        faultpartition="1",
        faultattempts="0",
        faultmark=zr_any.uri("marks"),
    )
    marks = set(zr_any.list_keys("marks"))
    assert "p1-a1-committed" in marks  # the retry is what committed
    assert ("p1-a0-committed" in marks) == (stage == "committed")
    _assert_exact_output(zr_any)
    info = read_success(zr_any.uri(), **zr_any.reader_options())
    assert info.files == PARTS and info.rows == N


@pytest.mark.parametrize(
    ("committer", "stage"),
    [("magic", "files_closed"), ("magic", "committed"), ("directory", "committed")],
)
def test_attempt_killed_hard_is_cleaned_at_commit(
    faulty: Any, zr: Any, committer: str, stage: str
) -> None:
    # os._exit: no finally, no abort; its uploads stay pending until job commit cleans them
    # (directory committer: uploaded at task commit, so only "committed" leaves uploads)
    _write(
        faulty,
        zr,
        committer=committer,
        fault="exit",
        faultstage=stage,
        faultpartition="2",
        faultattempts="0",
        faultmark=zr.uri("marks"),
    )
    # the scenario happened: attempt 0 closed its file (a pending upload) and then died
    marks = set(zr.list_keys("marks"))
    assert {"p2-a0-files_closed", "p2-a1-committed"} <= marks
    assert ("p2-a0-committed" in marks) == (stage == "committed")
    _assert_exact_output(zr)


@pytest.mark.parametrize(
    ("s3", "stage"),
    [("moto", "batch"), ("moto", "files_closed"), ("moto", "committed"), ("rgw", "files_closed")],
    indirect=["s3"],
)
def test_job_failure_leaves_nothing(faulty: Any, zr_any: Any, stage: str) -> None:
    from pyspark.errors import PythonException

    with pytest.raises(PythonException, match="injected failure"):
        _write(
            faulty,
            zr_any,
            fault="raise",
            faultstage=stage,
            faultpartition="1",
            faultattempts="all",
            faultmark=zr_any.uri("marks"),
        )
    marks = set(zr_any.list_keys("marks"))
    # something was written before the job failed: another task committed its file, and at
    # the later stages the failing attempt itself had closed (uploaded) its files
    assert "p0-a0-committed" in marks, marks
    if stage != "batch":
        assert "p1-a0-files_closed" in marks, marks
    assert zr_any.list_keys() == []
    assert zr_any.pending_uploads() == []


def test_job_failure_after_hard_kills_leaves_nothing(faulty: Any, zr: Any) -> None:
    from py4j.protocol import Py4JJavaError

    # Spark reports the crashed worker through the JVM's save() call
    with pytest.raises(Py4JJavaError, match="Python worker exited unexpectedly"):
        _write(
            faulty,
            zr,
            fault="exit",
            faultstage="files_closed",
            faultpartition="0",
            faultattempts="all",
            faultmark=zr.uri("marks"),
        )
    # the killed attempts had uploaded their files (left pending, never completed)
    assert "p0-a0-files_closed" in set(zr.list_keys("marks"))
    assert zr.list_keys() == []
    assert zr.pending_uploads() == []
