"""A crashed Hadoop S3A magic job laid out on a store, to try ``zerorename jobs`` on S3A
jobs without a Hadoop cluster (the README's example does)::

    python3 -m zerorename.testing.s3acrash s3://bucket/dest [--job UUID] [--save-records DIR]

Real multipart uploads, and the records as Hadoop's serializers shape them (``.pendingset``
version 3 of version-2 commits: ``etags``, no part sizes, ``iostatistics``) in S3A's layout
(``dest/__magic_job-<uuid>/job-<uuid>/00/``); the job commit "died" after completing the
first task's uploads; a third task attempt never committed (its ``.pending`` is still in its
attempt directory). The tests use records written by Hadoop's own classes instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from zerorename.committers.objectstore import UploadStore
from zerorename.committers.paths import Destination
from zerorename.committers.s3a.layout import S3AJobLayout, S3ALayoutKind
from zerorename.engine import EngineConfig, PendingUpload, UploadEngine, run

TASK = "task_202601010000_0000_m_{:06d}"
ATTEMPT = "attempt_202601010000_0000_m_{:06d}_0"


def s3a_commit(p: PendingUpload, job_id: str, task_attempt: str, now_ms: int) -> dict[str, Any]:
    """One upload as S3A's ``SinglePendingCommit`` (version 2) serializes it."""
    return {
        "version": 2,
        "filename": None,
        "uri": f"s3a://{p.bucket}/{p.key}",
        "uploadId": p.upload_id,
        "bucket": p.bucket,
        "destinationKey": p.key,
        "created": now_ms,
        "saved": now_ms,
        "date": time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now_ms / 1000)),
        "jobId": job_id,
        "taskId": task_attempt,
        "text": "",
        "etags": [part.etag for part in p.parts],
        "extraData": {},
        "iostatistics": {
            "counters": {},
            "gauges": {},
            "minimums": {},
            "maximums": {},
            "meanstatistics": {},
        },
        "length": p.length,
        "partCount": len(p.parts),
    }


def s3a_pendingset(job_id: str, commits: list[dict[str, Any]]) -> bytes:
    """A task's ``PendingSet`` (version 3), compact as Hadoop 3.4 writes it."""
    body = {
        "version": 3,
        "jobId": job_id,
        "commits": commits,
        "iostatistics": {
            "counters": {},
            "gauges": {},
            "minimums": {},
            "maximums": {},
            "meanstatistics": {},
        },
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def lay_out_on(
    store: UploadStore,
    uri: str,
    job_id: str,
    kind: S3ALayoutKind = S3ALayoutKind.HADOOP_34,
    attempt: int = 0,
) -> tuple[S3AJobLayout, dict[str, bytes]]:
    """Write the crashed job under ``uri`` through ``store`` (the engine, or the in-memory
    store of the unit tests); its layout and its pendingsets by file name. ``kind`` and
    ``attempt`` give Hadoop 3.3's shared ``__magic/`` layout (``attempt`` :data:`FLAT`:
    records right in the job's directory), with the shared directory's marker and the
    zero-byte object S3A leaves at each magic path."""
    dest = Destination.parse(uri)
    layout = S3AJobLayout(dest, job_id, kind)
    now = int(time.time() * 1000)
    saved: dict[str, bytes] = {}
    b = dest.bucket
    h33 = kind is S3ALayoutKind.HADOOP_33
    if h33:
        await store.put_object(b, dest.key("__magic/"), b"")  # the shared directory's marker
    await store.put_object(b, layout.attempt_dir(attempt), b"")  # setupJob's directory
    for task in range(3):
        commits = []
        for n in range(2):
            rel = f"part-{task * 2 + n:05d}-{job_id}-c000.csv"
            data = f"task {task}, file {n}\n".encode()
            p = await store.upload(b, dest.key(rel), data, defer=True)
            if task == 0:  # the job commit got this far before it died
                done = await store.complete_many([p])
                if not done.ok:
                    raise RuntimeError(f"could not complete {p.uri}: {done.failures[0].error}")
            commits.append(s3a_commit(p, job_id, ATTEMPT.format(task), now))
            if task == 2:  # never committed: only its .pending records exist
                key = layout.pending(attempt, ATTEMPT.format(task), rel)
                one = dict(commits[-1], jobId="", taskId="")
                await store.put_object(b, key, json.dumps(one).encode())
                if h33:
                    await store.put_object(b, key[: -len(".pending")], b"")
        if task < 2:
            key = layout.pendingset(attempt, TASK.format(task))
            data = s3a_pendingset(job_id, commits)
            await store.put_object(b, key, data)
            saved[key.rpartition("/")[2]] = data
    return layout, saved


async def lay_out(uri: str, job_id: str) -> tuple[S3AJobLayout, dict[str, bytes]]:
    """:func:`lay_out_on` an engine configured from the environment (AWS_ENDPOINT_URL...)."""
    async with UploadEngine(EngineConfig()) as eng:
        return await lay_out_on(eng, uri, job_id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m zerorename.testing.s3acrash")
    parser.add_argument("dest", help="s3://bucket/destination")
    parser.add_argument("--job", default=None, help="the job's UUID (default: a new one)")
    parser.add_argument("--save-records", type=Path, help="also write the pendingsets here")
    args = parser.parse_args(argv)
    job_id = args.job or str(uuid.uuid4())
    layout, pendingsets = run(lay_out(args.dest, job_id))
    if args.save_records is not None:
        args.save_records.mkdir(parents=True, exist_ok=True)
        for name, data in pendingsets.items():
            (args.save_records / name).write_bytes(data)
    print(f"crashed S3A magic job {job_id} in {layout.uri(layout.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
