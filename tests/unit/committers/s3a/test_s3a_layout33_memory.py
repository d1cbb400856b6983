"""Hadoop 3.3's S3A magic layout: every job of a destination in one shared ``dest/__magic/``,
each under its own ``job-<uuid>/`` (with ``<NN>/`` attempt directories in later 3.3
releases, without in 3.3.1-3.3.4). The path rules (pure), then list, show, resume and abort
on the in-memory store: two 3.3 jobs side by side and one of 3.4 beside them; a command on
one never touches another's records or uploads, and ``__magic/`` itself goes only with the
last of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerorename.committers import CommitOptions, ConflictError, MagicCommitter
from zerorename.committers.commit.scan import s3a_job_of
from zerorename.committers.errors import CommitterError, JobNotFound, PathError
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.jobs import (
    abort_s3a_job,
    list_s3a_jobs,
    resume_s3a_job,
    show_s3a_job,
)
from zerorename.committers.s3a.layout import (
    FLAT,
    S3AJobLayout,
    S3AKind,
    S3ALayoutKind,
    attempt_label,
    job_id_of_shared_dir,
)
from zerorename.committers.s3a.read import find_s3a_job
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore
from zerorename.testing.s3acrash import lay_out_on, s3a_pendingset

B = "bucket"
URI = f"s3://{B}/s3a/out"
DEST = Destination.parse(URI)
JOB = "3f2a9c1e-6c0b-4d57-9a59-0123456789ab"
OTHER = "9d7c1b2a-1111-4222-8333-444455556666"
NEW = "5e6f7a8b-2222-4333-8444-555566667777"  # a Hadoop 3.4 job beside them
MAGIC = "s3a/out/__magic/"
H33 = S3ALayoutKind.HADOOP_33


def lay33(job: str) -> S3AJobLayout:
    return S3AJobLayout(DEST, job, H33)


# -- the path rules (pure) ----------------------------------------------------------------


def test_a_33_jobs_directory_is_inside_the_shared_magic_directory() -> None:
    lay = lay33(JOB)
    assert lay.root == f"{MAGIC}job-{JOB}/" and lay.attempts_dir == lay.root
    assert lay.attempt_dir(FLAT) == lay.root and lay.attempt_dir(0) == f"{lay.root}00/"
    assert (
        lay.pendingset(FLAT, "task_1_0000_m_000000") == f"{lay.root}task_1_0000_m_000000.pendingset"
    )
    assert (
        lay.pending(FLAT, "attempt_1_0000_m_000000_0", "a/b.parquet")
        == f"{lay.root}tasks/attempt_1_0000_m_000000_0/__base/a/b.parquet.pending"
    )
    # 3.4's is unchanged, and another job's 3.3 directory is never this one's
    assert S3AJobLayout(DEST, JOB).root == f"s3a/out/__magic_job-{JOB}/"
    with pytest.raises(PathError):
        lay.classify(f"{MAGIC}job-{OTHER}/task_1.pendingset")
    with pytest.raises(PathError):
        lay.classify(f"{MAGIC}job-{JOB}x/task_1.pendingset")  # a longer id: not inside
    with pytest.raises(PathError):
        S3AJobLayout(DEST, JOB, H33).classify(
            f"s3a/out/__magic_job-{JOB}/job-{JOB}/00/t.pendingset"
        )


@pytest.mark.parametrize(
    ("rest", "kind", "attempt", "task", "rel"),
    [
        ("task_1_0000_m_000000.pendingset", S3AKind.PENDINGSET, FLAT, "task_1_0000_m_000000", None),
        ("00/task_1_0000_m_000000.pendingset", S3AKind.PENDINGSET, 0, "task_1_0000_m_000000", None),
        (
            "tasks/att_0/__base/d=1/p.parquet.pending",
            S3AKind.PENDING,
            FLAT,
            "att_0",
            "d=1/p.parquet",
        ),
        ("01/tasks/att_0/__base/p.parquet.pending", S3AKind.PENDING, 1, "att_0", "p.parquet"),
        ("tasks/att_0/__base/p.parquet", S3AKind.OTHER, FLAT, "att_0", None),  # the 0-byte file
        ("00/", S3AKind.DIRECTORY, None, None, None),
        ("", S3AKind.DIRECTORY, None, None, None),
        ("tasks/att_0/__base/_SUCCESS.pending", S3AKind.PENDING, FLAT, "att_0", None),
        ("7/task_1.pendingset", S3AKind.OTHER, FLAT, None, None),  # not S3A's %02d
    ],
)
def test_33_keys_are_classified(
    rest: str, kind: S3AKind, attempt: int | None, task: str | None, rel: str | None
) -> None:
    got = lay33(JOB).classify(f"{MAGIC}job-{JOB}/{rest}")
    assert (got.kind, got.attempt, got.task, got.rel) == (kind, attempt, task, rel)


def test_34_keys_without_an_attempt_directory_are_no_records() -> None:
    """Only 3.3 has records right in the job's directory; 3.4's rules are as before."""
    lay = S3AJobLayout(DEST, JOB)
    got = lay.classify(f"{lay.attempts_dir}task_1.pendingset")
    assert got.kind is S3AKind.OTHER
    assert lay.classify(f"{lay.attempts_dir}00/task_1.pendingset").kind is S3AKind.PENDINGSET


def test_shared_directory_names() -> None:
    assert job_id_of_shared_dir(DEST, f"{MAGIC}job-{JOB}/") == JOB
    assert job_id_of_shared_dir(DEST, f"{MAGIC}app-attempt-0000/") is None  # Hadoop 3.3.0
    assert job_id_of_shared_dir(DEST, f"{MAGIC}job-/") is None
    assert job_id_of_shared_dir(DEST, f"{MAGIC}job-{JOB}") is None
    assert job_id_of_shared_dir(DEST, f"s3a/out10/__magic/job-{JOB}/") is None
    assert attempt_label(FLAT) == "" and attempt_label(3) == "03"


@settings(max_examples=100, deadline=None)  # pure; the machine may be loaded
@given(st.text(alphabet="ab/_.0123456789-tasks", max_size=40))
def test_any_key_in_a_33_job_directory_classifies(rest: str) -> None:
    lay = lay33(JOB)
    got = lay.classify(lay.root + rest)
    assert got.kind in S3AKind
    if got.kind is S3AKind.PENDING and got.rel is not None:
        assert lay.final_key(got) == DEST.key(got.rel)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_a_shared_directory_name_is_none_or_exactly_a_jobs(rest: str) -> None:
    job = job_id_of_shared_dir(DEST, MAGIC + rest)
    assert job is None or rest == f"job-{job}/"


# -- on the in-memory store -----------------------------------------------------------------


async def lay_out33(store: MemoryStore, job: str, *, attempts: bool) -> S3AJobLayout:
    """A crashed 3.3 job: two committed tasks (the first's uploads completed by the commit
    that died), one task attempt that never committed."""
    lay, _ = await lay_out_on(store, URI, job, H33, 0 if attempts else FLAT)
    return lay


async def three_jobs() -> MemoryState:
    state = MemoryState(B)
    store = MemoryStore(state)
    await lay_out33(store, JOB, attempts=False)
    await lay_out33(store, OTHER, attempts=True)
    await lay_out_on(store, URI, NEW)
    return state


def of(state: MemoryState, job: str) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    """A job's objects (records and outputs) and pending uploads."""
    return (
        {k: v for k, v in state.objects(B).items() if job in k},
        [u for u in state.pending(B) if job in u[0]],
    )


async def test_list_and_show_find_both_layouts() -> None:
    state = await three_jobs()
    store = MemoryStore(state)
    jobs = {j.job_id: j async for j in list_s3a_jobs(store, DEST)}
    assert set(jobs) == {JOB, OTHER, NEW}
    assert jobs[JOB].layout is H33 and jobs[OTHER].layout is H33
    assert jobs[NEW].layout is S3ALayoutKind.HADOOP_34
    assert jobs[JOB].state == "2 committed tasks, 2 open task records, in __magic/ (Hadoop 3.3)"
    assert jobs[NEW].state == "2 committed tasks, 2 open task records"
    assert jobs[JOB].attempts == (FLAT,) and jobs[OTHER].attempts == (0,)
    shown = await show_s3a_job(store, DEST, JOB)
    assert shown["layout"] == "hadoop-3.3" and shown["attempts"] == []
    assert shown["directory"] == f"s3://{B}/{MAGIC}job-{JOB}/"
    assert shown["uploads"] == {"pending": 2, "completed": 2, "missing": 0}
    assert (await show_s3a_job(store, DEST, OTHER))["attempts"] == ["00"]
    assert "layout" not in await show_s3a_job(store, DEST, NEW)  # 3.4's output as before


async def test_resume_and_abort_side_by_side_touch_only_their_job() -> None:
    state = await three_jobs()
    other_before, new_before = of(state, OTHER), of(state, NEW)
    res = await resume_s3a_job(MemoryStore(state), DEST, JOB)
    assert (res.files, res.completed_now, res.open_uploads_aborted) == (4, 2, 2)
    objs, ups = of(state, JOB)
    assert not [k for k in objs if k.startswith(MAGIC)] and ups == []
    assert len([k for k in objs if k.endswith(".csv")]) == 4
    assert json.loads(state.objects(B)["s3a/out/_SUCCESS"])["jobId"] == JOB
    assert of(state, OTHER) == other_before and of(state, NEW) == new_before
    assert MAGIC in state.objects(B)  # OTHER is still in the shared directory
    ab = await abort_s3a_job(MemoryStore(state), DEST, OTHER)
    assert ab.uploads_aborted == 4 and len(ab.maybe_completed) == 2
    objs, ups = of(state, OTHER)
    assert not [k for k in objs if k.startswith(MAGIC)] and ups == []
    assert of(state, NEW) == new_before
    # the last 3.3 job gone, so is the shared directory's marker; 3.4's job is untouched
    assert [k for k in state.objects(B) if k.startswith(MAGIC)] == []


async def test_the_shared_directory_stays_while_anything_else_is_in_it() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    await lay_out33(store, JOB, attempts=True)
    await store.put_object(B, f"{MAGIC}app-attempt-0000/task.pendingset", b"{}")  # 3.3.0's
    await abort_s3a_job(store, DEST, JOB)
    assert sorted(k for k in state.objects(B) if k.startswith(MAGIC)) == [
        MAGIC,
        f"{MAGIC}app-attempt-0000/task.pendingset",
    ]


async def test_an_id_in_both_layouts_is_refused() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    await lay_out33(store, JOB, attempts=True)
    await lay_out_on(store, URI, JOB)
    before = (state.objects(B), state.pending(B))
    for command in (show_s3a_job, resume_s3a_job, abort_s3a_job):
        with pytest.raises(CommitterError, match="which one is meant cannot be told") as e:
            await command(store, DEST, JOB)
        assert "\n" not in str(e.value)
    assert (state.objects(B), state.pending(B)) == before


async def test_a_33_directory_mixing_both_shapes_is_refused() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    lay = await lay_out33(store, JOB, attempts=True)
    await store.put_object(B, lay.pendingset(FLAT, "task_x"), s3a_pendingset(JOB, []))
    before = (state.objects(B), state.pending(B))
    for command in (show_s3a_job, resume_s3a_job, abort_s3a_job):
        with pytest.raises(CommitterError, match="two Hadoop releases' layouts"):
            await command(store, DEST, JOB)
    assert (state.objects(B), state.pending(B)) == before


async def test_find_names_the_layout() -> None:
    state = MemoryState(B)
    store = MemoryStore(state)
    assert await find_s3a_job(store, DEST, JOB) is None
    await lay_out33(store, JOB, attempts=False)
    found = await find_s3a_job(store, DEST, JOB)
    assert found is not None and found.kind is H33
    assert await find_s3a_job(store, Destination.parse(f"s3://{B}/s3a"), JOB) is None
    with pytest.raises(JobNotFound):
        await show_s3a_job(store, DEST, OTHER)


@pytest.mark.parametrize("scope", ["destination", "partitions"])
async def test_a_replace_refuses_while_a_33_job_may_be_committing(
    tmp_path: Path, scope: str
) -> None:
    """Hadoop's commits take no lock: a zerorename replace beside a 3.3 job (whose tasks
    committed, one of its files visible) refuses with nothing changed, by whole
    destination (its listing sees ``__magic/job-<id>/``) and by partition (it looks at the
    jobs in ``__magic/`` first); once the job ended, it replaces."""
    state = MemoryState(B)
    store = MemoryStore(state)
    lay = await lay_out33(store, JOB, attempts=False)
    opts = CommitOptions(staging_dir=tmp_path, lock_wait=0.0)
    committer = MagicCommitter(store, URI, conflict="replace", scope=scope, options=opts)

    async def replace() -> None:
        job = await committer.setup_job()
        ta = job.task_attempt(0)
        await ta.setup()
        async with ta.open("new.csv" if scope == "destination" else "d=1/new.csv") as out:
            await out.write(b"new\n")
        await job.commit([await ta.commit()])

    before = dict(state.objects(B))
    with pytest.raises(ConflictError, match=rf"S3A job {JOB} .*nothing changed") as refused:
        await replace()
    assert "\n" not in str(refused.value)
    after = dict(state.objects(B))
    assert {k: v for k, v in after.items() if JOB in k} == {
        k: v for k, v in before.items() if JOB in k
    }, "the refused replace changed the 3.3 job's files"
    await store.delete_objects(B, [k for k in after if k.startswith(lay.root)])  # it ended
    await replace()
    left = [k for k in state.objects(B) if JOB in k and not k.startswith(MAGIC)]
    assert len(left) == (0 if scope == "destination" else 2)  # d=1/ holds none of its


def test_s3a_job_of_names_a_33_jobs_records() -> None:
    assert s3a_job_of(DEST, f"{MAGIC}job-{JOB}/task_1.pendingset") == JOB
    assert s3a_job_of(DEST, f"{MAGIC}job-{JOB}/") == JOB
    assert s3a_job_of(DEST, f"{MAGIC}app-attempt-0000/task_1.pendingset") is None
    assert s3a_job_of(DEST, f"{MAGIC}job-{JOB}") is None
    assert s3a_job_of(DEST, f"s3a/out10/__magic/job-{JOB}/x") is None
