"""The engine's DeleteObjects after a lost answer, on the wire (moto behind the fault
proxy; moto ignores a DeleteObjects key's ETag, as Ceph RGW 16 does): the first send
takes effect, its answer is dropped, another writer puts a new object at the key, and
the engine asks the caller's ``recheck`` before it resends. A recheck that drops the key
keeps the new object (no resend reaches the store); without one, the blind resend deletes
it. This is what every release of the commit lock relies on (``commitlock._still``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from zerorename.engine import RetryConfig, UploadEngine
from zerorename.servers.faultproxy import FaultRule
from zerorename.servers.targets import S3Target

FAST_RETRY = RetryConfig(max_attempts=6, base_delay=0.02, max_delay=0.2, max_elapsed=60)


@pytest.mark.parametrize("recheck", [True, False], ids=["recheck", "blind"])
async def test_a_resend_after_a_lost_answer_asks_the_caller_first(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], recheck: bool
) -> None:
    s3 = moto_s3
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    config = s3.with_endpoint(proxy.url).engine_config(retry=FAST_RETRY)
    key, other = s3.key("lock.json"), s3.key("records/one")
    client = s3.boto3_client()
    old = client.put_object(Bucket=s3.bucket, Key=key, Body=b"ours")["ETag"]
    client.put_object(Bucket=s3.bucket, Key=other, Body=b"record")
    proxy.add_rule(FaultRule(operation="DeleteObjects", fault="drop_response", schedule={1}))
    asked: list[list[str]] = []

    async def still_ours(keys: list[str]) -> list[str]:
        # the first send took effect (the answer was dropped): another job takes the key
        client.put_object(Bucket=s3.bucket, Key=key, Body=b"another job's")
        asked.append(list(keys))
        now = client.head_object(Bucket=s3.bucket, Key=key)["ETag"]
        return keys if now == old else [k for k in keys if k != key]

    async def blind(keys: list[str]) -> list[str]:  # what the engine did before
        client.put_object(Bucket=s3.bucket, Key=key, Body=b"another job's")
        asked.append(list(keys))
        return keys

    async with UploadEngine(config) as engine:
        await engine.delete_objects(
            s3.bucket, [key, other], if_match={key: old}, recheck=still_ours if recheck else blind
        )
    assert asked == [[key, other]]  # once, before the one resend
    sent = [r for r in proxy.timed_log() if r.op == "DeleteObjects"]
    assert len(sent) == 2  # the dropped one and the resend (of `other` alone, or of both)
    there = client.list_objects_v2(Bucket=s3.bucket, Prefix=s3.key(""))
    keys = {o["Key"] for o in there.get("Contents", [])}
    if recheck:
        assert keys == {key}  # the other job's object is kept
        assert client.get_object(Bucket=s3.bucket, Key=key)["Body"].read() == b"another job's"
    else:
        assert keys == set()  # moto ignores the ETag: the blind resend deleted it
