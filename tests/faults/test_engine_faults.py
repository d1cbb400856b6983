"""The engine's retry path under faults injected on the wire by the FaultProxy."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from zerorename.engine import (
    BytesSent,
    ConcurrencyChanged,
    EngineConfig,
    RetryConfig,
    RetryScheduled,
    Throttled,
    UploadEngine,
    errors,
)
from zerorename.servers.faultproxy import FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only; the others name
#: their servers (the rule in tests/conftest.py's docstring: a fault the proxy answers itself
#: never reaches the store; a forwarded request whose answer is lost does)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)
_MOTO_HTTPS = pytest.param("moto-https", marks=pytest.mark.https, id="moto-https")
_RGW = pytest.param("rgw", marks=pytest.mark.rgw, id="rgw")
_RGW_HTTPS = pytest.param("rgw-https", marks=[pytest.mark.rgw, pytest.mark.https], id="rgw-https")

FAST_RETRY = RetryConfig(max_attempts=12, base_delay=0.02, max_delay=0.5, max_elapsed=120)


def proxied(s3: S3Target, fault_proxy: Callable[..., Any], **kw: Any) -> tuple[Any, EngineConfig]:
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    kw.setdefault("part_size", 5 * MiB)
    kw.setdefault("retry", FAST_RETRY)
    return proxy, s3.with_endpoint(proxy.url).engine_config(**kw)


def md5_of(s3: S3Target, key: str) -> str:
    body = s3.boto3_client().get_object(Bucket=s3.bucket, Key=key)["Body"]
    h = hashlib.md5()
    for chunk in iter(lambda: body.read(1 << 20), b""):
        h.update(chunk)
    return h.hexdigest()


def pending(s3: S3Target) -> list[str]:
    resp = s3.boto3_client().list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix)
    return [u["Key"] for u in resp.get("Uploads", [])]


def stream(total: int, seed: int = 7) -> Iterator[bytes]:
    """Deterministic pseudo-random blocks (so the expected digest is known)."""
    block = hashlib.sha256(str(seed).encode()).digest() * (1 << 15)  # 1 MiB
    sent = 0
    while sent < total:
        n = min(len(block), total - sent)
        yield block[:n]
        sent += n


def stream_md5(total: int) -> str:
    h = hashlib.md5()
    for b in stream(total):
        h.update(b)
    return h.hexdigest()


@MOTO
async def test_slowdown_on_30_percent_of_parts_200_mib(
    s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """200 MiB through 30% 503 SlowDown on UploadPart: byte-identical, with retries and
    a lowered concurrency visible in the statistics and the events."""
    size = 200 * MiB
    proxy, config = proxied(s3, fault_proxy, max_concurrency=8)
    proxy.add_rule(FaultRule(operation="UploadPart", fault="slowdown", rate=0.3, seed=11))
    events: list[Any] = []
    key = s3.key("throttled/200MiB.bin")
    async with UploadEngine(config, on_event=events.append) as engine:
        result = await engine.upload(s3.bucket, key, stream(size))
        stats = engine.stats
    assert result.length == size
    assert md5_of(s3, key) == stream_md5(size)
    injected = proxy.stats.faults("UploadPart", "slowdown")
    assert injected > 0
    assert stats.throttles == injected
    assert stats.retries >= injected
    assert stats.lowest_concurrency < 8
    assert any(isinstance(e, ConcurrencyChanged) and e.reason == "throttled" for e in events)
    assert sum(isinstance(e, Throttled) for e in events) == injected
    assert sum(isinstance(e, RetryScheduled) for e in events) == stats.retries
    rolled_back = -sum(e.delta for e in events if isinstance(e, BytesSent) and e.rollback)
    assert rolled_back == injected * 5 * MiB
    assert sum(e.delta for e in events if isinstance(e, BytesSent)) == size
    assert pending(s3) == []


@MOTO
async def test_internal_error_on_complete_is_retried(
    s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    proxy, config = proxied(s3, fault_proxy)
    proxy.add_rule(
        FaultRule(operation="CompleteMultipartUpload", fault="internal_error", schedule={1, 2})
    )
    data = os.urandom(11 * MiB)
    key = s3.key("complete-500.bin")
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, key, data, defer=True)
        await engine.complete(pend)
        assert engine.stats.transient_errors == 2
    assert proxy.stats.faults("CompleteMultipartUpload") == 2
    assert md5_of(s3, key) == hashlib.md5(data).hexdigest()


# over TLS on both servers (a dead TLS connection; RGW refuses trailers over HTTPS); plain
# HTTP on moto: the half body the proxy forwards reaches RGW the same way over either
@pytest.mark.parametrize("s3", ["moto", _MOTO_HTTPS, _RGW_HTTPS], indirect=True)
async def test_connection_reset_mid_body_is_retried(
    s3: S3Target, fault_proxy: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    """Two resets mid-body: each re-send goes through the engine's retry policy (aiohttp
    does not re-send by itself, below the stats), and nothing more is written into the
    dead connection (asyncio logs "socket.send() raised exception." when it is)."""
    proxy, config = proxied(s3, fault_proxy, max_concurrency=2)
    proxy.add_rule(
        FaultRule(
            operation="UploadPart", fault="reset", reset_after_bytes=256 << 10, schedule={1, 3}
        )
    )
    data = os.urandom(16 * MiB)
    key = s3.key("reset.bin")
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        async with UploadEngine(config) as engine:
            await engine.upload(s3.bucket, key, data)
            stats = engine.stats
    assert proxy.stats.faults("UploadPart", "reset") == 2
    assert (stats.transient_errors, stats.retries) == (2, 2)
    assert stats.by_operation["UploadPart"] == 4 + 2
    # a store that refuses trailers (RGW over HTTPS) gets the refused part again, two-pass
    sent = 4 + 2 + stats.trailer_fallbacks
    assert proxy.stats.requests("UploadPart") == sent
    assert "socket.send() raised exception" not in caplog.text
    assert "SSL connection is closed" not in caplog.text
    assert md5_of(s3, key) == hashlib.md5(data).hexdigest()


@pytest.mark.also_https
async def test_stall_hits_read_timeout_and_is_retried(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    s3 = moto_s3
    proxy, config = proxied(s3, fault_proxy, read_timeout=1.0)
    proxy.add_rule(FaultRule(operation="UploadPart", fault="stall", delay=5.0, schedule={2}))
    data = os.urandom(11 * MiB)
    async with UploadEngine(config) as engine:
        await engine.upload(s3.bucket, s3.key("stall.bin"), data)
        # the stall is one read timeout; a loaded machine (tests run side by side) may make
        # another part's answer outlast the 1 s too: each such timeout is retried as well
        assert engine.stats.transient_errors >= 1
        assert engine.stats.retries == engine.stats.transient_errors
    assert proxy.stats.faults("UploadPart", "stall") == 1
    assert md5_of(s3, s3.key("stall.bin")) == hashlib.md5(data).hexdigest()


async def test_latency_is_survived(moto_s3: S3Target, fault_proxy: Callable[..., Any]) -> None:
    s3 = moto_s3
    proxy, config = proxied(s3, fault_proxy)
    proxy.add_rule(FaultRule(operation=None, fault="latency", delay=0.2))
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, s3.key("slow.bin"), b"abc", defer=True)
        await engine.complete(pend)
        assert engine.stats.retries == 0
    assert proxy.stats.faults(kind="latency") >= 3
    # survived means the object is there, whole
    assert md5_of(s3, s3.key("slow.bin")) == hashlib.md5(b"abc").hexdigest()


# the retried complete reaches the store (RGW answers a repeated complete its own way); a
# lost answer over TLS once, on moto (how the client sees it is the client's)
@pytest.mark.parametrize("s3", ["moto", _RGW, _MOTO_HTTPS], indirect=True)
async def test_lost_complete_response_is_recognised(
    s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """The store completes but the answer is lost: the retry must not report failure."""
    proxy, config = proxied(s3, fault_proxy)
    proxy.add_rule(
        FaultRule(operation="CompleteMultipartUpload", fault="drop_response", schedule={1})
    )
    data = os.urandom(6 * MiB)
    key = s3.key("lost-answer.bin")
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, key, data, defer=True)
        result = await engine.complete(pend)
    assert result.length == len(data)
    assert md5_of(s3, key) == hashlib.md5(data).hexdigest()


@MOTO
async def test_throttling_past_the_budget_fails_and_leaves_nothing(
    s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    retry = RetryConfig(max_attempts=3, base_delay=0.01, max_delay=0.05)
    proxy, config = proxied(s3, fault_proxy, retry=retry)
    proxy.add_rule(FaultRule(operation="UploadPart", fault="slowdown", rate=1.0))
    async with UploadEngine(config) as engine:
        with pytest.raises(errors.RetriesExhausted, match="SlowDown"):
            await engine.upload(s3.bucket, s3.key("never.bin"), os.urandom(11 * MiB))
        assert engine.stats.uploads_aborted == 1
    assert pending(s3) == []


async def test_throttled_batch_completes_everything(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    s3 = moto_s3
    proxy, config = proxied(s3, fault_proxy)
    async with UploadEngine(config) as engine:
        records = [
            await engine.upload(s3.bucket, s3.key(f"b/{i}"), b"%d" % i, defer=True)
            for i in range(40)
        ]
        proxy.add_rule(
            FaultRule(operation="CompleteMultipartUpload", fault="slowdown", rate=0.3, seed=3)
        )
        result = await engine.complete_many(records, concurrency=16)
    assert (result.succeeded, result.failed) == (40, 0)
    assert proxy.stats.faults("CompleteMultipartUpload") > 0
    assert pending(s3) == []


async def test_same_size_racer_during_a_retried_complete_is_not_taken_for_ours(
    moto_s3: S3Target, fault_proxy: Callable[..., Any]
) -> None:
    """Our first complete's answer is lost and nothing was completed (the proxy resets
    before forwarding); meanwhile a racer PUTs the same number of bytes. The retry with
    If-None-Match gets 412: the engine must not mistake the racer's object for ours."""
    s3 = moto_s3
    proxy, config = proxied(s3, fault_proxy)
    key = s3.key("race.bin")
    ours = os.urandom(6 * MiB)
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, key, ours, defer=True)
        proxy.add_rule(
            FaultRule(
                operation="CompleteMultipartUpload",
                fault="reset",
                reset_after_bytes=0,
                schedule={1},
            )
        )
        racer = os.urandom(len(ours))
        s3.boto3_client().put_object(Bucket=s3.bucket, Key=key, Body=racer)
        with pytest.raises(errors.PreconditionFailed):
            await engine.complete(pend, if_none_match=True)
        await engine.abort(pend)
    assert md5_of(s3, key) == hashlib.md5(racer).hexdigest()
    assert proxy.stats.faults("CompleteMultipartUpload", "reset") == 1


# each send path on both servers (forwarded retries reach the store) and over TLS once
@pytest.mark.parametrize("s3", ["moto", _RGW, _MOTO_HTTPS], indirect=True)
@pytest.mark.parametrize("fast", [True, False], ids=["fast_path", "botocore"])
async def test_every_hot_call_is_retried_the_same_either_way(
    s3: S3Target, fault_proxy: Callable[..., Any], fast: bool
) -> None:
    """A 500 on Create, a 503 SlowDown and a reset mid-body on UploadPart, a lost complete
    answer, a SlowDown on PutObject and a 500 on Abort: the same retries, statistics and
    result through the fast path (which sends all of these itself) as through botocore."""
    from zerorename.engine.wire.client import FastClient

    proxy, config = proxied(s3, fault_proxy, max_concurrency=2, fast_path=fast)
    for rule in (
        FaultRule(operation="CreateMultipartUpload", fault="internal_error", schedule={1}),
        FaultRule(operation="UploadPart", fault="slowdown", schedule={2}),
        FaultRule(operation="UploadPart", fault="reset", reset_after_bytes=0, schedule={4}),
        FaultRule(operation="CompleteMultipartUpload", fault="drop_response", schedule={1}),
        FaultRule(operation="PutObject", fault="slowdown", schedule={1}),
        FaultRule(operation="AbortMultipartUpload", fault="internal_error", schedule={1}),
    ):
        proxy.add_rule(rule)
    data = os.urandom(16 * MiB)
    key = s3.key("every-call.bin")
    async with UploadEngine(config) as engine:
        done = await engine.upload(s3.bucket, key, data)
        await engine.upload(s3.bucket, s3.key("small.bin"), b"small")
        gone = await engine.upload(s3.bucket, s3.key("gone.bin"), b"x", defer=True)
        assert await engine.abort(gone)
        stats = engine.stats
        client = engine._client
        if fast:
            assert isinstance(client, FastClient) and client.handed_over == {}
            assert client.sent["UploadPart"] >= 5 and client.sent["AbortMultipartUpload"] == 2
        else:
            assert not isinstance(client, FastClient)
    assert done.length == len(data) and done.parts == 4
    assert md5_of(s3, key) == hashlib.md5(data).hexdigest()
    assert proxy.stats.faults() == 6
    assert stats.throttles == 2
    assert stats.transient_errors in (3, 4)  # a reset on a reused connection: aiohttp resends
    assert stats.retries == stats.throttles + stats.transient_errors
    assert stats.fatal_errors == 0
    assert pending(s3) == []
