"""File sources under faults on the wire. Their parts are ranges of the file, sent with
sendfile (or written as fresh blocks) and read again for every retry: a connection reset
at any point of a body, or a 503 after the whole body, must still leave exactly the
file's bytes, with every part's ETag and checksum the file's. A peer that stops reading
mid-body is given up on after the read timeout (not waited for forever)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import SEND_MODES, check_parts, data_file, open_engine, zero_copy_bytes
from zerorename.engine import EngineConfig, RetryConfig, UploadEngine, errors
from zerorename.servers.faultproxy import FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

PART = 5 * MiB
FAST_RETRY = RetryConfig(max_attempts=8, base_delay=0.02, max_delay=0.3, max_elapsed=120)


def pending(s3: S3Target) -> list[str]:
    resp = s3.boto3_client().list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix)
    return [u["Key"] for u in resp.get("Uploads", [])]


#: every cut on moto; on RGW one cut inside the body, each way the bytes go: the half part
#: the proxy forwards reaches the gateway, which must drop it (where the cut falls is the
#: proxy's, the re-read of the range zerorename's own)
RESETS_ON = [
    *(
        pytest.param("moto", mode, after, id=f"moto-{mode}-{name}")
        for mode in SEND_MODES
        for after, name in ((0, "0"), (256 << 10, "256K"), (3 * MiB + 1, "3M+1"))
    ),
    *(
        pytest.param("rgw", mode, 256 << 10, marks=pytest.mark.rgw, id=f"rgw-{mode}-256K")
        for mode in SEND_MODES
    ),
]


@pytest.mark.parametrize(("s3", "mode", "reset_after"), RESETS_ON, indirect=["s3"])
async def test_resets_mid_body_leave_the_files_bytes(
    s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path, mode: str, reset_after: int
) -> None:
    """The proxy cuts the 1st and 3rd UploadPart after ``reset_after`` body bytes (RST);
    two parts in flight, so the connections in use carry other parts before and after."""
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(
        FaultRule(
            operation="UploadPart", fault="reset", reset_after_bytes=reset_after, schedule={1, 3}
        )
    )
    config = s3.with_endpoint(proxy.url).engine_config(
        part_size=PART, max_concurrency=2, retry=FAST_RETRY, fast_path=mode != "botocore"
    )
    path, data = data_file(tmp_path, 4 * PART + 4321)
    key = s3.key(f"reset-{mode}-{reset_after}.bin")
    engine = await open_engine(config, mode)
    async with engine:
        record = await engine.upload(s3.bucket, key, path, defer=True)
        await engine.complete(record)
        stats = engine.stats
        sent = zero_copy_bytes(engine)
    assert proxy.stats.faults("UploadPart", "reset") == 2
    # aiohttp resends an idempotent request by itself once when a reused keep-alive
    # connection breaks (a file part's payload can be sent again); the rest reach the engine
    assert stats.transient_errors <= 2 and stats.fatal_errors == 0
    assert stats.retries == stats.transient_errors
    assert proxy.stats.requests("UploadPart") == 5 + 2
    if mode == "sendfile":  # every attempt that got past its headers went out with sendfile
        assert len(data) + 2 * reset_after <= sent <= len(data) + 2 * PART
    else:
        assert sent == 0
    check_parts(s3, key, record, data, PART)
    assert pending(s3) == []


@pytest.mark.parametrize("mode", ["sendfile", "writes"])
async def test_a_slowdown_after_the_body_re_reads_the_range(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path, mode: str
) -> None:
    s3 = moto_s3
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="UploadPart", fault="slowdown", schedule={1, 2, 5, 6}))
    config = s3.with_endpoint(proxy.url).engine_config(
        part_size=PART, max_concurrency=3, retry=FAST_RETRY
    )
    path, data = data_file(tmp_path, 6 * PART - 1)
    key = s3.key(f"slowdown-{mode}.bin")
    engine = await open_engine(config, mode)
    async with engine:
        record = await engine.upload(s3.bucket, key, path, defer=True)
        await engine.complete(record)
        throttles = engine.stats.throttles
        sent = zero_copy_bytes(engine)
    injected = proxy.stats.faults("UploadPart", "slowdown")
    assert injected > 0 and throttles == injected
    if mode == "sendfile":  # each throttled attempt had sent its whole part (the last: -1)
        assert len(data) + injected * (PART - 1) <= sent <= len(data) + injected * PART
    else:
        assert sent == 0
    check_parts(s3, key, record, data, PART)


@pytest.fixture
async def deaf_server() -> AsyncIterator[tuple[str, list[int]]]:
    """An HTTP server that reads a request's head and 64 KiB of its body, then stops
    reading and never answers (a peer gone deaf mid-body). Yields (url, bytes read per
    connection)."""
    received: list[int] = []
    hold: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hold.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        got = len(await reader.readexactly(64 << 10))
        received.append(got)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        for w in hold:
            w.transport.abort()
        server.close()
        await server.wait_closed()


async def test_a_peer_that_stops_reading_times_out(
    deaf_server: tuple[str, list[int]], tmp_path: Path
) -> None:
    """A 48 MiB file as one PutObject (more than the socket buffers hold): sendfile finds
    no room, waits at most read_timeout per attempt, and the retries give up."""
    url, received = deaf_server
    config = EngineConfig(
        endpoint_url=url,
        region="us-east-1",
        addressing_style="path",
        aws_access_key_id="AKIDDEAF000000000001",
        aws_secret_access_key="deaf",
        part_size=64 * MiB,
        read_timeout=0.5,
        retry=RetryConfig(max_attempts=2, base_delay=0.01, max_delay=0.02, max_elapsed=30),
    )
    path, _ = data_file(tmp_path, 48 * MiB)
    async with UploadEngine(config) as engine:
        # the server never reads again, so only the read timeout can end an attempt (were it
        # not applied, the upload would hang until the run's per-test timeout fails it)
        with pytest.raises(errors.S3Error, match=r"ReadTimeout"):
            await engine.upload("deaf-bucket", "k", path)
        assert engine.stats.transient_errors == 2
        assert 0 < zero_copy_bytes(engine) < 48 * MiB
    assert received == [64 << 10, 64 << 10]
