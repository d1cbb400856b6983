"""Record size caps enforced while reading, on real servers (issue 20, finding 9): an
oversized journal makes resume and abort fail in one line with the bucket unchanged, and
an object read whole with a cap is refused before its body is read (far less than the
object reaches the client)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from committer_helpers import bucket_state, committer, dest_uri, engine_for, write

from zerorename.committers import CommitterError, objectstore
from zerorename.committers.paths import Destination, JobLayout
from zerorename.engine import UploadEngine
from zerorename.engine.errors import ObjectTooLarge
from zerorename.servers.targets import S3Target
from zerorename.units import MiB


async def test_a_big_object_read_with_a_cap_is_refused_before_its_body(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """Read through the fault proxy, which counts the body bytes it handed the client: a
    48 MiB object read with the journal's 1 MiB cap is refused on its Content-Length, and
    what reached the client is bounded by socket buffers, not by the object."""
    s3 = moto_s3
    key = s3.key("big-record.json")
    size = 48 * MiB
    s3.boto3_client().put_object(Bucket=s3.bucket, Key=key, Body=b" " * size)
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    async with UploadEngine(s3.with_endpoint(proxy.url).engine_config()) as eng:
        with pytest.raises(ObjectTooLarge) as err:
            await eng.get_object(s3.bucket, key, max_size=objectstore.JOURNAL_CAP)
        assert await eng.get_object(s3.bucket, key, max_size=size) == b" " * size
    assert key in str(err.value) and str(objectstore.JOURNAL_CAP) in str(err.value)
    assert "\n" not in str(err.value)
    assert proxy.stats.requests("GetObject") == 2  # refused once, not retried
    # both reads' bodies as handed to the client: the whole object once, and what the
    # refused read left in socket buffers before the client closed its connection
    refused = proxy.stats.body_bytes - size
    assert 0 <= refused < size // 4, f"{refused} body bytes reached the refused read"


@pytest.mark.parametrize("action", ["resume", "abort"])
async def test_an_oversized_journal_changes_nothing(
    moto_s3: S3Target, tmp_path: Path, action: str
) -> None:
    s3 = moto_s3
    uri = dest_uri(s3)
    async with engine_for(s3) as eng:
        c = committer("magic", eng, uri, tmp=tmp_path)
        job = await c.setup_job()
        ta = job.task_attempt(0)
        await ta.setup()
        await write(ta, "a.csv", b"a")
        await ta.commit()
        key = JobLayout(Destination.parse(uri), job.job_id).journal
        s3.boto3_client().put_object(
            Bucket=s3.bucket, Key=key, Body=b" " * (objectstore.JOURNAL_CAP + 1)
        )
        before = bucket_state(s3)
        with pytest.raises(CommitterError) as err:
            await getattr(await c.open_job(job.job_id), action)()
    msg = str(err.value)
    assert key in msg and f"{objectstore.JOURNAL_CAP} bytes" in msg and "\n" not in msg
    assert bucket_state(s3) == before
