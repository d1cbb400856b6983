"""Resets mid-body inside TLS: the fault proxy terminates TLS (session CA) and cuts UploadPart
bodies with an RST under the TLS session. Whatever way a part is sent over HTTPS (fast path
with a trailing checksum or the two-pass way, or botocore), the object is the source's bytes
and nothing is left pending. (Stalls and lost answers over TLS: the also_https variants in
test_engine_faults.py and test_committer_faults.py.)"""

from __future__ import annotations

import hashlib
import random
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import get, pending_keys
from zerorename.engine import RetryConfig, UploadEngine
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

PART = 5 * MiB
DATA = random.Random(11).randbytes(4 * PART + 999)  # 5 parts
FAST_RETRY = RetryConfig(max_attempts=8, base_delay=0.02, max_delay=0.3, max_elapsed=120)
#: (fast_path, trailer_checksum): the ways a part goes out over HTTPS
WAYS = {
    "fast-trailer": (True, "always"),
    "fast-two-pass": (True, "never"),
    "botocore": (False, "auto"),
}


async def _blocks(data: bytes, step: int) -> AsyncIterator[bytes]:
    for i in range(0, len(data), step):
        yield data[i : i + step]


@pytest.mark.parametrize("reset_after", [0, 256 << 10, 3 * MiB + 1], ids=["0", "256K", "3M+1"])
@pytest.mark.parametrize("source", ["file", "stream"])
@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize(
    "moto_s3", [pytest.param("moto-https", marks=pytest.mark.https)], indirect=True
)
async def test_resets_inside_tls_leave_the_sources_bytes(
    moto_s3: S3Target,
    fault_proxy: Callable[..., Any],
    tmp_path: Path,
    way: str,
    source: str,
    reset_after: int,
) -> None:
    fast, trailer = WAYS[way]
    assert moto_s3.tls and moto_s3.ca_bundle is not None
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url)  # TLS toward the client
    assert proxy.tls and proxy.url.startswith("https://")
    proxy.add_rule(
        FaultRule(
            operation="UploadPart", fault="reset", reset_after_bytes=reset_after, schedule={1, 3}
        )
    )
    target = moto_s3.with_endpoint(proxy.url)
    config = target.engine_config(
        part_size=PART,
        max_concurrency=2,
        retry=FAST_RETRY,
        fast_path=fast,
        trailer_checksum=trailer,
    )
    body: Any
    if source == "file":
        (tmp_path / "f").write_bytes(DATA)
        body = tmp_path / "f"
    else:
        body = _blocks(DATA, 300_001)
    key = target.key(f"{way}-{source}.bin")
    async with UploadEngine(config) as engine:
        result = await engine.upload(target.bucket, key, body)
        stats = engine.stats
    assert result.length == len(DATA) and result.parts == 5
    assert proxy.stats.faults("UploadPart", "reset") == 2
    assert proxy.stats.requests("UploadPart") >= 5 + 2  # both cut parts were sent again
    assert proxy.stats.tls_handshakes >= 1 and proxy.stats.tls_failures == 0
    if way == "fast-trailer":
        assert stats.trailer_checksums and stats.trailer_bodies == 5
    else:
        assert not stats.trailer_bodies
    assert hashlib.sha256(get(target, key)).digest() == hashlib.sha256(DATA).digest()
    assert pending_keys(target) == []
