"""A job commit SIGKILLed half way, then resumed (same state as an uninterrupted commit)
or aborted (nothing left), from another process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from committer_helpers import (
    committer,
    data_objects,
    dest_prefix,
    dest_uri,
    engine_for,
    objects,
    uploads,
    write,
)

from zerorename.committers import JournalError, SuccessData
from zerorename.servers.targets import S3Target

CHILD = textwrap.dedent("""
    import asyncio, json, sys
    from zerorename.committers import CommitOptions, MagicCommitter, TaskCommitSummary
    from zerorename.engine import EngineConfig, UploadEngine

    endpoint, region, uri, job_id, summaries = sys.argv[1:6]

    async def main():
        cfg = EngineConfig(endpoint_url=endpoint, region=region, addressing_style="path",
                           batch_concurrency=2)
        async with UploadEngine(cfg) as eng:
            c = MagicCommitter(eng, uri, options=CommitOptions(
                progress_interval=0.02, concurrency=2, window=2))
            job = await c.open_job(job_id)
            sums = [TaskCommitSummary.from_json(l) for l in open(summaries)]
            def tick(p):
                print(json.dumps({"phase": p.phase, "done": p.uploads_done}), flush=True)
            await job.commit(sums, progress=tick)
            print(json.dumps({"phase": "finished"}), flush=True)

    asyncio.run(main())
""")

#: 72 files: enough that a commit at concurrency 2 is still completing when a third is done
TASKS, FILES = 6, 12


async def prepare(s3: S3Target, tmp_path: Path) -> tuple[str, Path, dict[str, bytes]]:
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3), pending_records=False).setup_job()
        expected: dict[str, bytes] = {}

        async def task(t: int) -> str:
            ta = job.task_attempt(t)
            await ta.setup()
            for f in range(FILES):
                rel = f"t={t}/f {f} ü.bin"
                data = f"{t}:{f}".encode()
                await write(ta, rel, data)
                expected[ta.final_rel(rel)] = data
            return (await ta.commit()).to_json()

        lines = await asyncio.gather(*(task(t) for t in range(TASKS)))
        # a failed attempt's upload, which the commit must abort in the end
        dead = job.task_attempt(0, 7)
        await dead.setup()
        await write(dead, "dead.bin", b"dead")
    path = tmp_path / "summaries.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return job.job_id, path, expected


def kill_half_way(s3: S3Target, job_id: str, summaries: Path) -> None:
    env = dict(
        os.environ, AWS_ACCESS_KEY_ID=s3.access_key or "", AWS_SECRET_ACCESS_KEY=s3.secret_key or ""
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            s3.endpoint_url,
            s3.region,
            dest_uri(s3),
            job_id,
            str(summaries),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    target = TASKS * FILES // 3
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            msg = json.loads(line)
            assert msg["phase"] != "finished", "the commit finished before it was killed"
            if msg["phase"] == "completing" and msg["done"] >= target:
                break
            assert time.monotonic() < deadline
        else:
            pytest.fail(f"child ended early: {proc.stderr.read() if proc.stderr else ''}")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


async def test_sigkilled_commit_then_resume(s3: S3Target, tmp_path: Path) -> None:
    prefix = dest_prefix(s3)
    job_id, summaries, expected = await prepare(s3, tmp_path)
    kill_half_way(s3, job_id, summaries)
    partial = data_objects(s3, prefix)
    assert 0 < len(partial) < len(expected)  # killed half way: some visible, not all
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).open_job(job_id)
        status = await job.status()
        assert status.journal is not None and status.journal.state.value == "completing"
        with pytest.raises(JournalError):
            await job.commit()  # a second fresh commit is refused: resume or abort
        res = await job.resume()
    assert res.resumed and res.files == len(expected)
    assert data_objects(s3, prefix) == expected
    assert uploads(s3, prefix) == []
    left = objects(s3, prefix)
    assert [k for k in left if "__magic" in k] == []
    success = SuccessData.from_json(left[prefix + "_SUCCESS"])
    assert success.metrics["files"] == len(expected) and success.metrics["commit_processes"] == 2


async def test_sigkilled_commit_then_abort(s3: S3Target, tmp_path: Path) -> None:
    prefix = dest_prefix(s3)
    job_id, summaries, _ = await prepare(s3, tmp_path)
    kill_half_way(s3, job_id, summaries)
    assert data_objects(s3, prefix)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, dest_uri(s3)).open_job(job_id)
        res = await job.abort()
        assert res.objects_deleted > 0 and res.uploads_aborted > 0
    assert objects(s3, prefix) == {}
    assert uploads(s3, prefix) == []
