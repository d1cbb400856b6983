"""Issue 20's bounds on the wire, through the FaultProxy: a lost complete is settled only
by proof (finding 6), every attempt has a deadline (finding 8), and a record read stops at
its size cap while reading (finding 9)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pytest

from zerorename.engine import EngineConfig, RetryConfig, UploadEngine, errors
from zerorename.engine.results import PendingUpload, multipart_etag
from zerorename.servers.faultproxy import FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

FAST_RETRY = RetryConfig(max_attempts=4, base_delay=0.01, max_delay=0.05, max_elapsed=60)


def proxied(s3: S3Target, fault_proxy: Callable[..., Any], **kw: Any) -> tuple[Any, EngineConfig]:
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    kw.setdefault("part_size", 5 * MiB)
    kw.setdefault("retry", FAST_RETRY)
    return proxy, s3.with_endpoint(proxy.url).engine_config(**kw)


def lose_first_complete(proxy: Any) -> None:
    """The first complete gets a 500 (not forwarded): the engine retries it."""
    proxy.add_rule(
        FaultRule(operation="CompleteMultipartUpload", fault="internal_error", schedule={1})
    )


# ---------------------------------------------------------------- finding 6
# S3 answers a complete whose upload is gone with 404 NoSuchUpload; neither moto (a 500 from
# a KeyError) nor RGW ("multipart completion already in progress", a 500) does, so the
# proxy answers attempt 2 as S3 would (``no_such_upload``), not forwarding it.


def answers(proxy: Any, first: str) -> None:
    """Attempt 1 of the complete meets ``first``; attempt 2 gets S3's NoSuchUpload."""
    for fault, n in ((first, 1), ("no_such_upload", 2)):
        proxy.add_rule(FaultRule(operation="CompleteMultipartUpload", fault=fault, schedule={n}))


async def test_a_lost_complete_that_took_effect_is_proven_ours(
    s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """The store completes, the answer is lost; the retry meets NoSuchUpload and the
    object's ETag is the multipart ETag of our parts: settled, the same result. On moto
    and RGW: both give parts MD5 ETags and the object the MD5-of-MD5s '-N' ETag."""
    proxy, config = proxied(s3, fault_proxy)
    answers(proxy, "drop_response")
    data = os.urandom(6 * MiB)
    key = s3.key("lost-proven.bin")
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, key, data, defer=True)
        result = await engine.complete(pend)
    head = s3.boto3_client().head_object(Bucket=s3.bucket, Key=key)
    assert head["ETag"].strip('"') == multipart_etag(pend) == result.etag.strip('"')
    assert proxy.stats.faults("CompleteMultipartUpload") == 2
    assert proxy.stats.requests("CompleteMultipartUpload") == 2


@pytest.mark.parametrize("foreign", ["single_put", "other_parts"])
async def test_a_retried_complete_refuses_another_writers_same_size_object(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], foreign: str
) -> None:
    """Attempt 1 gets a 500; meanwhile our upload is aborted (a lifecycle rule) and another
    writer puts an object of exactly our size at the key (a single PUT, or a multipart
    upload of other parts). Attempt 2 gets NoSuchUpload: the engine must refuse in one
    line naming the key, and leave the other writer's object as it is."""
    s3 = moto_s3
    proxy, config = proxied(s3, fault_proxy)
    key = s3.key(f"racer-{foreign}.bin")
    ours = os.urandom(6 * MiB)
    boto = s3.boto3_client()
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, key, ours, defer=True)
        boto.abort_multipart_upload(Bucket=s3.bucket, Key=key, UploadId=pend.upload_id)
        theirs = os.urandom(len(ours))
        if foreign == "single_put":
            boto.put_object(Bucket=s3.bucket, Key=key, Body=theirs)
        else:  # 5 MiB + 1 MiB too, but other bytes: a '-2' ETag that is not ours
            await engine.complete(await engine.upload(s3.bucket, key, theirs, defer=True))
        before = boto.head_object(Bucket=s3.bucket, Key=key)["ETag"]
        sent = proxy.stats.requests("CompleteMultipartUpload")
        answers(proxy, "internal_error")
        with pytest.raises(errors.CompletionUnproven) as err:
            await engine.complete(pend)
    msg = str(err.value)
    assert key in msg and "another writer's" in msg and "\n" not in msg
    assert isinstance(err.value, errors.UploadNotFound)
    got = boto.get_object(Bucket=s3.bucket, Key=key)
    assert got["ETag"] == before and got["Body"].read() == theirs
    assert proxy.stats.requests("CompleteMultipartUpload") - sent == 2


async def test_a_lost_complete_cannot_be_proven_when_part_etags_are_not_md5s(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """Under SSE-KMS (or SSE-C) part ETags are not MD5s, so the multipart ETag of our parts
    cannot be computed: even our own completed object is not taken on its size. Here the
    upload is completed (with its real part ETags) behind the engine's back, and the
    engine completes a copy of the record whose part ETags are not MD5s: attempt 1 gets a
    500, attempt 2 NoSuchUpload, and the engine refuses rather than guess."""
    s3 = moto_s3
    proxy, config = proxied(s3, fault_proxy)
    key = s3.key("kms-like.bin")
    boto = s3.boto3_client()
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, key, os.urandom(6 * MiB), defer=True)
        parts = [{"PartNumber": p.number, "ETag": p.etag} for p in pend.parts]
        boto.complete_multipart_upload(
            Bucket=s3.bucket, Key=key, UploadId=pend.upload_id, MultipartUpload={"Parts": parts}
        )
        kms = dataclasses.replace(
            pend,
            parts=tuple(dataclasses.replace(p, etag=f'"kms{p.number}"') for p in pend.parts),
        )
        assert isinstance(kms, PendingUpload) and multipart_etag(kms) is None
        answers(proxy, "internal_error")
        with pytest.raises(errors.CompletionUnproven, match="not MD5s") as err:
            await engine.complete(kms)
    assert key in str(err.value)


# ---------------------------------------------------------------- finding 8
# A server that drips its answer one byte at a time never trips the socket's read timeout;
# each attempt's deadline (retry.attempt_timeout) ends it. No wall-clock assertion: the
# error's kind and the number of requests the proxy saw are what the deadline implies.

DRIP = 0.3  # seconds between two bytes of a dripped answer
SHORT = RetryConfig(
    max_attempts=3, base_delay=0.01, max_delay=0.05, max_elapsed=60, attempt_timeout=1.0
)


def drip(proxy: Any, operation: str) -> None:
    proxy.add_rule(FaultRule(operation=operation, fault="drip", delay=DRIP))


@pytest.mark.timeout(120)
async def test_a_dripped_get_fails_each_attempt_at_its_deadline(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    s3 = moto_s3
    key = s3.key("drip.bin")
    s3.boto3_client().put_object(Bucket=s3.bucket, Key=key, Body=b"0123456789abcdef")
    proxy, config = proxied(s3, fault_proxy, retry=SHORT)
    drip(proxy, "GetObject")
    async with UploadEngine(config) as engine:
        with pytest.raises(errors.RetriesExhausted) as err:
            await engine.get_object(s3.bucket, key)
    assert err.value.code == "DeadlineExceeded" and key in str(err.value)
    assert "attempt_timeout" in str(err.value) and "\n" not in str(err.value)
    assert proxy.stats.requests("GetObject") == SHORT.max_attempts  # one GET per attempt
    assert proxy.stats.faults("GetObject", "drip") == SHORT.max_attempts


@pytest.mark.timeout(120)
async def test_a_dripped_listing_is_bounded_by_max_elapsed_plus_one_deadline(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """`zerorename jobs list` hung on a dripped ListObjectsV2. Every attempt lasts at least
    its deadline, and none starts after max_elapsed (2.5 deadlines): at most 3 attempts,
    however many max_attempts allows."""
    s3 = moto_s3
    s3.boto3_client().put_object(Bucket=s3.bucket, Key=s3.key("a"), Body=b"a")
    retry = dataclasses.replace(SHORT, max_attempts=100, max_elapsed=2.5)
    proxy, config = proxied(s3, fault_proxy, retry=retry)
    drip(proxy, "ListObjectsV2")
    async with UploadEngine(config) as engine:
        with pytest.raises(errors.RetriesExhausted) as err:
            _ = [o async for o in engine.list_objects(s3.bucket, s3.prefix)]
    assert err.value.code == "DeadlineExceeded"
    assert 1 <= proxy.stats.requests("ListObjectsV2") <= 3


@pytest.mark.timeout(120)
async def test_a_dripped_stream_resumes_then_gives_up(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """iter_object bounds the time each GET waits for the store: a dripped body makes a
    little progress per GET, each GET ends at its deadline and resumes with a ranged GET,
    until max_attempts resumes were spent."""
    s3 = moto_s3
    key = s3.key("drip-stream.bin")
    s3.boto3_client().put_object(Bucket=s3.bucket, Key=key, Body=b"x" * 64)
    proxy, config = proxied(s3, fault_proxy, retry=SHORT)
    drip(proxy, "GetObject")
    got = b""
    async with UploadEngine(config) as engine:
        with pytest.raises(errors.RetriesExhausted) as err:
            async for chunk in engine.iter_object(s3.bucket, key, chunk_size=1024):
                got += chunk
    assert err.value.code == "DeadlineExceeded" and key in str(err.value)
    assert got == b"x" * len(got) and len(got) < 64
    assert proxy.stats.requests("GetObject") == SHORT.max_attempts + 1
