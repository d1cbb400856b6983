"""Trailing checksums under faults on the wire, over HTTPS (the TLS fault proxy in front of
moto and Ceph RGW; the engine's default ``trailer_checksum="auto"``). A reset or a 5xx of
the first trailer request -- the one that decides for the endpoint while the other parts
wait -- decides nothing: it is retried with a trailer, and the store's real answer decides
(moto takes trailers, RGW pacific refuses them once). A success that is not an S3 answer
stays :class:`BadAnswer`, never a reason to re-send. The object and every part's ETag
and CRC32C are the file's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import check_parts, data_file, open_engine, pending_keys
from zerorename.engine import RetryConfig, errors
from zerorename.engine.wire.client import FastClient, TrailerState
from zerorename.servers.faultproxy import FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

PART = 5 * MiB
FAST_RETRY = RetryConfig(max_attempts=8, base_delay=0.02, max_delay=0.3, max_elapsed=120)


_FAULTS: dict[str, tuple[str, int | None]] = {
    "reset-0": ("reset", 0),
    "reset-256K": ("reset", 256 << 10),
    "reset-3M+1": ("reset", 3 * MiB + 1),
    "500": ("internal_error", None),
}
#: every fault on moto; on RGW a cut probe (its half body reaches the gateway) and a 500:
#: then RGW's own refusal decides (where the proxy cuts is the proxy's)
PROBE_FAULTS_ON = [
    *(
        pytest.param("moto-https", *fault, marks=pytest.mark.https, id=f"moto-https-{name}")
        for name, fault in _FAULTS.items()
    ),
    *(
        pytest.param(
            "rgw-https",
            *_FAULTS[name],
            marks=[pytest.mark.rgw, pytest.mark.https],
            id=f"rgw-https-{name}",
        )
        for name in ("reset-256K", "500")
    ),
]


@pytest.mark.parametrize(("s3_tls", "fault", "reset_after"), PROBE_FAULTS_ON, indirect=["s3_tls"])
async def test_a_failed_first_trailer_request_decides_nothing(
    s3_tls: S3Target,
    fault_proxy: Callable[..., Any],
    tmp_path: Path,
    fault: str,
    reset_after: int | None,
) -> None:
    """The first UploadPart (the trailer probe) is cut or answered 500 twice: retried, with
    a trailer again; then moto confirms trailers (every part carries one) and RGW refuses
    its first (one fallback, every part two-pass). Nothing lost either way."""
    s3 = s3_tls
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(
        FaultRule(
            operation="UploadPart",
            fault=fault,  # type: ignore[arg-type]
            reset_after_bytes=reset_after,
            schedule={1, 2},
        )
    )
    config = s3.with_endpoint(proxy.url).engine_config(
        part_size=PART, max_concurrency=3, retry=FAST_RETRY
    )
    assert config.trailer_checksum == "auto" and proxy.url.startswith("https:")
    path, data = data_file(tmp_path, 4 * PART + 4321)
    key = s3.key(f"probe-{fault}-{reset_after}.bin")
    engine = await open_engine(config, "writes")
    async with engine:
        record = await engine.upload(s3.bucket, key, path, defer=True)
        await engine.complete(record)
        stats = engine.stats
        client = engine._client
        assert isinstance(client, FastClient)
        states = list(client.trailer_states.values())
    assert proxy.stats.faults("UploadPart", fault) == 2
    assert stats.fatal_errors == 0
    if s3.name.startswith("moto"):
        assert (stats.trailer_checksums, stats.trailer_bodies) == (True, 5)
        assert stats.trailer_fallbacks == 0 and states == [TrailerState.ON]
        assert proxy.stats.requests("UploadPart") == 5 + 2
    else:
        assert (stats.trailer_checksums, stats.trailer_bodies) == (False, 0)
        assert stats.trailer_fallbacks == 1 and states == [TrailerState.OFF]
        assert proxy.stats.requests("UploadPart") == 5 + 2 + 1
    check_parts(s3, key, record, data, PART)
    assert pending_keys(s3) == []


@pytest.mark.parametrize(
    "moto_s3", [pytest.param("moto-https", marks=pytest.mark.https)], indirect=True
)
@pytest.mark.parametrize("fault", ["html_200", "strip_etag"])
async def test_a_success_that_is_not_s3s_is_bad_answer_not_a_refusal(
    moto_s3: S3Target, fault_proxy: Callable[..., Any], tmp_path: Path, fault: str
) -> None:
    """A 200 HTML page, or moto's answer stripped of its ETag, to the trailer probe:
    BadAnswer naming the endpoint, not retried and not re-sent two-pass; the upload is
    aborted. (RGW refuses the probe itself: its 400 is a refusal, tested above.)"""
    s3 = moto_s3
    assert s3.endpoint_url is not None
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="UploadPart", fault=fault, schedule={1}))  # type: ignore[arg-type]
    # one part in flight: the BadAnswer part is the only request racing nothing (with two,
    # the second part's fate under load varied: a counted retry of *it* failed the check)
    config = s3.with_endpoint(proxy.url).engine_config(
        part_size=PART, max_concurrency=1, retry=FAST_RETRY
    )
    path, _ = data_file(tmp_path, 2 * PART + 1)
    engine = await open_engine(config, "writes")
    async with engine:
        with pytest.raises(errors.BadAnswer) as info:
            await engine.upload(s3.bucket, s3.key("bad.bin"), path, defer=True)
        stats = engine.stats
    assert proxy.url in str(info.value)
    assert stats.trailer_fallbacks == 0 and stats.retries == 0
    assert stats.trailer_checksums is None  # nothing learnt about trailers
    assert pending_keys(s3) == []
