"""The fault proxy: classification, rule selection, and every fault kind seen on the wire by
plain boto3, aiobotocore and raw aiohttp clients against real servers."""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    HTTPClientError,
    ReadTimeoutError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from zerorename.servers.faultproxy import FaultProxy, FaultRule, classify
from zerorename.servers.servers import MotoServer
from zerorename.servers.targets import S3Target

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

MiB = 1024 * 1024
NET_ERRORS = (HTTPClientError, BotoConnectionError)
ProxyFactory = Callable[..., FaultProxy]


def client(target: S3Target, attempts: int = 1, **cfg: Any) -> Any:
    """boto3 client; ``attempts`` total tries (1 = no retries)."""
    return target.boto3_client(retries={"mode": "standard", "total_max_attempts": attempts}, **cfg)


def payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("method", "target", "headers", "op"),
    [
        ("GET", "/", [], "ListBuckets"),
        ("PUT", "/bkt", [], "CreateBucket"),
        ("HEAD", "/bkt", [], "HeadBucket"),
        ("DELETE", "/bkt", [], "DeleteBucket"),
        ("GET", "/bkt?list-type=2&prefix=a%2F", [], "ListObjectsV2"),
        ("GET", "/bkt/?prefix=a", [], "ListObjects"),
        ("GET", "/bkt?uploads&prefix=a%2F", [], "ListMultipartUploads"),
        ("GET", "/bkt?uploads=", [], "ListMultipartUploads"),
        ("GET", "/bkt?location", [], "GetBucketLocation"),
        ("POST", "/bkt?delete", [], "DeleteObjects"),
        ("POST", "/bkt/a/b%20c?uploads", [], "CreateMultipartUpload"),
        ("PUT", "/bkt/k?partNumber=3&uploadId=xyz", [], "UploadPart"),
        (
            "PUT",
            "/bkt/k?uploadId=xyz&partNumber=3",
            [("x-amz-copy-source", "b/s")],
            "UploadPartCopy",
        ),
        ("POST", "/bkt/k?uploadId=xyz", [], "CompleteMultipartUpload"),
        ("DELETE", "/bkt/k?uploadId=xyz", [], "AbortMultipartUpload"),
        ("GET", "/bkt/k?uploadId=xyz&max-parts=10", [], "ListParts"),
        ("PUT", "/bkt/dir/k", [], "PutObject"),
        ("PUT", "/bkt/k", [("X-Amz-Copy-Source", "/b/s")], "CopyObject"),
        ("GET", "/bkt/k", [], "GetObject"),
        ("HEAD", "/bkt/k%23x", [], "HeadObject"),
        ("DELETE", "/bkt/k", [], "DeleteObject"),
        ("PUT", "/bkt/k?tagging", [], "PutObjectTagging"),
    ],
)
def test_classify(method: str, target: str, headers: list[tuple[str, str]], op: str) -> None:
    assert classify(method, target, headers) == op


def _fires(rule: FaultRule, n: int) -> list[int]:
    return [i for i in range(1, n + 1) if rule.decide()]


def test_rule_selectors() -> None:
    assert _fires(FaultRule(every=3), 10) == [3, 6, 9]
    assert _fires(FaultRule(schedule={1, 4}), 10) == [1, 4]
    assert _fires(FaultRule(burst=(2, 3)), 10) == [2, 3, 4]
    assert _fires(FaultRule(), 3) == [1, 2, 3]
    assert _fires(FaultRule(max_faults=2), 5) == [1, 2]
    assert _fires(FaultRule(every=2, max_faults=2), 10) == [2, 4]
    a, b = FaultRule(rate=0.3, seed=7), FaultRule(rate=0.3, seed=7)
    fa, fb = _fires(a, 1000), _fires(b, 1000)
    assert fa == fb and 220 < len(fa) < 380  # seeded: reproducible, about 30%
    assert a.seen == 1000 and a.fired == len(fa)
    for bad in (
        {"rate": 0.1, "every": 2},
        {"rate": 1.5},
        {"every": 0},
        {"fault": "explode"},
        {"burst": (0, 1)},
    ):
        with pytest.raises(ValueError):
            FaultRule(**bad)


# ---------------------------------------------------------------- pass-through


def test_passthrough_is_byte_identical(s3: S3Target, fault_proxy: ProxyFactory) -> None:
    """Bodies both ways, SigV4 (RGW checks it), Expect: 100-continue (boto3 sends it for
    bodies > 1 MB), multipart, listing; stats count each operation exactly once."""
    proxy = fault_proxy(s3.endpoint_url)
    c = client(s3.with_endpoint(proxy.url))
    key = s3.key("a dir/ü %+#=&.bin")
    data = payload(3 * MiB + 17, 1)
    c.put_object(Bucket=s3.bucket, Key=key, Body=data)
    assert c.get_object(Bucket=s3.bucket, Key=key)["Body"].read() == data
    rng = c.get_object(Bucket=s3.bucket, Key=key, Range="bytes=100-199")["Body"].read()
    assert rng == data[100:200]

    mkey = s3.key("multi")
    p1, p2 = payload(5 * MiB, 2), payload(123, 3)
    up = c.create_multipart_upload(Bucket=s3.bucket, Key=mkey)["UploadId"]
    etags = [
        c.upload_part(Bucket=s3.bucket, Key=mkey, UploadId=up, PartNumber=i, Body=p)["ETag"]
        for i, p in ((1, p1), (2, p2))
    ]
    listed = c.list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix)["Uploads"]
    assert [u["UploadId"] for u in listed] == [up]
    assert len(c.list_parts(Bucket=s3.bucket, Key=mkey, UploadId=up)["Parts"]) == 2
    c.complete_multipart_upload(
        Bucket=s3.bucket,
        Key=mkey,
        UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]},
    )
    assert c.head_object(Bucket=s3.bucket, Key=mkey)["ContentLength"] == len(p1) + len(p2)
    got = c.get_object(Bucket=s3.bucket, Key=mkey)["Body"].read()
    assert hashlib.sha256(got).digest() == hashlib.sha256(p1 + p2).digest()
    keys = [o["Key"] for o in c.list_objects_v2(Bucket=s3.bucket, Prefix=s3.prefix)["Contents"]]
    assert sorted(keys) == sorted([key, mkey])

    snap = proxy.stats.snapshot()
    assert snap["faults"] == {}
    assert snap["requests"] == {
        "PutObject": 1,
        "GetObject": 3,
        "CreateMultipartUpload": 1,
        "UploadPart": 2,
        "ListMultipartUploads": 1,
        "ListParts": 1,
        "CompleteMultipartUpload": 1,
        "HeadObject": 1,
        "ListObjectsV2": 1,
    }
    assert [r.operation for r in proxy.stats.log()][:2] == ["PutObject", "GetObject"]


# ---------------------------------------------------------------- faults with boto3


def test_slowdown_is_retried_by_botocore(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="UploadPart", fault="slowdown", schedule={1, 2}))
    c = client(moto_s3.with_endpoint(proxy.url), attempts=5)
    key = moto_s3.key("k")
    up = c.create_multipart_upload(Bucket=moto_s3.bucket, Key=key)["UploadId"]
    out = c.upload_part(
        Bucket=moto_s3.bucket, Key=key, UploadId=up, PartNumber=1, Body=payload(2 * MiB)
    )
    assert out["ResponseMetadata"]["RetryAttempts"] == 2
    assert proxy.stats.requests("UploadPart") == 3
    assert proxy.stats.faults("UploadPart", "slowdown") == 2
    assert proxy.stats.faults() == 2
    # without retries the error surfaces with S3's code and a request id
    proxy.add_rule(FaultRule(operation="ListParts", fault="slowdown"))
    with pytest.raises(ClientError) as err:
        client(moto_s3.with_endpoint(proxy.url)).list_parts(
            Bucket=moto_s3.bucket, Key=key, UploadId=up
        )
    resp = err.value.response
    assert resp["Error"]["Code"] == "SlowDown"
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert resp["ResponseMetadata"]["RequestId"]


def test_internal_error_on_put_and_head(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(fault="internal_error", max_faults=2))
    c = client(moto_s3.with_endpoint(proxy.url))
    with pytest.raises(ClientError) as put_err:
        c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("x"), Body=b"small")
    assert put_err.value.response["Error"]["Code"] == "InternalError"
    assert put_err.value.response["Error"]["Message"].startswith("We encountered an internal")
    with pytest.raises(ClientError) as head_err:  # HEAD: status only, no body
        c.head_object(Bucket=moto_s3.bucket, Key=moto_s3.key("x"))
    assert head_err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("x"), Body=b"small")  # max_faults hit
    assert proxy.stats.faults(kind="internal_error") == 2
    assert proxy.stats.faults("PutObject") == 1 and proxy.stats.faults("HeadObject") == 1


@pytest.mark.parametrize("after", [0, 4096])
def test_reset_is_a_connection_error(
    moto_s3: S3Target, fault_proxy: ProxyFactory, after: int
) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url)
    rule = proxy.add_rule(FaultRule(operation="PutObject", fault="reset", reset_after_bytes=after))
    c = client(moto_s3.with_endpoint(proxy.url))
    key = moto_s3.key("reset")
    with pytest.raises(NET_ERRORS):
        c.put_object(Bucket=moto_s3.bucket, Key=key, Body=payload(2 * MiB))
    assert rule.fired == 1
    # nothing reached the server
    direct = client(moto_s3)
    with pytest.raises(ClientError):
        direct.head_object(Bucket=moto_s3.bucket, Key=key)
    # the same request with retries: one reset, then success
    proxy.clear_rules()
    proxy.add_rule(FaultRule(operation="PutObject", fault="reset", schedule={1}))
    out = client(moto_s3.with_endpoint(proxy.url), attempts=3).put_object(
        Bucket=moto_s3.bucket, Key=key, Body=payload(2 * MiB)
    )
    assert out["ResponseMetadata"]["RetryAttempts"] == 1
    assert direct.head_object(Bucket=moto_s3.bucket, Key=key)["ContentLength"] == 2 * MiB


def test_latency_delays_and_forwards(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="PutObject", fault="latency", delay=0.5))
    c = client(moto_s3.with_endpoint(proxy.url))
    c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("slow"), Body=b"abc")
    assert c.get_object(Bucket=moto_s3.bucket, Key=moto_s3.key("slow"))["Body"].read() == b"abc"
    assert proxy.stats.faults("PutObject", "latency") == 1
    # the proxy's own record: it held the put for the delay before answering (a lower bound,
    # which a slow machine only makes longer), and the get it did not delay went through
    put, get = proxy.log
    assert (put.op, put.error, get.op, get.error) == ("PutObject", None, "GetObject", None)
    assert put.end - put.start >= 0.5


def test_stall_hits_the_read_timeout(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="HeadObject", fault="stall", delay=5))
    c = client(moto_s3.with_endpoint(proxy.url), read_timeout=1)
    # the client's read timeout (1 s) ends it, before the proxy closes (5 s): which error
    # the client raised tells the two apart, with no clock
    with pytest.raises(ReadTimeoutError):
        c.head_object(Bucket=moto_s3.bucket, Key=moto_s3.key("nothing"))
    # a stall shorter than the timeout ends with the connection closed: also an error
    proxy.clear_rules()
    proxy.add_rule(FaultRule(operation="HeadObject", fault="stall", delay=0.2))
    with pytest.raises(ConnectionClosedError):
        c.head_object(Bucket=moto_s3.bucket, Key=moto_s3.key("nothing"))


@MOTO
def test_drop_response_applies_but_client_sees_error(
    s3: S3Target, fault_proxy: ProxyFactory
) -> None:
    """The lost-response case: the server completed the upload, the client never heard."""
    proxy = fault_proxy(s3.endpoint_url)
    c = client(s3.with_endpoint(proxy.url))
    key = s3.key("dropped")
    up = c.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]
    etag = c.upload_part(Bucket=s3.bucket, Key=key, UploadId=up, PartNumber=1, Body=b"z" * 10)[
        "ETag"
    ]
    proxy.add_rule(FaultRule(operation="CompleteMultipartUpload", fault="drop_response"))
    with pytest.raises(NET_ERRORS):
        c.complete_multipart_upload(
            Bucket=s3.bucket,
            Key=key,
            UploadId=up,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
        )
    assert client(s3).get_object(Bucket=s3.bucket, Key=key)["Body"].read() == b"z" * 10


def test_rules_change_while_traffic_flows(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url)
    c = client(moto_s3.with_endpoint(proxy.url))
    c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("o"), Body=b"o")
    errors: list[str] = []
    stop = threading.Event()

    def traffic() -> None:
        tc = client(moto_s3.with_endpoint(proxy.url))
        while not stop.is_set():
            try:
                tc.head_object(Bucket=moto_s3.bucket, Key=moto_s3.key("o"))
            except ClientError as exc:
                errors.append(exc.response["Error"]["Code"])

    thread = threading.Thread(target=traffic)
    thread.start()
    try:
        time.sleep(0.3)
        assert errors == []
        rule = proxy.add_rule(FaultRule(operation="HeadObject", fault="slowdown", every=2))
        deadline = time.monotonic() + 10
        while rule.fired < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        proxy.clear_rules()
        n = len(errors)
        time.sleep(0.3)
    finally:
        stop.set()
        thread.join()
    assert rule.fired >= 5 and proxy.stats.faults("HeadObject", "slowdown") == rule.fired
    assert n >= 4 and len(errors) <= rule.fired  # nothing new once cleared
    assert proxy.stats.requests("HeadObject") > rule.fired


def test_seeded_rate(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="HeadBucket", fault="slowdown", rate=0.3, seed=42))
    c = client(moto_s3.with_endpoint(proxy.url))
    outcomes = []
    for _ in range(40):
        try:
            c.head_bucket(Bucket=moto_s3.bucket)
            outcomes.append(False)
        except ClientError:
            outcomes.append(True)
    rng = random.Random(42)
    assert outcomes == [rng.random() < 0.3 for _ in range(40)]


# ---------------------------------------------------------------- raw aiohttp and aiobotocore


@pytest.fixture
def moto_proxy(moto_server: MotoServer, fault_proxy: ProxyFactory) -> FaultProxy:
    return fault_proxy(moto_server.endpoint_url)


async def test_aiohttp_keepalive_chunked_and_expect(
    moto_s3: S3Target, moto_proxy: FaultProxy
) -> None:
    base = f"{moto_proxy.url}/{moto_s3.bucket}/{moto_s3.prefix}"
    data = payload(1 * MiB + 3, 9)
    headers = {"Content-Type": "application/octet-stream"}

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(data), 70_001):
            yield data[i : i + 70_001]
            await asyncio.sleep(0)

    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn) as session:
        async with session.put(base + "chunked", data=chunks(), headers=headers) as r:
            assert r.status == 200
            assert r.request_info.headers.get("Transfer-Encoding") == "chunked"
        async with session.put(base + "expect", data=data, headers=headers, expect100=True) as r:
            assert r.status == 200
        for i in range(5):
            async with session.put(base + f"k{i}", data=b"%d" % i, headers=headers) as r:
                assert r.status == 200
    # the client's connection and the upstream one (moto keeps it alive too) carried all 7
    assert moto_proxy.stats.connections == 1
    assert moto_proxy.stats.upstream_connections == 1
    direct = client(moto_s3)
    for name in ("chunked", "expect"):
        got = direct.get_object(Bucket=moto_s3.bucket, Key=moto_s3.key(name))["Body"].read()
        assert got == data


async def test_aiohttp_sees_error_xml_and_reset(moto_s3: S3Target, moto_proxy: FaultProxy) -> None:
    url = f"{moto_proxy.url}/{moto_s3.bucket}/{moto_s3.prefix}obj"
    moto_proxy.add_rule(FaultRule(operation="PutObject", fault="slowdown", schedule={1}))
    moto_proxy.add_rule(FaultRule(operation="GetObject", fault="internal_error", schedule={1}))
    moto_proxy.add_rule(
        FaultRule(operation="PutObject", fault="reset", reset_after_bytes=100_000, schedule={2})
    )
    conn = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=conn) as session:
        async with session.put(url, data=b"x" * 10) as r:
            body = await r.read()
            assert r.status == 503
            assert int(r.headers["Content-Length"]) == len(body)
            err = ET.fromstring(body)
            assert err.findtext("Code") == "SlowDown"
            assert err.findtext("RequestId") == r.headers["x-amz-request-id"]
            assert err.findtext("Message")
        async with session.get(url) as r:
            assert r.status == 500
            assert ET.fromstring(await r.read()).findtext("Code") == "InternalError"
        # on a reused keep-alive connection aiohttp silently re-sends a request whose
        # connection was reset (once): the reset is absorbed, but it is on the wire
        async with session.put(url, data=os.urandom(1 * MiB)) as r:
            assert r.status == 200
    # the 503 and 500 were answered on one keep-alive connection; the reset needed a new one
    assert moto_proxy.stats.connections == 2
    assert moto_proxy.stats.faults("PutObject", "reset") == 1
    assert moto_proxy.stats.requests("PutObject") == 3
    moto_proxy.add_rule(FaultRule(operation="PutObject", fault="reset", reset_after_bytes=10))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as fresh:
        with pytest.raises(aiohttp.ClientError):  # a fresh connection: the reset surfaces
            async with fresh.put(url, data=os.urandom(1 * MiB)) as r:
                await r.read()


async def test_aiobotocore_retries_through_proxy(moto_s3: S3Target, moto_proxy: FaultProxy) -> None:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    moto_proxy.add_rule(FaultRule(operation="UploadPart", fault="slowdown", burst=(1, 2)))
    moto_proxy.add_rule(FaultRule(operation="UploadPart", fault="reset", schedule={4}))
    cfg = AioConfig(
        retries={"mode": "standard", "max_attempts": 5}, s3={"addressing_style": "path"}
    )
    async with get_session().create_client(
        "s3",
        endpoint_url=moto_proxy.url,
        region_name=moto_s3.region,
        aws_access_key_id=moto_s3.access_key,
        aws_secret_access_key=moto_s3.secret_key,
        config=cfg,
    ) as c:
        key = moto_s3.key("aio")
        up = (await c.create_multipart_upload(Bucket=moto_s3.bucket, Key=key))["UploadId"]
        part = payload(5 * MiB, 4)
        out = await c.upload_part(
            Bucket=moto_s3.bucket, Key=key, UploadId=up, PartNumber=1, Body=part
        )
        assert out["ResponseMetadata"]["RetryAttempts"] == 2
        out2 = await c.upload_part(
            Bucket=moto_s3.bucket, Key=key, UploadId=up, PartNumber=2, Body=b"tail"
        )
        # the reset happened on a reused connection: aiohttp re-sent the request itself,
        # below botocore's retry accounting (RetryAttempts stays 0); the proxy saw both
        assert out2["ResponseMetadata"]["RetryAttempts"] in (0, 1)
        await c.complete_multipart_upload(
            Bucket=moto_s3.bucket,
            Key=key,
            UploadId=up,
            MultipartUpload={
                "Parts": [
                    {"PartNumber": 1, "ETag": out["ETag"]},
                    {"PartNumber": 2, "ETag": out2["ETag"]},
                ]
            },
        )
        got = await (await c.get_object(Bucket=moto_s3.bucket, Key=key))["Body"].read()
    assert got == part + b"tail"
    assert moto_proxy.stats.requests("UploadPart") == 5
    assert moto_proxy.stats.faults("UploadPart") == 3


def test_proxy_start_stop_and_upstream_down(fault_proxy: ProxyFactory) -> None:
    from zerorename.servers.servers import free_ports

    (dead,) = free_ports(1)
    with FaultProxy(f"http://127.0.0.1:{dead}") as proxy:
        url = proxy.url
        target = S3Target(
            name="x",
            endpoint_url=url,
            region="us-east-1",
            access_key="a" * 20,
            secret_key="b" * 40,
            bucket="bkt",
            prefix="p/",
        )
        with pytest.raises(ClientError) as err:
            client(target).head_bucket(Bucket="bkt")
        assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 502
    with pytest.raises(NET_ERRORS):
        client(target).head_bucket(Bucket="bkt")  # stopped: nothing listens there any more
