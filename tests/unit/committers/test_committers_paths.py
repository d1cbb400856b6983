"""Pure path logic: destinations, magic mapping (reference 001 / paper table III), naming."""

from __future__ import annotations

import uuid

import pytest

from zerorename.committers.errors import InvalidJobId, PathError
from zerorename.committers.paths import (
    Destination,
    JobLayout,
    check_job_id,
    check_partitioned_path,
    check_relative_path,
    is_job_record,
    job_id_of_dir,
    job_id_of_key,
    key_carries_job,
    magic_destination,
    new_job_id,
    output_name,
    parse_hive_partition,
    partition_of,
    pending_record_destination,
    task_name,
    with_job_id,
)

JOB = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"


@pytest.mark.parametrize(
    ("original", "final"),
    [
        ("dest", "dest"),
        ("dest/__magic/1", "dest/1"),
        ("dest/__magic/1/2", "dest/1/2"),
        ("dest/__magic/job1/task003/__base/3", "dest/3"),
        ("dest/__magic/job2/task004/__base/4/5", "dest/4/5"),
        ("dest/__magic/1/2.pending", "dest/__magic/1/2.pending"),
        ("dest/__magic/job1/task003.pendingset", "dest/__magic/job1/task003.pendingset"),
        (f"dest/__magic_job-{JOB}/tasks/00003-1/__base/y=2024/a b.csv", "dest/y=2024/a b.csv"),
        # the last __base sets the base
        ("d/__magic/j/t/__base/x/__base/z", "d/z"),
        ("__magic/j/__base/top", "top"),
    ],
)
def test_magic_mapping_table(original: str, final: str) -> None:
    assert magic_destination(original) == final


def test_pending_record_destination_uses_layout() -> None:
    dest = Destination.parse("s3://b/out/data set ü")
    lay = JobLayout(dest, JOB)
    rec = lay.pending_record(3, 1, "k=v 1/part #1+%.csv")
    assert rec.startswith(f"out/data set ü/__magic_job-{JOB}/tasks/00003-1/__base/")
    assert pending_record_destination(rec) == "out/data set ü/k=v 1/part #1+%.csv"
    with pytest.raises(PathError):
        pending_record_destination("a/b.csv")


def test_destination_parse_and_list_prefix() -> None:
    d = Destination.parse("s3://bucket/dataset1/")
    assert (d.bucket, d.prefix, d.list_prefix) == ("bucket", "dataset1", "dataset1/")
    assert d.rel("dataset10/x") is None
    assert d.rel("dataset1/x") == "x"
    assert d.rel("dataset1/") is None
    root = Destination.parse("s3a://bucket")
    assert root.list_prefix == "" and root.key("a") == "a" and root.uri == "s3://bucket"
    for bad in ("http://x/y", "s3://", "s3:///k", "s3://b//k"):
        with pytest.raises(PathError):
            Destination.parse(bad)


@pytest.mark.parametrize(
    "uri",
    [
        "s3://b//",  # s3://b/$UNSET/
        "s3://b///x",
        "s3://b//x",
        "s3://b/x//",
        "s3://b/x//y",
        "s3://b/x///",
        "s3://b/./x",
        "s3://b/x/..",
        "s3://b/x/../y",
    ],
)
def test_destination_refuses_empty_components(uri: str) -> None:
    with pytest.raises(PathError, match="component"):
        Destination.parse(uri)


def test_destination_whole_bucket_is_explicit() -> None:
    for uri in ("s3://bkt", "s3://bkt/"):
        d = Destination.parse(uri)
        assert d.prefix == "" and d.whole_bucket and d.list_prefix == ""
    d = Destination.parse("s3://bkt/x/")  # one trailing '/' is fine
    assert d.prefix == "x" and not d.whole_bucket
    with pytest.raises(PathError, match="bucket"):
        Destination.parse("s3://b:k/x")


def test_job_ids_are_random_uuids() -> None:
    ids = {new_job_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(uuid.UUID(i).version == 4 for i in ids)
    assert check_job_id(JOB.upper()) == JOB
    with pytest.raises(InvalidJobId):
        check_job_id("job_20240101120000_0001")
    with pytest.raises(InvalidJobId):
        check_job_id(str(uuid.uuid1()))


def test_relative_path_validation_keeps_odd_characters() -> None:
    for ok in ("a b/c d.csv", "ü/ß€.txt", "p%2F+#/x", "x"):
        assert check_relative_path(ok) == ok
    for bad in (
        "",
        "/a",
        "a/",
        "a//b",
        "a/../b",
        "./a",
        "__magic/x",
        "a/__base/b",
        "_SUCCESS",
        "x.pending",
        "x.pendingset",
        "__magic_job-1/x",
    ):
        with pytest.raises(PathError):
            check_relative_path(bad)


def test_with_job_id_and_output_name() -> None:
    assert (
        with_job_id("a=1/part-00003.snappy.parquet", JOB) == f"a=1/part-00003-{JOB}.snappy.parquet"
    )
    assert with_job_id("noext", JOB) == f"noext-{JOB}"
    assert with_job_id(".hidden", JOB) == f".hidden-{JOB}"
    assert with_job_id("d/.h.x", JOB) == f"d/.h-{JOB}.x"
    already = f"d/part-{JOB}.csv"
    assert with_job_id(already, JOB) == already
    # the job id in a directory name does not count: the file name must carry it
    assert with_job_id(f"{JOB}/x.csv", JOB) == f"{JOB}/x-{JOB}.csv"
    name = output_name(3, JOB, "csv")
    assert name == f"part-00003-{JOB}-c000.csv"
    assert key_carries_job("d/" + name, JOB)
    assert with_job_id("d/" + name, JOB) == "d/" + name  # Spark's names are in the slot
    assert output_name(12, JOB, ".parquet", file_index=2).endswith("-c002.parquet")


def test_with_job_id_puts_the_id_in_the_slot_unless_exactly_there() -> None:
    other = "11111111-2222-4333-8444-555555555555"
    # the id anywhere but the slot is not "already there" (it used to be kept as is)
    assert with_job_id(f"rerun-of-{JOB}-x.csv", JOB) == f"rerun-of-{JOB}-x-{JOB}.csv"
    assert with_job_id(f"{JOB}.csv", JOB) == f"{JOB}-{JOB}.csv"
    assert with_job_id(f"x.{JOB}.csv", JOB) == f"x-{JOB}.{JOB}.csv"
    # another job's name gets this job's id after it: then it is this job's
    assert with_job_id(f"x-{other}.csv", JOB) == f"x-{other}-{JOB}.csv"
    assert with_job_id("...", JOB) == f"...-{JOB}"
    with pytest.raises(InvalidJobId):
        with_job_id("x.csv", "not-a-job")


@pytest.mark.parametrize(
    ("key", "owner"),
    [
        (f"d/x-{JOB}.csv", JOB),
        (f"d/part-00003-{JOB}-c000.snappy.parquet", JOB),
        (f"d/.h-{JOB}.x", JOB),
        (f"d/...-{JOB}", JOB),
        (f"d/x-{JOB}", JOB),
        (f"run={JOB}/x.csv", None),  # a directory never counts
        (f"d/rerun-of-{JOB}-x.csv", None),  # mid-stem
        (f"d/x.{JOB}.csv", None),  # after the stem
        (f"d/{JOB}.csv", None),  # no '-' before it
        (f"d/x-{JOB}ff.csv", None),  # inside a longer hex run
        (f"d/x-{JOB.upper()}.csv", None),  # not the canonical form
        (f"d/x-{JOB}-c.csv", None),
        (f"d/x-{JOB}-draft.csv", None),
        (f"d/x-{JOB}/y.csv", None),
        ("d/x-6f1c2b9e-8a4d-1c57-9a0e-3b2f1d0c9e8a.csv", None),  # a time-based UUID
    ],
)
def test_ownership_is_the_naming_rules_slot(key: str, owner: str | None) -> None:
    assert job_id_of_key(key) == owner
    assert key_carries_job(key, JOB) is (owner == JOB)


def test_task_names() -> None:
    assert task_name(3) == "00003"
    assert task_name("stage-1.task_7") == "stage-1.task_7"
    for bad in (-1, "a/b", "", "x y", True):
        with pytest.raises(PathError):
            task_name(bad)  # type: ignore[arg-type]


def test_hive_partitions() -> None:
    assert partition_of("y=2024/m=01/part.csv") == "y=2024/m=01"
    assert partition_of("part.csv") == ""
    assert parse_hive_partition("y=2024/city=New%20York") == (("y", "2024"), ("city", "New York"))
    assert parse_hive_partition("k=") == (("k", ""),)
    for bad in ("", "y=2024/notkv", "=v"):
        with pytest.raises(PathError):
            parse_hive_partition(bad)
    assert check_partitioned_path("y=1/f.csv") == "y=1"
    with pytest.raises(PathError):
        check_partitioned_path("f.csv")
    with pytest.raises(PathError):
        check_partitioned_path("plain/f.csv")


def test_job_records_and_dirs() -> None:
    assert is_job_record(f"__magic_job-{JOB}/job.json")
    assert is_job_record("x/__magic/y")
    assert not is_job_record("__magic_lookalike.csv")
    assert job_id_of_dir(f"__magic_job-{JOB}/") == JOB
    assert job_id_of_dir("__magic_job-nope") is None
    assert job_id_of_dir("data") is None
