"""Job/task protocol end to end on real servers: visibility, completeness, cleanup."""

from __future__ import annotations

import json

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

from zerorename.committers import CommitProgress, SuccessData, TaskCommitSummary
from zerorename.servers.targets import S3Target

#: every kind on both servers over HTTP; over HTTPS one magic job, on RGW's own TLS: the
#: kinds differ in when zerorename uploads, not in what TLS carries (test_tls_engine.py
#: sends both bodies, memory blocks and file ranges, over TLS to both servers)
KINDS_ON = [
    *(
        pytest.param(kind, target, marks=marks, id=f"{kind}-{target}")
        for kind in ["magic", "staging", "partitioned"]
        for target, marks in (("moto", ()), ("rgw", pytest.mark.rgw))
    ),
    pytest.param(
        "magic", "rgw-https", marks=[pytest.mark.rgw, pytest.mark.https], id="magic-rgw-https"
    ),
]


@pytest.mark.parametrize(("kind", "s3"), KINDS_ON, indirect=["s3"])
async def test_commit_is_complete_and_nothing_visible_before(
    s3: S3Target, kind: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    uri, prefix = dest_uri(s3), dest_prefix(s3)
    async with engine_for(s3) as eng:
        c = committer(kind, eng, uri, tmp=tmp_path)
        job = await c.setup_job()
        summaries = []
        expected = {}
        for t in range(3):
            ta = job.task_attempt(t, 0)
            await ta.setup()
            for f in range(2):
                rel = f"k=v {t}/fïle #{f}+%.csv"
                data = f"task {t} file {f} ü\n".encode() * (t + 1)
                await write(ta, rel, data)
                expected[ta.final_rel(rel)] = data
            assert ta.needs_commit()
            s = await ta.commit()
            assert s.files == 2 and s.bytes == sum(
                len(v) for k, v in expected.items() if k.startswith(f"k=v {t}/")
            )
            summaries.append(TaskCommitSummary.from_json(s.to_json()))
        assert data_objects(s3, prefix) == {}  # nothing visible before job commit
        assert all(job.job_id in k for k in uploads(s3, prefix))
        seen: list[CommitProgress] = []
        result = await job.commit(summaries, progress=seen.append)
    assert result.files == 6 and result.bytes == sum(map(len, expected.values()))
    assert data_objects(s3, prefix) == expected
    assert all(job.job_id in k for k in expected)
    assert uploads(s3, prefix) == []
    left = objects(s3, prefix)
    assert [k for k in left if "__magic" in k] == []
    success = SuccessData.from_json(left[prefix + "_SUCCESS"])
    assert success.job_id == job.job_id and success.metrics["files"] == 6
    assert sorted(success.filenames) == sorted("/" + prefix + k for k in expected)  # as S3A
    assert "secret" not in json.dumps(success.to_dict()).lower()
    assert s3.secret_key is None or s3.secret_key not in left[prefix + "_SUCCESS"].decode()
    assert seen and seen[-1].phase == "committed" and seen[-1].uploads_done == 6


async def test_job_commit_lists_pendingsets_without_summaries(s3: S3Target) -> None:
    uri, prefix = dest_uri(s3), dest_prefix(s3)
    async with engine_for(s3) as eng:
        job = await committer("magic", eng, uri).setup_job()
        for t in range(2):
            ta = job.task_attempt(t)
            await ta.setup()
            await write(ta, f"part-{t}.txt", b"x" * t)
            await ta.commit()
        res = await job.commit()
    assert res.files == 2
    assert sorted(data_objects(s3, prefix)) == sorted(
        f"part-{t}-{job.job_id}.txt" for t in range(2)
    )
