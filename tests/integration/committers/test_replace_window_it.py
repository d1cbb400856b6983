"""The replace's window on each real store (issue 24, item 7): an older object rewritten
after the replace's last listing, before its DeleteObjects. The replace sends each
planned object's ETag with the delete; S3 then keeps the rewritten object. What each
store here does with that ETag, as measured (moto 5.2.5, Ceph RGW 16.2.15): both accept
the request and ignore the ETag, so there the rewritten object is deleted (the window
the README names). The in-memory store's honouring is in
tests/unit/committers/commit/test_replace_window.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from committer_helpers import committer, data_objects, dest_prefix, dest_uri, engine_for, write

from zerorename.committers.commit.storage import plan_replacement, run_replacement
from zerorename.servers.targets import S3Target

#: does the store keep an object whose DeleteObjects ETag is not its own? (measured)
HONOURS_DELETE_ETAG = {"moto": False, "rgw": False}


async def test_replace_with_a_rewrite_in_its_window(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """A replace deletes the older objects it planned (through the conditional delete);
    ``old.csv`` rewritten right after run_replacement's listing was answered (its
    ``meanwhile`` waits for that in the proxy's log, and nothing is deleted before it
    returned) is kept or deleted as the store treats the ETag."""
    proxy = fault_proxy(s3.endpoint_url)
    via = s3.with_endpoint(proxy.url)
    prefix = dest_prefix(s3)
    c = s3.boto3_client()
    for name in ("old.csv", "other.csv"):
        c.put_object(Bucket=s3.bucket, Key=prefix + name, Body=b"older")
    async with engine_for(via) as eng:
        job = await committer("magic", eng, dest_uri(s3), "replace", tmp_path).setup_job()
        ta = job.task_attempt(0)
        await ta.setup()
        await write(ta, "new.csv", b"new")
        await job.commit([await ta.commit()])  # a whole replace: the older ones are gone
        new = f"new-{job.job_id}.csv"
        assert data_objects(s3, prefix) == {new: b"new"}

        prefix = dest_prefix(s3, "w")  # a destination with two older objects only
        for name in ("old.csv", "other.csv"):
            c.put_object(Bucket=s3.bucket, Key=prefix + name, Body=b"older")
        prefixes = (prefix,)
        job2 = await committer("magic", eng, dest_uri(s3, "w"), "replace", tmp_path).setup_job()
        plan = await plan_replacement(job2.context, prefixes)
        assert sorted(o.key for o in plan) == [prefix + "old.csv", prefix + "other.csv"]
        proxy.reset()

        async def rewrite_after_the_listing() -> None:
            while True:  # the proxy logs a request once its answer went out
                if any(r.op == "ListObjectsV2" for r in proxy.stats.timed()):
                    break
                await anyio.sleep(0.01)
            c.put_object(Bucket=s3.bucket, Key=prefix + "old.csv", Body=b"rewritten")

        deleted = await run_replacement(
            job2.context, prefixes, plan, meanwhile=rewrite_after_the_listing()
        )
        await job2.abort()
    ops = [r.op for r in proxy.stats.timed()]
    assert ops.index("ListObjectsV2") < ops.index("DeleteObjects")
    left = data_objects(s3, prefix)
    if s3.name in HONOURS_DELETE_ETAG and not HONOURS_DELETE_ETAG[s3.name]:
        assert (deleted, left) == (2, {}), f"{s3.name} now honours the ETag: update the table"
    else:  # S3 (an external target) honours it: the rewrite is kept
        assert (deleted, left) == (1, {"old.csv": b"rewritten"})
