"""Hadoop S3A's magic layout (committers.s3alayout): pure, no I/O. Keys a store lists are
classified or refused in one line; nothing outside the job's directory is ever the job's."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerorename.committers.errors import PathError
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.layout import (
    S3AJobLayout,
    S3AKind,
    attempt_of,
    check_output_key,
    check_s3a_job_id,
    final_rel,
    job_id_of_dir,
    owns_record_job,
)

JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
DEST = Destination.parse("s3://b/tables/dätä sét #1+%/events")
LAY = S3AJobLayout(DEST, JOB)
ROOT = f"tables/dätä sét #1+%/events/__magic_job-{JOB}/"

ids = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
components = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="/"), min_size=1, max_size=8
).filter(lambda c: c not in (".", "..") and not c.startswith("__magic") and c != "__base")
rels = st.lists(components, min_size=1, max_size=4).map("/".join).filter(lambda r: r != "_SUCCESS")


def test_the_layout_is_hadoops() -> None:
    assert LAY.root == ROOT
    assert LAY.attempts_dir == f"{ROOT}job-{JOB}/"
    assert LAY.attempt_dir(0) == f"{ROOT}job-{JOB}/00/"
    assert LAY.attempt_dir(12) == f"{ROOT}job-{JOB}/12/"
    task = "task_202601010000_0000_m_000003"
    assert LAY.pendingset(0, task) == f"{ROOT}job-{JOB}/00/{task}.pendingset"
    ta = "attempt_202601010000_0000_m_000003_1"
    assert (
        LAY.pending(1, ta, "day=2/part 1.parquet")
        == f"{ROOT}job-{JOB}/01/tasks/{ta}/__base/day=2/part 1.parquet.pending"
    )
    assert LAY.success == "tables/dätä sét #1+%/events/_SUCCESS"
    whole = S3AJobLayout(Destination.parse("s3://b"), JOB)
    assert whole.root == f"__magic_job-{JOB}/"


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "-x", "_x", "é", "a b", "x" * 129, "a\n"])
def test_job_ids_s3a_could_not_make_are_refused(bad: str) -> None:
    with pytest.raises(PathError, match="S3A job id"):
        check_s3a_job_id(bad)
    with pytest.raises(PathError):
        S3AJobLayout(DEST, bad)


def test_ids_s3a_makes_are_taken() -> None:
    for good in (JOB, "job_1700000000000_0001", "local1234"):
        assert check_s3a_job_id(good) == good


def test_attempts_are_spelled_as_s3a_spells_them() -> None:
    assert attempt_of("00") == 0 and attempt_of("07") == 7 and attempt_of("100") == 100
    for bad in ("7", "007", "0x", "", "-1", "١٢"):
        assert attempt_of(bad) is None


def test_classify_what_a_job_directory_holds() -> None:
    task = "task_202601010000_0000_m_000000"
    ps = LAY.classify(LAY.pendingset(0, task))
    assert (ps.kind, ps.attempt, ps.task) == (S3AKind.PENDINGSET, 0, task)
    ta = "attempt_202601010000_0000_m_000001_0"
    pe = LAY.classify(LAY.pending(0, ta, "a/b c.parquet"))
    assert (pe.kind, pe.attempt, pe.task, pe.rel) == (S3AKind.PENDING, 0, ta, "a/b c.parquet")
    assert LAY.final_key(pe) == DEST.key("a/b c.parquet")
    # the 0-byte file a magic stream leaves at the magic path is no record
    marker = LAY.classify(f"{ROOT}job-{JOB}/00/tasks/{ta}/__base/a/b c.parquet")
    assert marker.kind is S3AKind.OTHER
    assert LAY.classify(ROOT).kind is S3AKind.DIRECTORY
    assert LAY.classify(f"{ROOT}job-{JOB}/00/").kind is S3AKind.DIRECTORY
    # another job's attempts directory inside ours, a bad attempt: the job's by structure
    assert LAY.classify(f"{ROOT}job-other/00/t.pendingset").kind is S3AKind.OTHER
    assert LAY.classify(f"{ROOT}job-{JOB}/0/t.pendingset").kind is S3AKind.OTHER
    # a .pending outside __base maps to its file name (Hadoop's finalDestination)
    flat = LAY.classify(f"{ROOT}job-{JOB}/00/tasks/{ta}/x/y.pending")
    assert flat.kind is S3AKind.PENDING and flat.rel == "y"
    # a .pending whose path maps to nothing usable carries no target: refused when read
    empty = LAY.classify(f"{ROOT}job-{JOB}/00/tasks/{ta}/__base/.pending")
    assert empty.kind is S3AKind.PENDING and empty.rel is None


@pytest.mark.parametrize(
    "key",
    [
        f"tables/dätä sét #1+%/events/__magic_job-{JOB}",  # the bare name, no '/'
        f"tables/dätä sét #1+%/events/__magic_job-{JOB}0/job-{JOB}0/00/t.pendingset",
        f"tables/dätä sét #1+%/events/__magic_job-{JOB[:-1]}/x",
        "tables/dätä sét #1+%/events/part-0.parquet",
        f"tables/dätä sét #1+%/events10/__magic_job-{JOB}/job-{JOB}/00/t.pendingset",
        f"other/__magic_job-{JOB}/job-{JOB}/00/t.pendingset",
        "",
    ],
)
def test_keys_outside_the_job_directory_are_refused(key: str) -> None:
    with pytest.raises(PathError, match="is not inside S3A job") as ei:
        LAY.classify(key)
    assert "\n" not in str(ei.value)


@settings(max_examples=300)
@given(st.text(max_size=80), st.sampled_from(["", ROOT, ROOT + f"job-{JOB}/00/"]))
def test_any_listed_key_is_classified_or_refused(tail: str, head: str) -> None:
    key = head + tail
    try:
        entry = LAY.classify(key)
    except PathError as exc:
        assert not key.startswith(ROOT) and "\n" not in str(exc)
        return
    assert key.startswith(ROOT) and entry.key == key
    if entry.kind is S3AKind.PENDINGSET:
        assert entry.attempt is not None and entry.task is not None
        assert LAY.pendingset(entry.attempt, entry.task) == key
    if entry.kind is S3AKind.PENDING and entry.rel is not None:
        target = LAY.final_key(entry)
        assert target is not None and check_output_key(DEST, "b", target) is None


@given(st.integers(0, 999), ids, ids, rels)
def test_records_round_trip_through_classify(attempt: int, task: str, ta: str, rel: str) -> None:
    ps = LAY.classify(LAY.pendingset(attempt, task))
    assert (ps.kind, ps.attempt, ps.task) == (S3AKind.PENDINGSET, attempt, task)
    pe = LAY.classify(LAY.pending(attempt, ta, rel))
    assert (pe.kind, pe.attempt, pe.task, pe.rel) == (S3AKind.PENDING, attempt, ta, rel)


def test_job_directories_listed_under_a_destination() -> None:
    assert job_id_of_dir(DEST, ROOT) == JOB
    assert job_id_of_dir(DEST, DEST.key("__magic_job-job_1_2/")) == "job_1_2"
    for other in (
        ROOT[:-1],  # not a directory
        ROOT + "job-x/",  # deeper
        DEST.key("__magic/"),
        DEST.key("__magic_job-/"),
        DEST.key("__magic_job-a b/"),
        "tables/dätä sét #1+%/events10/" + f"__magic_job-{JOB}/",
        DEST.key("part-0/"),
    ):
        assert job_id_of_dir(DEST, other) is None, other


#: listed names built from the layout: most are real job directories, some near misses
#: (a character off: no slash, a second level, an empty or spaced id, another prefix), some noise
job_dirs = ids.map(lambda i: f"__magic_job-{i}/")
near_misses = st.one_of(
    ids.map(lambda i: f"__magic_job-{i}"),  # not a directory
    st.tuples(ids, ids).map(lambda t: f"__magic_job-{t[0]}/{t[1]}/"),  # deeper
    st.just("__magic_job-/"),
    ids.map(lambda i: f"__magic_job-{i} x/"),
    ids.map(lambda i: f"__magic-{i}/"),
    ids.map(lambda i: f"__magic_jobs-{i}/"),
    ids.map(lambda i: f"x/__magic_job-{i}/"),
)
listed = st.one_of(job_dirs, job_dirs, job_dirs, near_misses, st.text(max_size=60))


@given(listed)
def test_any_listed_prefix_names_a_job_whose_root_it_is_or_none(name: str) -> None:
    prefix = DEST.key(name)
    job = job_id_of_dir(DEST, prefix)
    if job is None:
        # only a real job directory names a job: every near miss is refused
        assert not re.fullmatch(r"__magic_job-[A-Za-z0-9][A-Za-z0-9._-]*/", name), name
    else:
        assert S3AJobLayout(DEST, job).root == prefix
        assert name == f"__magic_job-{job}/"


@given(job_dirs)
def test_a_job_directory_always_names_its_job(name: str) -> None:
    job = job_id_of_dir(DEST, DEST.key(name))
    assert job is not None and name == f"__magic_job-{job}/"


def test_output_keys_a_record_may_name() -> None:
    assert check_output_key(DEST, "b", DEST.key("a/part-0.parquet")) is None
    refused = {
        ("c", DEST.key("a")): "bucket",
        ("b", "tables/dätä sét #1+%/events10/a"): "outside",
        ("b", "tables/dätä sét #1+%/events"): "outside",
        ("b", DEST.key(f"__magic_job-{JOB}/x")): "magic",
        ("b", DEST.key("a/__magic/x")): "magic",
        ("b", DEST.key("a//x")): "empty",
        ("b", DEST.key("a/../x")): "empty",
        ("b", DEST.key("_SUCCESS")): "_SUCCESS",
    }
    for (bucket, key), word in refused.items():
        problem = check_output_key(DEST, bucket, key)
        assert problem is not None and word in problem, (bucket, key, problem)


def test_final_rel_is_hadoops_final_destination() -> None:
    assert final_rel(["a", "__base", "b", "c"]) == "b/c"
    assert final_rel(["a", "b", "c"]) == "c"
    assert final_rel(["__base", "b", "__base", "c"]) is None  # a reserved name in the output
    assert final_rel(["a", "__base"]) is None
    assert final_rel(["__base", "x", "..", "y"]) is None


def test_records_of_the_job_or_of_none() -> None:
    assert owns_record_job(JOB, JOB) and owns_record_job(JOB, "")
    assert not owns_record_job(JOB, "job_1_2") and not owns_record_job(JOB, JOB.upper())


@given(st.text(max_size=140))
def test_any_job_id_a_user_gives_is_taken_whole_or_refused_in_one_line(text: str) -> None:
    try:
        job = check_s3a_job_id(text)
    except PathError as exc:
        assert "\n" not in str(exc).replace(repr(text), "")
        return
    lay = S3AJobLayout(DEST, job)
    assert job == text and job_id_of_dir(DEST, lay.root) == job
    assert lay.classify(lay.attempts_dir + "00/t.pendingset").kind is S3AKind.PENDINGSET
