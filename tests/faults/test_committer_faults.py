"""The commit protocol's invariants under faults injected on the wire by the FaultProxy.

The committers' engine talks to the real servers (moto, Ceph RGW) through a FaultProxy;
every check reads the store itself with a plain boto3 client: which objects exist, their
bytes, and which multipart uploads are still pending.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from zerorename.committers import (
    CommitOptions,
    CommitProgress,
    Committer,
    ConflictError,
    Job,
    JobCommitError,
    MagicCommitter,
    StagingCommitter,
    SuccessData,
    TaskAttemptError,
    TaskCommitSummary,
)
from zerorename.committers.paths import with_job_id
from zerorename.engine import EngineConfig, RetryConfig, UploadEngine
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

FAST_RETRY = RetryConfig(max_attempts=8, base_delay=0.02, max_delay=0.3, max_elapsed=60)
#: a small budget: a fault that persists exhausts it quickly
SMALL_RETRY = RetryConfig(max_attempts=3, base_delay=0.01, max_delay=0.05, max_elapsed=20)

#: every destination has spaces, unicode, '#', '+' and '%' in it
DEST_NAME = "öut pût ✓ #1+%"


# ---------------------------------------------------------------- helpers


def proxied(
    s3: S3Target, fault_proxy: Callable[..., Any], **kw: Any
) -> tuple[FaultProxy, EngineConfig]:
    """A FaultProxy in front of the target's server and an engine config that uses it."""
    assert s3.endpoint_url is not None
    proxy: FaultProxy = fault_proxy(s3.endpoint_url)
    kw.setdefault("part_size", 5 * MiB)
    kw.setdefault("retry", FAST_RETRY)
    return proxy, s3.with_endpoint(proxy.url).engine_config(**kw)


def dest_uri(s3: S3Target) -> str:
    return f"s3://{s3.bucket}/{s3.prefix}{DEST_NAME}"


def make_committer(
    kind: str, engine: UploadEngine, s3: S3Target, tmp: Path, conflict: str = "append", **opts: Any
) -> Committer:
    cls = {"magic": MagicCommitter, "staging": StagingCommitter}[kind]
    options = CommitOptions(staging_dir=tmp, **opts)
    return cls(engine, dest_uri(s3), conflict=conflict, options=options)


async def run_task(
    job: Job, task: int, files: dict[str, bytes], attempt: int = 0
) -> TaskCommitSummary:
    """Set up one task attempt, write its outputs, commit it."""
    ta = job.task_attempt(task, attempt)
    await ta.setup()
    for rel, data in files.items():
        async with ta.open(rel) as out:
            await out.write(data)
    return await ta.commit()


def final_key(job: Job, rel: str) -> str:
    return job.dest.key(with_job_id(rel, job.job_id))


def store_objects(s3: S3Target) -> dict[str, bytes]:
    """Every object under the test's prefix, with its bytes (as the store has them)."""
    c = s3.boto3_client()
    out: dict[str, bytes] = {}
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=s3.bucket, Prefix=s3.prefix):
        for o in page.get("Contents", []):
            out[o["Key"]] = c.get_object(Bucket=s3.bucket, Key=o["Key"])["Body"].read()
    return out


def pending_uploads(s3: S3Target) -> list[str]:
    resp = s3.boto3_client().list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix)
    return sorted(u["Key"] for u in resp.get("Uploads", []))


def assert_committed(s3: S3Target, job: Job, expected: dict[str, bytes]) -> SuccessData:
    """Exactly the expected files (byte for byte) plus _SUCCESS; no records of the job,
    no pending upload. Returns the parsed _SUCCESS."""
    objs = store_objects(s3)
    success = job.layout.success
    want = {final_key(job, rel): data for rel, data in expected.items()}
    assert success in objs, f"no _SUCCESS; store has {sorted(objs)}"
    data_objs = {k: v for k, v in objs.items() if k != success}
    assert sorted(data_objs) == sorted(want), "visible files differ from the committed tasks'"
    for key, data in want.items():
        got = data_objs[key]
        assert len(got) == len(data) and hashlib.md5(got).digest() == hashlib.md5(data).digest(), (
            f"{key}: content differs"
        )
    assert pending_uploads(s3) == []
    return SuccessData.from_json(objs[success])


def assert_nothing_left(s3: S3Target) -> None:
    """Invariant 4: no object and no pending upload under the test's prefix."""
    assert store_objects(s3) == {}
    assert pending_uploads(s3) == []


def payload(tag: str, size: int) -> bytes:
    """Deterministic, distinct bytes for one file."""
    seed = hashlib.sha256(tag.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def task_files(task: int, n: int, *, big: bool = False, tag: str = "") -> dict[str, bytes]:
    """``n`` small outputs (keys with spaces and unicode) and optionally one 3-part file."""
    files = {
        f"dáy={task % 2}/pärt {task:02d} ☃ #{i}+.csv": payload(f"{tag}{task}/{i}", 2048 + 97 * i)
        for i in range(n)
    }
    if big:
        files[f"dáy={task % 2}/bïg {task:02d} ñ.bin"] = payload(f"{tag}{task}/big", 11 * MiB)
    return files


# ---------------------------------------------------------------- 1. task commit failures

BAD_DIR = "bäd tåsk ✗"


@pytest.mark.parametrize(
    ("s3", "fault", "rerun"),
    [
        pytest.param("moto", "internal_error", False, id="moto-500-then-job-without-it"),
        pytest.param("moto", "reset", True, id="moto-reset-then-rerun-attempt"),
        # on RGW the resets only: their half bodies reach the store (the proxy answers
        # the 500s itself, which no store sees)
        pytest.param(
            "rgw", "reset", True, marks=pytest.mark.rgw, id="rgw-reset-then-rerun-attempt"
        ),
    ],
    indirect=["s3"],
)
async def test_task_commit_failing_on_the_wire_leaves_nothing(
    s3: S3Target,
    fault_proxy: Callable[..., Any],
    tmp_path: Path,
    fault: str,
    rerun: bool,
) -> None:
    """Staging task commit whose UploadParts start failing part way through its uploads
    (after 2 parts went through; faults persist past the retry budget): the task commit
    raises TaskAttemptError and aborts every upload it started (including the ones in
    flight, cancelled); the job commits the other tasks (and, with ``rerun``, a re-run
    attempt of the failed task) and nothing of the failed attempt is ever visible."""
    proxy, config = proxied(s3, fault_proxy, retry=SMALL_RETRY, max_concurrency=4)
    bad_files = {
        f"{BAD_DIR}/a fïrst.csv": payload("bad-a", 3000),
        f"{BAD_DIR}/b bïg ☂.bin": payload("bad-b", 11 * MiB),  # 3 parts
        f"{BAD_DIR}/c läst.csv": payload("bad-c", 5000),
    }
    rule = proxy.add_rule(
        FaultRule(
            operation="UploadPart",
            fault=fault,  # type: ignore[arg-type]
            burst=(3, 10**6),
            path_contains=BAD_DIR,
            reset_after_bytes=1024 if fault == "reset" else None,
        )
    )
    good = {0: task_files(0, 3), 2: task_files(2, 3)}
    async with UploadEngine(config) as engine:
        committer = make_committer("staging", engine, s3, tmp_path, task_concurrency=3)
        job = await committer.setup_job()
        s0 = await run_task(job, 0, good[0])

        ta = job.task_attempt(1, 0)
        await ta.setup()
        for rel, data in bad_files.items():
            async with ta.open(rel) as out:
                await out.write(data)
        with pytest.raises(TaskAttemptError, match="failed to commit"):
            await ta.commit()
        assert rule.fired >= 1 and rule.seen >= 3
        # every upload the failed attempt started was aborted, once
        started = bad_requests(proxy, "CreateMultipartUpload")
        assert started >= 2 and bad_requests(proxy, "AbortMultipartUpload") == started

        # the failed attempt aborted all its uploads: only task 0's are pending
        left = pending_uploads(s3)
        assert not [k for k in left if BAD_DIR in k], left
        assert sorted(left) == sorted(final_key(job, r) for r in good[0])
        assert not [k for k in store_objects(s3) if BAD_DIR in k]
        assert not (ta.local_dir).exists()  # type: ignore[attr-defined]

        s2 = await run_task(job, 2, good[2])
        summaries = [s0, s2]
        expected = {**good[0], **good[2]}
        if rerun:
            proxy.remove_rule(rule)
            redo = {rel: payload("rerun" + rel, len(d)) for rel, d in bad_files.items()}
            summaries.append(await run_task(job, 1, redo, attempt=1))
            expected.update(redo)
        result = await job.commit(summaries)

    assert result.files == len(expected)
    success = assert_committed(s3, job, expected)
    assert success.metrics["files"] == len(expected)


def bad_requests(proxy: FaultProxy, operation: str) -> int:
    return sum(r.operation == operation and BAD_DIR in r.path for r in proxy.stats.log())


# ---------------------------------------------------------------- 2. throttled completes


@MOTO
async def test_slowdown_on_30_percent_of_completes_during_job_commit(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """503 SlowDown on 30% of CompleteMultipartUpload: the job commits, every file is
    byte-identical, and _SUCCESS counts exactly the throttles the proxy injected."""
    proxy, config = proxied(s3, fault_proxy)
    files = {t: task_files(t, 6, big=t == 0) for t in range(4)}
    progress: list[CommitProgress] = []
    async with UploadEngine(config) as engine:
        committer = make_committer("magic", engine, s3, tmp_path, concurrency=8)
        job = await committer.setup_job()
        summaries = [await run_task(job, t, f) for t, f in files.items()]
        rule = proxy.add_rule(
            FaultRule(operation="CompleteMultipartUpload", fault="slowdown", rate=0.3, seed=5)
        )
        result = await job.commit(summaries, progress=progress.append)

    expected = {rel: d for f in files.values() for rel, d in f.items()}
    success = assert_committed(s3, job, expected)
    injected = proxy.stats.faults("CompleteMultipartUpload", "slowdown")
    assert injected == rule.fired > 0
    assert success.metrics["throttles"] == injected == result.throttles
    assert success.metrics["retries"] >= injected
    assert success.metrics["files"] == len(expected) == result.files
    assert proxy.stats.requests("CompleteMultipartUpload") == len(expected) + injected
    assert progress and progress[-1].uploads_done == len(expected)


# ---------------------------------------------------------------- 3. completes keep failing


@MOTO
async def test_completes_failing_past_the_budget_roll_the_job_back(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """Every CompleteMultipartUpload after the first 3 answers 500, with a small retry
    budget: job commit raises JobCommitError, rolled back; the 3 objects it had made
    visible are deleted again, no upload is pending, no record is left (invariant 4)."""
    proxy, config = proxied(s3, fault_proxy, retry=SMALL_RETRY)
    files = {t: task_files(t, 3) for t in range(3)}
    async with UploadEngine(config) as engine:
        committer = make_committer("staging", engine, s3, tmp_path, concurrency=2)
        job = await committer.setup_job()
        summaries = [await run_task(job, t, f) for t, f in files.items()]
        proxy.add_rule(
            FaultRule(operation="CompleteMultipartUpload", fault="internal_error", burst=(4, 10**6))
        )
        with pytest.raises(JobCommitError) as info:
            await job.commit(summaries)
        err = info.value
        assert not isinstance(err, ConflictError)
        assert err.rolled_back is True
        assert err.job_id == job.job_id
        assert err.state == "completing"
        assert "InternalError" in str(err) and "rolled back" in str(err)
        assert not await job.is_active()

    completes = [r for r in proxy.stats.log() if r.operation == "CompleteMultipartUpload"]
    assert sum(r.fault is None for r in completes) == 3  # these became visible, then deleted
    assert sum(r.fault == "internal_error" for r in completes) >= SMALL_RETRY.max_attempts
    assert_nothing_left(s3)


@MOTO
async def test_failed_commit_kept_for_resume_finishes_exactly_once(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """Same failing completes, but rollback_on_failure=False: the journal is kept, part
    of the output is visible; once the store recovers, resume() completes the rest and
    every file is there exactly once."""
    proxy, config = proxied(s3, fault_proxy, retry=SMALL_RETRY)
    files = {t: task_files(t, 3) for t in range(3)}
    expected = {rel: d for f in files.values() for rel, d in f.items()}
    async with UploadEngine(config) as engine:
        committer = make_committer(
            "magic", engine, s3, tmp_path, concurrency=2, window=1, rollback_on_failure=False
        )
        job = await committer.setup_job()
        summaries = [await run_task(job, t, f) for t, f in files.items()]
        rule = proxy.add_rule(
            FaultRule(operation="CompleteMultipartUpload", fault="internal_error", burst=(4, 10**6))
        )
        with pytest.raises(JobCommitError) as info:
            await job.commit(summaries)
        assert info.value.rolled_back is False
        visible = [k for k in store_objects(s3) if "__magic" not in k]
        assert len(visible) == 3
        assert len(pending_uploads(s3)) == len(expected) - 3

        proxy.remove_rule(rule)
        result = await job.resume()
    assert result.resumed and result.files == len(expected)
    assert_committed(s3, job, expected)


# ---------------------------------------------------------------- 4. lost answers


# no HTTPS doubling: TLS is no part of the claim (test_engine_faults.py keeps a lost answer
# over TLS); both servers, whose answers to a repeated request differ
@pytest.mark.parametrize("conflict", ["append", "fail"])
async def test_lost_answers_still_give_exactly_once_results(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path, conflict: str
) -> None:
    """The store acts but the answer is lost (connection reset instead of the response)
    on CompleteMultipartUpload, on the PutObject of a pendingset and of _SUCCESS: the
    retries recognise what was done; every file is visible exactly once, byte for byte.
    With conflict 'fail' the completes carry If-None-Match: a retried complete of our own
    object is never mistaken for a racing writer."""
    proxy, config = proxied(s3, fault_proxy)
    proxy.add_rule(
        FaultRule(
            operation="PutObject",
            fault="drop_response",
            schedule={1, 3},
            path_contains=".pendingset",
        )
    )
    proxy.add_rule(
        FaultRule(
            operation="PutObject", fault="drop_response", schedule={1}, path_contains="_SUCCESS"
        )
    )
    files = {t: task_files(t, 4, big=t == 1) for t in range(3)}
    expected = {rel: d for f in files.values() for rel, d in f.items()}
    async with UploadEngine(config) as engine:
        committer = make_committer("magic", engine, s3, tmp_path, conflict, concurrency=4)
        job = await committer.setup_job()
        summaries = [await run_task(job, t, f) for t, f in files.items()]
        assert proxy.stats.faults("PutObject", "drop_response") == 2
        proxy.add_rule(
            FaultRule(
                operation="CompleteMultipartUpload",
                fault="drop_response",
                schedule={1, 4, 7, 8},
            )
        )
        result = await job.commit(summaries)
    assert result.files == len(expected)
    assert proxy.stats.faults("CompleteMultipartUpload", "drop_response") == 4
    assert proxy.stats.faults("PutObject", "drop_response") == 3
    success = assert_committed(s3, job, expected)
    assert success.metrics["files"] == len(expected)
    assert sorted(success.filenames) == sorted("/" + final_key(job, r) for r in expected)


async def test_lost_answer_then_failing_retries_is_settled_from_the_store(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """One complete is done by the store but its answer is lost, and every retry of it
    then fails (500) until the engine gives up: the job commit looks at the store, finds
    its own object there, and commits; nothing is completed twice or rolled back."""
    proxy, config = proxied(s3, fault_proxy, retry=SMALL_RETRY)
    lost = "lôst änswer ✉ #3.csv"
    files = {**task_files(0, 2), lost: payload("lost", 7777)}
    async with UploadEngine(config) as engine:
        committer = make_committer("staging", engine, s3, tmp_path)
        job = await committer.setup_job()
        summary = await run_task(job, 0, files)
        for rule in (
            FaultRule(operation="CompleteMultipartUpload", fault="drop_response", schedule={1}),
            FaultRule(operation="CompleteMultipartUpload", fault="internal_error", burst=(2, 99)),
        ):
            rule.path_contains = "lôst änswer"
            proxy.add_rule(rule)
        result = await job.commit([summary])
    assert proxy.stats.faults("CompleteMultipartUpload", "drop_response") == 1
    assert proxy.stats.faults("CompleteMultipartUpload", "internal_error") == (
        SMALL_RETRY.max_attempts - 1
    )
    assert result.files == len(files)
    assert_committed(s3, job, files)


# ---------------------------------------------------------------- 5. racing writer


@pytest.mark.parametrize("same_size", [False, True], ids=["other-size", "same-size"])
async def test_conflict_fail_detects_a_racing_writer(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path, same_size: bool
) -> None:
    """Conflict mode 'fail': another client creates one of the destination keys after the
    conflict check, while our CompleteMultipartUpload of it is held by the proxy (2.5 s of
    latency). moto honours If-None-Match on complete: the job commit raises ConflictError
    naming the key and rolls back; the racer's object survives untouched (even when it
    has the same size as ours) and nothing of the job is left. RGW ignores If-None-Match
    (it would overwrite), so this runs on moto only."""
    s3 = moto_s3
    hold = 2.5
    proxy, config = proxied(s3, fault_proxy)
    victim_rel = "rä ce/vïctim ☠ #7+.csv"
    files = {**task_files(0, 2), victim_rel: payload("victim", 4000)}
    racer = payload("racer", 4000 if same_size else 1234)
    client = s3.boto3_client()
    client.head_bucket(Bucket=s3.bucket)  # warm the client up: the race window is short
    async with UploadEngine(config) as engine:
        committer = make_committer("magic", engine, s3, tmp_path, conflict="fail")
        job = await committer.setup_job()
        summary = await run_task(job, 0, files)
        victim = final_key(job, victim_rel)
        proxy.add_rule(
            FaultRule(
                operation="CompleteMultipartUpload",
                fault="latency",
                delay=hold,
                path_contains="vïctim",
            )
        )
        outcome: list[BaseException | None] = []

        async def commit() -> None:
            try:
                await job.commit([summary])
                outcome.append(None)
            except JobCommitError as exc:
                outcome.append(exc)

        def held() -> bool:
            return any(
                r.operation == "CompleteMultipartUpload" and "vïctim" in r.path
                for r in proxy.stats.log()
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(commit)
            with anyio.fail_after(30):
                while not held():  # noqa: ASYNC110 - the proxy (a thread) has no hook
                    await anyio.sleep(0.005)
            await anyio.to_thread.run_sync(
                lambda: client.put_object(Bucket=s3.bucket, Key=victim, Body=racer)
            )
            # event order, not a clock: the racer's put returned while the proxy still held
            # our complete (it logs a request when it has ended)
            ended = [r.op for r in proxy.stats.timed() if "vïctim" in r.key]
            assert "CompleteMultipartUpload" not in ended, "the race window was missed"

    assert outcome and isinstance(outcome[0], ConflictError), (
        f"job commit did not detect the racing writer: {outcome}"
    )
    conflict = outcome[0]
    assert victim in conflict.conflicts
    assert conflict.rolled_back is True
    assert store_objects(s3) == {victim: racer}, "the racer's object must survive, and only it"
    assert pending_uploads(s3) == []


# ---------------------------------------------------------------- 6. slow pendingset reads


@MOTO
async def test_stalled_and_slow_pendingset_reads_are_retried(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """Every GetObject of a pendingset during job commit is delayed, and two of them stall
    past the read timeout (no answer at all): the reads are retried and the job commits."""
    proxy, config = proxied(s3, fault_proxy, read_timeout=1.0)
    files = {t: task_files(t, 3) for t in range(4)}
    expected = {rel: d for f in files.values() for rel, d in f.items()}
    progress: list[CommitProgress] = []
    async with UploadEngine(config) as engine:
        committer = make_committer("staging", engine, s3, tmp_path)
        job = await committer.setup_job()
        summaries = [await run_task(job, t, f) for t, f in files.items()]
        proxy.add_rule(
            FaultRule(
                operation="GetObject",
                fault="stall",
                delay=2.0,
                schedule={1, 4},
                path_contains=".pendingset",
            )
        )
        proxy.add_rule(
            FaultRule(
                operation="GetObject", fault="latency", delay=0.3, path_contains=".pendingset"
            )
        )
        result = await job.commit(summaries, progress=progress.append)
        transient = engine.stats.transient_errors

    assert proxy.stats.faults("GetObject", "stall") == 2
    assert proxy.stats.faults("GetObject", "latency") >= len(files)  # one read per set
    assert transient >= 2  # the stalls were read timeouts, retried
    assert result.files == len(expected)
    # the proxy's log (once the stalls it still holds have ended): each stalled read ended
    # unanswered and a later read of the same pendingset was answered (the retry)
    reads = [r for r in proxy.log if r.op == "GetObject" and ".pendingset" in r.key]
    stalled = [r for r in reads if r.error == "stall"]
    assert len(stalled) == 2
    for r in stalled:
        assert any(q.key == r.key and q.number > r.number and q.error is None for q in reads)
    assert_committed(s3, job, expected)
    assert progress and progress[-1].phase == "committed"
