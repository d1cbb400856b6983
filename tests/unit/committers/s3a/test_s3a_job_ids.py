"""The ids a Hadoop S3A magic job goes by. Hadoop 3.3.1 to 3.4 name a job's directory and
stamp each committed task's pendingset (header and entries) with the job's UUID: from
``fs.s3a.committer.uuid``, Spark's ``spark.sql.sources.writeJobUUID``, one generated
locally, or, failing those, the Hadoop JobID itself (``job_<timestamp>_<n>``:
AbstractS3ACommitter.buildJobUUID's last source); a task's ``.pending`` records carry an
empty jobId. zerorename finds, resumes and aborts a job by either form of id, in either
layout (Hadoop 3.4's ``__magic_job-<id>/``, 3.3's ``__magic/job-<id>/``)."""

from __future__ import annotations

import pytest

from zerorename.committers.paths import Destination
from zerorename.committers.s3a.jobs import abort_s3a_job, list_s3a_jobs, resume_s3a_job
from zerorename.committers.s3a.layout import S3ALayoutKind
from zerorename.testing.memstate import MemoryState
from zerorename.testing.memstore import MemoryStore
from zerorename.testing.s3acrash import lay_out_on

URI = "s3://bkt/out"
DEST = Destination.parse(URI)
IDS = ["3f2a9c1e-6c0b-4d57-9a59-0123456789ab", "job_202601010000_0001"]


@pytest.mark.parametrize("kind", list(S3ALayoutKind))
@pytest.mark.parametrize("job", IDS, ids=["uuid", "hadoop-jobid"])
@pytest.mark.parametrize("action", ["resume", "abort"])
async def test_a_job_named_by_either_id_is_listed_and_finished(
    job: str, kind: S3ALayoutKind, action: str
) -> None:
    state = MemoryState("bkt")
    store = MemoryStore(state)
    await lay_out_on(store, URI, job, kind)
    assert [e.job_id async for e in list_s3a_jobs(store, DEST)] == [job]
    if action == "resume":
        res = await resume_s3a_job(store, DEST, job)
        assert (res.files, res.success_written) == (4, True)
    else:
        ab = await abort_s3a_job(store, DEST, job)
        assert ab.rolled_back and len(ab.maybe_completed) == 2
    assert [e.job_id async for e in list_s3a_jobs(store, DEST)] == []
    assert not [k for k in state.objects("bkt") if "__magic" in k]
