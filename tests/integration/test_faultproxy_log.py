"""The fault proxy's timed request log on real traffic (moto): each request's S3 operation,
bucket, key, start, end and error, in the shape ``testing.requestlog`` reads, so the
sequential requests of a client's work can be counted on the wire."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError, HTTPClientError

from zerorename.servers.faultproxy import FaultProxy, FaultRule, Request
from zerorename.servers.requestlog import describe, longest_chain, sequential_requests
from zerorename.servers.targets import S3Target

ProxyFactory = Callable[..., FaultProxy]
#: per request: far above the jitter of a loaded machine, so parallel requests overlap
LATENCY = 0.3


def client(target: S3Target, **cfg: Any) -> Any:
    """boto3 with no retries: one call, one request."""
    return target.boto3_client(retries={"mode": "standard", "total_max_attempts": 1}, **cfg)


def test_sequential_requests_are_logged_in_order(
    moto_s3: S3Target, fault_proxy: ProxyFactory
) -> None:
    proxy = fault_proxy(moto_s3.endpoint_url, rules=[FaultRule(fault="latency", delay=0.03)])
    c = client(moto_s3.with_endpoint(proxy.url))
    key = moto_s3.key("a dir/ü %+.bin")
    c.put_object(Bucket=moto_s3.bucket, Key=key, Body=b"abc")
    c.get_object(Bucket=moto_s3.bucket, Key=key)["Body"].read()
    c.head_object(Bucket=moto_s3.bucket, Key=key)
    up = c.create_multipart_upload(Bucket=moto_s3.bucket, Key=key)["UploadId"]
    c.abort_multipart_upload(Bucket=moto_s3.bucket, Key=key, UploadId=up)
    log = proxy.log
    assert [(r.number, r.op, r.bucket, r.key, r.error) for r in log] == [
        (1, "PutObject", moto_s3.bucket, key, None),
        (2, "GetObject", moto_s3.bucket, key, None),
        (3, "HeadObject", moto_s3.bucket, key, None),
        (4, "CreateMultipartUpload", moto_s3.bucket, key, None),
        (5, "AbortMultipartUpload", moto_s3.bucket, key, None),
    ]
    assert all(isinstance(r, Request) and r.start < r.end for r in log)
    assert all(a.end <= b.start for a, b in itertools.pairwise(log))
    assert sequential_requests(log) == 5
    assert describe(log).endswith(
        "5 sequential: PutObject > GetObject > HeadObject > CreateMultipartUpload"
        " > AbortMultipartUpload"
    )
    cpu = proxy.cpu_seconds()  # the proxy's thread's CPU, which a benchmark takes out
    assert cpu > 0
    proxy.reset()  # starts the log and its numbering over
    c.head_object(Bucket=moto_s3.bucket, Key=key)
    assert [(r.number, r.op) for r in proxy.log] == [(1, "HeadObject")]
    assert proxy.cpu_seconds() >= cpu


def test_parallel_requests_do_not_chain(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    """Eight GETs sent together overlap: one sequential request; then one after them: two."""
    proxy = fault_proxy(moto_s3.endpoint_url)
    c = client(moto_s3.with_endpoint(proxy.url), max_pool_connections=8)
    keys = [moto_s3.key(f"k{i}") for i in range(8)]
    for k in keys:
        c.put_object(Bucket=moto_s3.bucket, Key=k, Body=b"x")
    proxy.add_rule(FaultRule(fault="latency", delay=LATENCY))
    proxy.reset()
    ready = threading.Barrier(len(keys))
    errors: list[BaseException] = []

    def get(k: str) -> None:
        try:
            ready.wait(30)
            c.get_object(Bucket=moto_s3.bucket, Key=k)["Body"].read()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=get, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert proxy.stats.requests("GetObject") == 8
    assert sequential_requests(proxy.log) == 1, describe(proxy.log)
    c.delete_objects(Bucket=moto_s3.bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    chain = longest_chain(proxy.log)
    assert [r.op for r in chain] == ["GetObject", "DeleteObjects"], [
        (r.op, r.start, r.end) for r in proxy.log
    ]
    assert chain[1].key == ""  # a bucket request


def test_errors_are_logged_with_the_request(moto_s3: S3Target, fault_proxy: ProxyFactory) -> None:
    """An upstream error answer is ``HTTP <status>``; an injected fault is its kind."""
    proxy = fault_proxy(moto_s3.endpoint_url)
    c = client(moto_s3.with_endpoint(proxy.url))
    missing = moto_s3.key("missing")
    with pytest.raises(ClientError):
        c.get_object(Bucket=moto_s3.bucket, Key=missing)
    proxy.add_rule(FaultRule(operation="PutObject", fault="slowdown", schedule={1}))
    proxy.add_rule(FaultRule(operation="PutObject", fault="reset", schedule={2}))
    with pytest.raises(ClientError) as ei:  # the 503
        c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("p"), Body=b"abc")
    assert ei.value.response["Error"]["Code"] == "SlowDown"
    with pytest.raises(HTTPClientError):  # the reset (botocore's ConnectionClosedError family)
        c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("p"), Body=b"abc")
    c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("p"), Body=b"abc")
    assert [(r.op, r.key, r.error) for r in proxy.log] == [
        ("GetObject", missing, "HTTP 404"),
        ("PutObject", moto_s3.key("p"), "slowdown"),
        ("PutObject", moto_s3.key("p"), "reset"),
        ("PutObject", moto_s3.key("p"), None),
    ]
