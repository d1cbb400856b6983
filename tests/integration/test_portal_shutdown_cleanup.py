"""A clean-up still running when the process portal closes (a Spark driver's exit while a
rollback runs) finishes on an open engine: the portal waits for the callers' work before
it closes the engines, not after (it closed them first, so the clean-up's next request
failed and what it meant to delete stayed)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from zerorename.aio import to_the_end
from zerorename.engine import UploadEngine
from zerorename.portal import LoopPortal
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target


def test_close_lets_a_running_clean_up_finish_before_the_engine_closes(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """The clean-up (a HEAD, then the delete it decides) is held at its HEAD by the proxy
    when close() begins; its delete must still be sent, on the engine close() closes
    only afterwards. Ordered by the proxy's request counter, not by time."""
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="HeadObject", fault="latency", delay=1.0))
    bucket, key = moto_s3.bucket, moto_s3.key("rolled-back")
    client = moto_s3.boto3_client()
    client.put_object(Bucket=bucket, Key=key, Body=b"uncommitted")
    portal = LoopPortal()
    try:
        engine = portal.resource(
            "engine", lambda: UploadEngine(moto_s3.with_endpoint(proxy.url).engine_config())
        )

        async def clean_up() -> None:
            if await engine.head_object(bucket, key) is not None:
                await engine.delete_objects(bucket, [key])

        portal.start(to_the_end(clean_up()))
        deadline = time.monotonic() + 60  # against a hang only: nothing is timed
        while proxy.stats.requests("HeadObject") == 0:
            assert time.monotonic() < deadline, "the clean-up's HEAD never arrived"
            time.sleep(0.01)
    finally:
        portal.close()
    assert proxy.stats.requests("DeleteObjects") == 1, proxy.stats
    assert client.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", []) == []
