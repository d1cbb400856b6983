"""The engine over HTTPS (moto behind the TLS fault proxy, RGW's native beast TLS): the test
servers really speak TLS with the session CA, every source kind uploads on both send paths,
and the CA bundle reaches the engine through EngineConfig.ca_bundle or AWS_CA_BUNDLE."""

from __future__ import annotations

import os
import socket
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from engine_helpers import blocks, get, make_source, object_keys, pending_keys
from zerorename.engine import PendingUpload, UploadEngine, UploadResult
from zerorename.engine.wire.client import FastClient
from zerorename.servers.targets import S3Target
from zerorename.servers.tls import TlsFiles
from zerorename.units import MiB

DATA = os.urandom(10 * MiB + 4321)  # 3 parts of 5 MiB at most
SOURCES = ["bytes", "path", "fileobj", "sync", "async", "writer"]
PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fastpath", "botocore"])
_MOTO_HTTPS = pytest.param("moto-https", marks=pytest.mark.https, id="moto-https")
#: every source kind over TLS on moto; on RGW the two bodies a part goes out as over TLS, a
#: block in memory (bytes) and a file range with its trailing checksum (path): the source
#: kinds differ in zerorename's code only (the rule in tests/conftest.py's docstring)
SOURCES_ON = [
    *(
        pytest.param("moto-https", kind, marks=pytest.mark.https, id=f"moto-https-{kind}")
        for kind in SOURCES
    ),
    *(
        pytest.param(
            "rgw-https", kind, marks=[pytest.mark.rgw, pytest.mark.https], id=f"rgw-https-{kind}"
        )
        for kind in ("bytes", "path")
    ),
]


def _host_port(url: str | None) -> tuple[str, int]:
    parts = urlsplit(url or "")
    assert parts.scheme == "https" and parts.hostname and parts.port, url
    return parts.hostname, parts.port


def test_the_endpoint_speaks_tls_verified_by_the_session_ca(
    s3_tls: S3Target, tls_files: TlsFiles
) -> None:
    host, port = _host_port(s3_tls.endpoint_url)
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        tls_files.client_context().wrap_socket(raw, server_hostname=host) as tls,
    ):
        assert tls.version() in ("TLSv1.2", "TLSv1.3")
        assert tls.getpeercert()["subjectAltName"]  # the session's server certificate
    # the system's default trust store does not know the session CA: verification is real
    with (
        socket.create_connection((host, port), timeout=10) as raw,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        ssl.create_default_context().wrap_socket(raw, server_hostname=host)
    client = s3_tls.boto3_client()
    client.put_object(Bucket=s3_tls.bucket, Key=s3_tls.key("hello"), Body=b"hello")
    assert get(s3_tls, s3_tls.key("hello")) == b"hello"


async def _upload(engine: UploadEngine, s3: S3Target, key: str, kind: str, tmp: Path) -> Any:
    if kind == "writer":
        async with engine.open_writer(s3.bucket, key, defer=True) as writer:
            for block in blocks(DATA, 300_007):
                await writer.write(block)
        return writer.result
    source = make_source(kind, DATA, tmp)
    return await engine.upload(s3.bucket, key, source, defer=True)


@PATHS
@pytest.mark.parametrize(("s3_tls", "kind"), SOURCES_ON, indirect=["s3_tls"])
async def test_every_source_uploads_over_https(
    s3_tls: S3Target, kind: str, fast: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_CA_BUNDLE")  # the config's ca_bundle is the only way to the CA
    key = s3_tls.key(f"src-{kind}.bin")
    config = s3_tls.engine_config(part_size=5 * MiB, max_concurrency=4, fast_path=fast)
    assert config.ca_bundle == s3_tls.ca_bundle
    async with UploadEngine(config) as engine:
        assert isinstance(engine._client, FastClient) == fast
        if fast:
            assert engine._client.enabled, engine._client.disabled_reason
        record = await _upload(engine, s3_tls, key, kind, tmp_path)
        assert isinstance(record, PendingUpload) and len(record.parts) == 3
        assert object_keys(s3_tls) == []  # deferred: nothing visible before complete
        await engine.complete(record)
        assert engine.stats.retries == 0
        if fast:
            assert engine._client.sent.get("UploadPart", 0) >= 3  # the fast path sent them
    assert get(s3_tls, key) == DATA
    assert pending_keys(s3_tls) == []


@PATHS
@pytest.mark.parametrize("s3_tls", [_MOTO_HTTPS], indirect=True)  # reading the variable is ours
async def test_aws_ca_bundle_in_the_environment_is_used(
    s3_tls: S3Target, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``ca_bundle`` in the config the engine verifies with AWS_CA_BUNDLE, as boto3
    and the CLI do."""
    assert s3_tls.ca_bundle is not None
    monkeypatch.setenv("AWS_CA_BUNDLE", s3_tls.ca_bundle)
    config = s3_tls.engine_config(fast_path=fast, ca_bundle=None)
    assert config.ca_bundle is None
    async with UploadEngine(config) as engine:
        assert isinstance(engine._client, FastClient) == fast
        result = await engine.upload(s3_tls.bucket, s3_tls.key("env.bin"), DATA[: 6 * MiB])
        assert isinstance(result, UploadResult)
        if fast:
            assert sum(engine._client.sent.values()) >= 1  # the fast path sent it
    assert get(s3_tls, s3_tls.key("env.bin")) == DATA[: 6 * MiB]
