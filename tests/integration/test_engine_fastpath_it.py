"""The fast path over real HTTP: signatures that Ceph RGW verifies (and moto accepts) for
tricky keys, the same objects and the same errors as through botocore, session tokens,
rotating credentials, 200-with-<Error> answers, redirects, and both addressing styles.

Besides moto and RGW, a small aiohttp S3 double checks every request's SigV4 signature
against what arrived on the wire and answers as scripted (errors real servers rarely send
on demand)."""

from __future__ import annotations

import datetime
import hashlib
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import aiohttp.connector
import botocore.exceptions as bexc
import pytest
from aiobotocore.credentials import AioRefreshableCredentials
from aiohttp import web

from engine_helpers import get, pending_keys
from zerorename.engine import (
    EngineConfig,
    PartInfo,
    PendingUpload,
    RetryConfig,
    UploadEngine,
    errors,
)
from zerorename.engine.wire.client import FastClient
from zerorename.engine.wire.fastpath import SigV4Signer, canonical_value
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

KEYS = [
    "with space/file name.bin",
    "unicode/ünïcödé-日本語.bin",
    "plus+sign/a+b.bin",
    "percent/100%25%.bin",
    "hash#and?query=yes.bin",
    "equals=k/v=1&amp;x=2.bin",
    "tilde~/a~b",
    "star*(paren)'quote'!,;:@$.bin",
    "double//slash",
]
FAST_RETRY = RetryConfig(max_attempts=5, base_delay=0.01, max_delay=0.05, max_elapsed=30)


def cfg(s3: S3Target, **kw: Any) -> EngineConfig:
    kw.setdefault("part_size", 5 * MiB)
    kw.setdefault("max_concurrency", 4)
    return s3.engine_config(**kw)


def fast_of(engine: UploadEngine) -> FastClient:
    client = engine._client
    assert isinstance(client, FastClient), "the fast path should be on"
    return client


# ------------------------------------------------------------------ moto and RGW


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "botocore"])
async def test_tricky_keys_every_hot_call(s3: S3Target, fast: bool) -> None:
    """Create, UploadPart, Complete, Abort and PutObject for keys with spaces, unicode,
    '#', '+', '%', '~', '=', '&' ...: RGW verifies each signature; the objects read back
    exactly. With the fast path on, botocore sent none of these calls."""
    data = os.urandom(5 * MiB + 3)
    async with UploadEngine(cfg(s3, fast_path=fast)) as engine:
        for name in KEYS:
            key = s3.key(name)
            await engine.upload(s3.bucket, key + ".put", name.encode())
            pend = await engine.upload(s3.bucket, key, data, defer=True)
            assert len(pend.parts) == 2
            await engine.complete(pend)
            gone = await engine.upload(s3.bucket, key + ".aborted", b"x", defer=True)
            assert await engine.abort(gone)
        if fast:
            client = fast_of(engine)
            assert client.handed_over == {}
            assert set(client.sent) == {
                "PutObject",
                "CreateMultipartUpload",
                "UploadPart",
                "CompleteMultipartUpload",
                "AbortMultipartUpload",
            }
        else:
            assert not isinstance(engine._client, FastClient)
        assert engine.stats.retries == 0
    for name in KEYS:
        assert get(s3, s3.key(name)) == data
        assert get(s3, s3.key(name) + ".put") == name.encode()
    assert pending_keys(s3) == []


async def test_objects_are_the_same_either_way(s3: S3Target) -> None:
    """Content type, metadata, cache control, size and ETag shape of objects written
    through the fast path and through botocore: the same. (Ceph RGW pacific answers a
    complete with an empty ETag either way.)"""
    heads = []
    for fast in (True, False):
        key = s3.key(f"attrs-{fast}")
        async with UploadEngine(cfg(s3, fast_path=fast)) as engine:
            args = {"ContentType": "text/csv", "Metadata": {"job": "j1", "Who": "a b"}}
            pend = await engine.upload(
                s3.bucket, key, os.urandom(6 * MiB), defer=True, CacheControl="no-cache", **args
            )
            done = await engine.complete(pend)
            assert done.etag.endswith('-2"') or (s3.name == "rgw" and done.etag == "")
            small = await engine.upload(s3.bucket, key + ".small", b"tiny")
            assert small.etag == f'"{hashlib.md5(b"tiny").hexdigest()}"'
            await engine.put_object(s3.bucket, key + ".record", b"{}")
        client = s3.boto3_client()
        heads.append(
            [
                {
                    "etag_kind": h["ETag"][-3:] if "-" in h["ETag"] else "md5",
                    **{
                        k: h.get(k)
                        for k in ("ContentType", "Metadata", "CacheControl", "ContentLength")
                    },
                }
                for h in (
                    client.head_object(Bucket=s3.bucket, Key=k)
                    for k in (key, key + ".small", key + ".record")
                )
            ]
        )
    assert heads[0] == heads[1]


async def _both_raise(engine: UploadEngine, method: str, **params: Any) -> str:
    """The same call through the fast path and through botocore: the same ClientError
    (class, code, HTTP status). Returns the code."""
    fast = fast_of(engine)
    seen: list[bexc.ClientError] = []
    for client in (fast, fast._client):
        sent = sum(fast.sent.values())
        with pytest.raises(bexc.ClientError) as info:
            await getattr(client, method)(**params)
        seen.append(info.value)
        assert sum(fast.sent.values()) == sent + (client is fast)
    ours, theirs = seen
    assert type(ours) is type(theirs)
    assert ours.response["Error"]["Code"] == theirs.response["Error"]["Code"]
    status = ours.response["ResponseMetadata"]["HTTPStatusCode"]
    assert status == theirs.response["ResponseMetadata"]["HTTPStatusCode"]
    return str(ours.response["Error"]["Code"])


async def test_real_errors_are_botocores(s3: S3Target) -> None:
    """NoSuchUpload, InvalidPart and NoSuchBucket as the servers send them: the same
    ClientError as botocore's, and the same engine errors (fatal: no retries)."""
    async with UploadEngine(cfg(s3, retry=FAST_RETRY)) as engine:
        key = s3.key("errors.bin")
        pend = await engine.upload(s3.bucket, key, b"abc", defer=True)
        wrong = PendingUpload(
            s3.bucket,
            key,
            pend.upload_id,
            (PartInfo(1, '"00000000000000000000000000000000"', 3, pend.parts[0].checksum),),
            3,
            checksum_algorithm=pend.checksum_algorithm,
        )
        with pytest.raises(errors.S3Error) as info:
            await engine.complete(wrong)
        assert info.value.code == "InvalidPart"
        parts = {"Parts": [{"PartNumber": 1, "ETag": '"00000000000000000000000000000000"'}]}
        code = await _both_raise(
            engine,
            "complete_multipart_upload",
            Bucket=s3.bucket,
            Key=key,
            UploadId=pend.upload_id,
            MultipartUpload=parts,
        )
        assert code == "InvalidPart"
        assert await engine.abort(pend)
        assert not await engine.abort(pend)  # NoSuchUpload: already gone
        code = await _both_raise(
            engine, "abort_multipart_upload", Bucket=s3.bucket, Key=key, UploadId=pend.upload_id
        )
        assert code == "NoSuchUpload"
        if s3.name != "moto":  # moto answers a part for a gone upload with a 500 (its bug)
            code = await _both_raise(
                engine,
                "upload_part",
                Bucket=s3.bucket,
                Key=key,
                UploadId=pend.upload_id,
                PartNumber=1,
                Body=b"x",
            )
            assert code == "NoSuchUpload"
        with pytest.raises(errors.BucketNotFound):
            await engine.upload("zr-no-such-bucket-fp1", "k", b"x")
        code = await _both_raise(
            engine, "put_object", Bucket="zr-no-such-bucket-fp1", Key="k", Body=b"x"
        )
        assert code == "NoSuchBucket"
        code = await _both_raise(
            engine, "create_multipart_upload", Bucket="zr-no-such-bucket-fp1", Key="k"
        )
        assert code == "NoSuchBucket"
        assert engine.stats.retries == 0


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "botocore"])
async def test_if_none_match_412_on_moto(moto_s3: S3Target, fast: bool) -> None:
    s3 = moto_s3
    key = s3.key("exists.bin")
    async with UploadEngine(cfg(s3, fast_path=fast)) as engine:
        await engine.put_object(s3.bucket, key, b"old")
        pend = await engine.upload(s3.bucket, key, b"new", defer=True)
        with pytest.raises(errors.PreconditionFailed):
            await engine.complete(pend, if_none_match=True)
        with pytest.raises(errors.PreconditionFailed):
            await engine.put_object(s3.bucket, key, b"x", if_none_match=True)
        if fast:
            code = await _both_raise(
                engine, "put_object", Bucket=s3.bucket, Key=key, Body=b"x", IfNoneMatch="*"
            )
            assert code == "PreconditionFailed"
        await engine.abort(pend)
    assert get(s3, key) == b"old"


async def test_session_token_on_moto(moto_s3: S3Target) -> None:
    s3 = moto_s3
    config = cfg(s3, aws_session_token="FwoGZXIvYXdzEJr//////////wEaDtoken+/=")
    async with UploadEngine(config) as engine:
        pend = await engine.upload(s3.bucket, s3.key("token.bin"), b"t" * 10, defer=True)
        await engine.complete(pend)
        assert fast_of(engine).sent["CompleteMultipartUpload"] == 1
    assert get(s3, s3.key("token.bin")) == b"t" * 10


class _LocalhostResolver(aiohttp.resolver.ThreadedResolver):
    """``*.localhost`` is 127.0.0.1 (this machine resolves only ``localhost`` itself)."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[Any]:
        if host.endswith(".localhost"):
            host = "127.0.0.1"
        return await super().resolve(host, port, family)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "botocore"])
async def test_virtual_host_addressing_on_moto(
    moto_s3: S3Target, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """addressing_style="virtual": requests go to http://<bucket>.localhost:<port>/<key>,
    as botocore sends them (moto serves virtual-host style for *.localhost)."""
    s3 = moto_s3
    assert s3.endpoint_url is not None
    monkeypatch.setattr(aiohttp.connector, "DefaultResolver", _LocalhostResolver)
    port = s3.endpoint_url.rsplit(":", 1)[1]
    config = cfg(
        s3, endpoint_url=f"http://localhost:{port}", addressing_style="virtual", fast_path=fast
    )
    data = os.urandom(5 * MiB + 7)
    async with UploadEngine(config) as engine:
        for name in KEYS[:4]:
            pend = await engine.upload(s3.bucket, s3.key(name), data, defer=True)
            await engine.complete(pend)
        if fast:
            target = fast_of(engine)._targets[s3.bucket]
            assert target is not None
            assert target.origin == f"http://{s3.bucket}.localhost:{port}"
            assert target.path_prefix == "/"
            assert fast_of(engine).handed_over == {}
    for name in KEYS[:4]:
        assert get(s3, s3.key(name)) == data


async def test_fast_path_is_off_when_it_cannot_be_exact(
    moto_s3: S3Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = moto_s3
    async with UploadEngine(cfg(s3, payload_signing=True)) as engine:
        assert not isinstance(engine._client, FastClient)
        await engine.upload(s3.bucket, s3.key("signed.bin"), b"s")
    async with UploadEngine(cfg(s3, fast_path=False)) as engine:
        assert not isinstance(engine._client, FastClient)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    anonymous = EngineConfig(endpoint_url=s3.endpoint_url, region=s3.region)
    async with UploadEngine(anonymous) as engine:
        assert not isinstance(engine._client, FastClient)


# ------------------------------------------------------------------ a verifying S3 double


@dataclass
class Double:
    """An S3 double that checks each request's SigV4 signature against the bytes that
    arrived (path, query, signed headers) and answers as ``script`` says."""

    secrets: dict[str, str]
    url: str = ""
    #: (operation, nth call of it) -> (status, headers, body) instead of the normal answer
    script: dict[tuple[str, int], tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    #: answer this for every request not from botocore (its User-Agent names botocore)
    not_botocore: tuple[int, dict[str, str], bytes] | None = None
    calls: dict[str, int] = field(default_factory=dict)
    seen: list[dict[str, str]] = field(default_factory=list)
    bad_signatures: int = 0


_DOUBLE = web.AppKey("double", Double)


def _operation(method: str, query: str) -> str:
    names = {q.split("=", 1)[0] for q in query.split("&") if q}
    if method == "POST":
        return "CreateMultipartUpload" if "uploads" in names else "CompleteMultipartUpload"
    if method == "PUT":
        return "UploadPart" if "uploadId" in names else "PutObject"
    return "AbortMultipartUpload" if method == "DELETE" else method


def _verify(request: web.Request, secrets: dict[str, str]) -> bool:
    auth = request.headers.get("Authorization", "")
    fields = dict(p.strip().split("=", 1) for p in auth.split(" ", 1)[1].split(","))
    access_key, date, region, service, _ = fields["Credential"].split("/")
    names = fields["SignedHeaders"].split(";")
    path, _, query = request.raw_path.partition("?")
    pairs = sorted([*q.split("=", 1), ""][:2] for q in query.split("&") if q)
    canonical_query = "&".join(f"{k}={v}" for k, v in pairs)
    headers = [(n, canonical_value(request.headers[n])) for n in names]
    expected = SigV4Signer(region, service).authorization(
        request.method,
        path,
        canonical_query,
        headers,
        access_key,
        secrets.get(access_key, ""),
        request.headers["X-Amz-Date"],
    )
    return bool(expected == auth and date == request.headers["X-Amz-Date"][:8])


@pytest.fixture
async def double() -> AsyncIterator[Callable[..., Double]]:
    runners: list[web.AppRunner] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        d = request.app[_DOUBLE]
        await request.read()
        botocore_call = "Botocore" in request.headers.get("User-Agent", "")
        if not botocore_call:
            if not _verify(request, d.secrets):
                d.bad_signatures += 1
                return web.Response(
                    status=403, body=b"<Error><Code>SignatureDoesNotMatch</Code></Error>"
                )
            d.seen.append(dict(request.headers))
        op = _operation(request.method, request.query_string)
        n = d.calls[op] = d.calls.get(op, 0) + 1
        answer = d.script.get((op, n))
        if answer is None and d.not_botocore is not None and not botocore_call:
            answer = d.not_botocore
        if answer is not None:
            status, headers, body = answer
            return web.Response(status=status, headers=headers, body=body)
        if op == "CreateMultipartUpload":
            body = b"<InitiateMultipartUploadResult><UploadId>u-1</UploadId>"
            return web.Response(body=body + b"</InitiateMultipartUploadResult>")
        if op == "CompleteMultipartUpload":
            body = (
                b'<CompleteMultipartUploadResult><ETag>"c-1"</ETag></CompleteMultipartUploadResult>'
            )
            return web.Response(body=body)
        if op == "AbortMultipartUpload":
            return web.Response(status=204)
        return web.Response(headers={"ETag": f'"{op}-{n}"'})

    async def start(secrets: dict[str, str]) -> Double:
        d = Double(secrets)
        app = web.Application(client_max_size=64 * MiB)
        app[_DOUBLE] = d
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        d.url = f"http://127.0.0.1:{port}"
        return d

    try:
        yield start
    finally:
        for runner in runners:
            await runner.cleanup()


def _config(d: Double, **kw: Any) -> EngineConfig:
    kw.setdefault("aws_access_key_id", "AKIDOUBLE00000000001")
    kw.setdefault("aws_secret_access_key", d.secrets[kw["aws_access_key_id"]])
    return EngineConfig(
        endpoint_url=d.url,
        region="eu-west-1",
        addressing_style="path",
        part_size=5 * MiB,
        retry=FAST_RETRY,
        **kw,
    )


SECRETS = {"AKIDOUBLE00000000001": "secret/one+1", "AKIDOUBLE00000000002": "secret/two+2"}


async def test_200_with_error_body_is_retried(double: Callable[..., Any]) -> None:
    """S3 may answer a complete 200 and then an <Error> (or a cut body): like botocore,
    the engine takes it for a 500 and retries."""
    d = await double(SECRETS)
    error = b'<?xml version="1.0"?>\n<Error><Code>InternalError</Code><Message>m</Message></Error>'
    d.script[("CompleteMultipartUpload", 1)] = (200, {}, error)
    d.script[("CompleteMultipartUpload", 2)] = (200, {}, b"<?xml version='1.0'?>\n<Complete")
    async with UploadEngine(_config(d)) as engine:
        pend = await engine.upload("bkt", "k", b"x", defer=True)
        done = await engine.complete(pend)
        assert done.etag == '"c-1"'
        assert engine.stats.transient_errors == 2
        assert engine.stats.retries == 2
        assert fast_of(engine).sent["CompleteMultipartUpload"] == 3
    assert d.calls["CompleteMultipartUpload"] == 3 and d.bad_signatures == 0


async def test_what_is_sent_and_signed(double: Callable[..., Any]) -> None:
    """Every request verifies; the session token is sent and signed; Content-Length is
    explicit, no Expect, no Content-Type unless asked for, identity encoding."""
    d = await double(SECRETS)
    async with UploadEngine(_config(d, aws_session_token="tok/en+=")) as engine:
        pend = await engine.upload("bkt", "a b/ü+%.bin", os.urandom(5 * MiB + 1), defer=True)
        await engine.complete(pend)
        await engine.upload("bkt", "small", b"abc", ContentType="text/plain")
    assert d.bad_signatures == 0 and len(d.seen) == 5
    for headers in d.seen:
        assert headers["X-Amz-Security-Token"] == "tok/en+="
        assert "x-amz-security-token" in headers["Authorization"]
        assert "Content-Length" in headers and "Expect" not in headers
        assert "Transfer-Encoding" not in headers
    assert [h.get("Content-Type") for h in d.seen] == [None] * 4 + ["text/plain"]
    assert sorted(int(h["Content-Length"]) for h in d.seen[1:3]) == [1, 5 * MiB]


async def test_rotated_credentials_are_used(double: Callable[..., Any]) -> None:
    """Refreshable credentials are read for every request: after a rotation the next
    request is signed with the new key."""
    d = await double(SECRETS)
    keys = iter(sorted(SECRETS.items()))

    async def refresh() -> dict[str, Any]:
        access, secret = next(keys)
        soon = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=3600)
        return {
            "access_key": access,
            "secret_key": secret,
            "token": None,
            "expiry_time": soon.isoformat(),
        }

    async with UploadEngine(_config(d)) as engine:
        fast = fast_of(engine)
        creds = AioRefreshableCredentials.create_from_metadata(
            await refresh(), refresh_using=refresh, method="test"
        )
        fast._credentials = creds
        await engine.upload("bkt", "one", b"1")
        creds._expiry_time = datetime.datetime.now(datetime.UTC)  # rotation is due
        await engine.upload("bkt", "two", b"2")
    used = [h["Authorization"].split("Credential=")[1][:20] for h in d.seen]
    assert used == ["AKIDOUBLE00000000001", "AKIDOUBLE00000000002"]
    assert d.bad_signatures == 0


async def test_a_redirect_hands_the_bucket_to_botocore(double: Callable[..., Any]) -> None:
    """A bucket that answers 301 (another region) is botocore's from then on: the call
    is made again by botocore, which knows how to follow it."""
    d = await double(SECRETS)
    moved = b"<Error><Code>PermanentRedirect</Code><Message>elsewhere</Message></Error>"
    d.not_botocore = (301, {}, moved)
    async with UploadEngine(_config(d)) as engine:
        done = await engine.upload("bkt", "k", b"x")
        assert done.etag == '"PutObject-2"'
        await engine.upload("bkt", "k2", b"y")
        fast = fast_of(engine)
        assert fast.sent == {"PutObject": 1}
        assert fast.handed_over == {"PutObject": 2}
        assert fast._targets["bkt"] is None
        assert engine.stats.retries == 0


async def test_the_double_refuses_a_wrong_signature(double: Callable[..., Any]) -> None:
    d = await double(SECRETS)
    config = _config(d, aws_secret_access_key="not-the-secret")
    async with UploadEngine(config) as engine:
        with pytest.raises(errors.AccessDenied):
            await engine.upload("bkt", "k", b"x")
    assert d.bad_signatures == 1 and d.seen == []


async def test_secrets_stay_out_of_errors() -> None:
    """A failure on the fast path (here: nobody listens) names the endpoint, never the
    secret key or the session token, in the error or anything it chains to."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    secret, token = "sEcReT/never+shown", "ToKeN/never+shown"
    config = EngineConfig(
        endpoint_url=f"http://127.0.0.1:{port}",
        region="us-east-1",
        addressing_style="path",
        aws_access_key_id="AKIDNOBODYLISTENS001",
        aws_secret_access_key=secret,
        aws_session_token=token,
        connect_timeout=1,
        retry=RetryConfig(max_attempts=2, base_delay=0.01, max_delay=0.02, max_elapsed=10),
    )
    async with UploadEngine(config) as engine:
        with pytest.raises(errors.EndpointUnreachable) as info:
            await engine.upload("bucket", "key", b"x")
        assert fast_of(engine).sent == {"PutObject": 2}
        assert secret not in repr(fast_of(engine)) and token not in repr(config)
    chain: list[BaseException] = []
    exc: BaseException | None = info.value
    while exc is not None and len(chain) < 10:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    text = " ".join(f"{e!r} {e} {getattr(e, '__notes__', '')}" for e in chain)
    assert f"127.0.0.1:{port}" in text
    assert secret not in text and token not in text
