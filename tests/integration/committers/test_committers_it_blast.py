"""The blast radius of every destructive call (issue 10, invariant 7), on moto and RGW.

Job A, a committed job B, an active job C and a foreign writer (plain boto3) share a bucket
and a destination, with keys built to confuse ownership: A's id in B's, C's and the
foreign writer's file names and directory names, ids after and inside other ids, '..' and
'//' segments, a sibling destination ``dataset10`` and a file ``dataset1-<A>`` next to it.
After ``jobs abort A``, a rolled-back commit of A, a replace-mode commit of A and ``uploads
abort`` of A's destination, the whole bucket (every object byte for byte, every pending
upload by key and id) is exactly what must survive.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from committer_helpers import ODD, bucket_state, committer, engine_for, write

from zerorename.cli.jobs import main as cli_main
from zerorename.committers import JobCommitError, SuccessData
from zerorename.committers.paths import with_job_id
from zerorename.engine import UploadEngine
from zerorename.servers.targets import S3Target

A = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
B = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8b"  # differs from A in its last character
C = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3"

#: A's outputs per task (task 2 never commits: its upload has only a .pending record)
A_FILES = {
    0: {"a.csv": b"a0", f"run={B}/b.csv": b"a0b"},
    1: {f"t1/{A}.csv": b"a1"},
    2: {"late.csv": b"a2"},
}
#: B's committed outputs: A's id in directories, mid-name, and in the slot before B's
B_FILES = {
    f"run={A}/rerun-of-{A}.csv": b"b rerun",
    f"{A}.csv": b"b named after A",
    f"x-{A}-c000.csv": b"b spark-like",
    f"part-00000-{A}-c000.csv": b"b part",
}
#: C's uploads: task 0 committed (pendingset), task 1 not (only .pending records)
C_FILES = {0: {f"run={A}/c.bin": b"c0"}, 1: {f"pending-of-{A}.bin": b"c1"}}
#: foreign objects in the destination that are nobody's (deleted by a replace of A)
FOREIGN_IN_DEST = {
    f"{A}.csv": b"f1",
    f"run={A}/notes.csv": b"f2",
    f"x-{A}ff.csv": b"f3",
    f"x-{A}-draft.csv": b"f4",
    f"x-{A}-{B}.csv": b"f5",  # B's name, not B's object
    f"{A}/y.csv": b"f6",
}
#: foreign objects that stay whatever A does: named by A's rule but never in A's records
#: (A's abort and rollback go by its records; A's replace does not count A's names as
#: older objects), and one in a ``__magic*`` directory that is not A's (reserved: never
#: data, never deleted but by its own job)
FOREIGN_KEPT = {
    f"imposter-{A}.csv": b"i1",
    f"a//b-{A}.csv": b"i2",
    f"../up-{A}.csv": b"i3",
    f"__magic_job-{A}x/foo": b"i4",
}
#: foreign objects and uploads outside the destination, relative to the test's prefix
FOREIGN_OUTSIDE = {
    f"dataset10/x-{A}.csv": b"o1",
    f"dataset1-{A}.csv": b"o2",
    "dataset1": b"o3",
    f"dataset10/__magic_job-{A}/job.json": b"o4",
}
FOREIGN_UPLOADS_IN_DEST = [f"run={A}/upload-{A}-part.bin", f"{A}/u.bin", f"x-{A}//y.bin"]
FOREIGN_UPLOADS_OUTSIDE = [f"dataset10/u-{A}.bin", f"dataset1-{A}.bin"]


@dataclass
class World:
    s3: S3Target
    base: str  # the test's prefix (with odd characters)
    dest: str  # A's destination prefix, ending in '/'
    a_job: Any = None
    a_summaries: list[Any] = field(default_factory=list)
    a_uploads: dict[str, str] = field(default_factory=dict)  # final key -> upload id

    @property
    def uri(self) -> str:
        return f"s3://{self.s3.bucket}/{self.dest[:-1]}"

    def a_key(self, rel: str) -> str:
        return self.dest + with_job_id(rel, A)


async def run_task(job: Any, task: int, files: dict[str, bytes], *, commit: bool) -> Any:
    ta = job.task_attempt(task)
    await ta.setup()
    for rel, data in files.items():
        await write(ta, rel, data)
    return await ta.commit() if commit else None


async def build(
    s3: S3Target, eng: UploadEngine, a_conflict: str, tmp: Path, **a_opts: Any
) -> World:
    base = f"{s3.prefix}{ODD}"
    w = World(s3, base, base + "dataset1/")
    c = s3.boto3_client()
    put = {**{w.dest + k: v for k, v in {**FOREIGN_IN_DEST, **FOREIGN_KEPT}.items()}}
    put.update({base + k: v for k, v in FOREIGN_OUTSIDE.items()})
    put[f"x-{A}.csv"] = b"bucket root"
    for key, data in put.items():
        c.put_object(Bucket=s3.bucket, Key=key, Body=data)
    for key in [w.dest + k for k in FOREIGN_UPLOADS_IN_DEST] + [
        base + k for k in FOREIGN_UPLOADS_OUTSIDE
    ]:
        c.create_multipart_upload(Bucket=s3.bucket, Key=key)
    b_job = await committer("magic", eng, w.uri).setup_job(B)
    await b_job.commit([await run_task(b_job, 0, B_FILES, commit=True)])
    c_job = await committer("staging", eng, w.uri, tmp=tmp / "c").setup_job(C)
    await run_task(c_job, 0, C_FILES[0], commit=True)
    await run_task(c_job, 1, C_FILES[1], commit=False)  # staging: nothing uploaded yet
    a_job = await committer("magic", eng, w.uri, conflict=a_conflict, **a_opts).setup_job(A)
    w.a_job = a_job
    for task, files in A_FILES.items():
        s = await run_task(a_job, task, files, commit=task != 2)
        if s is not None:
            w.a_summaries.append(s)
    objs, ups = bucket_state(s3)
    a_keys = {w.a_key(r) for files in A_FILES.values() for r in files}
    w.a_uploads = {key: upload_id for key, upload_id in ups if key in a_keys}
    assert set(w.a_uploads) == a_keys
    # the world is as confusing as intended: A's id in many keys that are not A's
    assert sum(A in k for k, _ in ups if k not in w.a_uploads) >= 5
    assert sum(A in k for k in objs if not k.startswith(w.dest + f"__magic_job-{A}/")) >= 15
    return w


async def cli(*argv: str) -> int:
    """The CLI in-process, from a thread (it runs its own event loop, as in a shell)."""
    return await asyncio.to_thread(cli_main, list(argv))


def without_a(w: World, before: tuple[dict[str, bytes], list[tuple[str, str]]]) -> Any:
    """``before`` less A's records and A's pending uploads: what an abort leaves."""
    objs, ups = before
    a_dir = w.dest + f"__magic_job-{A}/"
    assert any(k.startswith(a_dir) for k in objs)
    return (
        {k: v for k, v in objs.items() if not k.startswith(a_dir)},
        [u for u in ups if u[0] not in w.a_uploads],
    )


async def test_jobs_abort_removes_only_a(s3: S3Target, aws_env: list[str], tmp_path: Path) -> None:
    async with engine_for(s3) as eng:
        w = await build(s3, eng, "append", tmp_path)
    before = bucket_state(s3)
    assert await cli("jobs", "abort", w.uri, A, *aws_env) == 0
    assert bucket_state(s3) == without_a(w, before)


async def fail_a_commit(s3: S3Target, w: World) -> JobCommitError:
    """Commit A with task 1's upload aborted behind its back: its complete fails."""
    gone = w.a_key(f"t1/{A}.csv")
    s3.boto3_client().abort_multipart_upload(
        Bucket=s3.bucket, Key=gone, UploadId=w.a_uploads.pop(gone)
    )
    with pytest.raises(JobCommitError) as ei:
        await w.a_job.commit(w.a_summaries)
    return ei.value


async def test_rolled_back_commit_removes_only_a(s3: S3Target, tmp_path: Path) -> None:
    async with engine_for(s3) as eng:
        w = await build(s3, eng, "append", tmp_path, concurrency=1)
        before = bucket_state(s3)
        err = await fail_a_commit(s3, w)
    assert err.rolled_back, err
    objs, ups = without_a(w, before)
    gone = w.a_key(f"t1/{A}.csv")
    assert bucket_state(s3) == (objs, [u for u in ups if u[0] != gone])


async def test_abort_after_a_partial_commit_removes_only_a(
    s3: S3Target, aws_env: list[str], tmp_path: Path
) -> None:
    """One complete at a time and no automatic rollback: task 0's files are complete when
    task 1's fails, then ``jobs abort`` removes them by A's records, and nothing else."""
    async with engine_for(s3) as eng:
        w = await build(s3, eng, "append", tmp_path, concurrency=1, rollback_on_failure=False)
        before = bucket_state(s3)
        err = await fail_a_commit(s3, w)
    assert not err.rolled_back, err
    completed = {w.a_key(r): d for r, d in A_FILES[0].items()}
    objs, _ = bucket_state(s3)
    assert {k: objs.get(k) for k in completed} == completed
    assert await cli("jobs", "abort", w.uri, A, *aws_env) == 0
    objs, ups = without_a(w, before)
    gone = w.a_key(f"t1/{A}.csv")
    assert bucket_state(s3) == (objs, [u for u in ups if u[0] != gone])


async def test_replace_commit_of_a_deletes_only_older_objects(s3: S3Target, tmp_path: Path) -> None:
    async with engine_for(s3) as eng:
        w = await build(s3, eng, "replace", tmp_path)
        before_objs, before_ups = bucket_state(s3)
        res = await w.a_job.commit(w.a_summaries)
    assert res.files == 3
    objs, ups = bucket_state(s3)
    success = SuccessData.from_json(objs.pop(w.dest + "_SUCCESS"))
    assert success.job_id == A
    older = {w.dest + k for k in FOREIGN_IN_DEST}
    older |= {w.dest + with_job_id(r, B) for r in B_FILES} | {w.dest + "_SUCCESS"}
    assert older <= set(before_objs)
    want = {
        k: v
        for k, v in before_objs.items()
        if k not in older and not k.startswith(w.dest + f"__magic_job-{A}/")
    }
    want.update({w.a_key(r): d for t in (0, 1) for r, d in A_FILES[t].items()})
    assert objs == want  # C's records, A-named strangers and everything outside stay
    assert ups == [u for u in before_ups if u[0] not in w.a_uploads]


async def test_replace_keeps_objects_written_after_its_plan(s3: S3Target, tmp_path: Path) -> None:
    async with engine_for(s3) as eng:
        w = await build(s3, eng, "replace", tmp_path)
        late = w.dest + f"late-writer-{B}.csv"
        written: list[str] = []

        async def progress(p: Any) -> None:
            if p.phase == "completing" and not written:  # after the scan, before replace
                written.append(late)
                await eng.put_object(s3.bucket, late, b"late")

        await w.a_job.commit(w.a_summaries, progress=progress)
    assert written == [late]
    assert bucket_state(s3)[0].get(late) == b"late"


async def test_uploads_abort_of_the_destination(
    s3: S3Target, aws_env: list[str], tmp_path: Path
) -> None:
    async with engine_for(s3) as eng:
        w = await build(s3, eng, "append", tmp_path)
    objs, ups = bucket_state(s3)
    assert await cli("uploads", "abort", w.uri + "/", *aws_env) == 0
    outside = [u for u in ups if not u[0].startswith(w.dest)]
    assert len(outside) == len(FOREIGN_UPLOADS_OUTSIDE)
    assert bucket_state(s3) == (objs, outside)
