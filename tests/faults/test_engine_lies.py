"""A store (or what stands in front of it) that answers success without what S3 always
sends: a 200 HTML page from a captive portal, an answer stripped of its ETag. Each is a
:class:`BadAnswer` naming the endpoint, on both send paths, sent once (not retried), and
nothing is recorded as written (DESIGN invariant 9, issue 10 item 7)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from engine_helpers import object_keys, pending_keys
from zerorename.engine import UploadEngine
from zerorename.engine.errors import BadAnswer
from zerorename.engine.events import Event, UploadCompleted
from zerorename.engine.wire.client import FastClient
from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

PATHS = pytest.mark.parametrize("fast_path", [True, False], ids=["fastpath", "botocore"])


def _engine(s3: S3Target, proxy: FaultProxy, fast_path: bool, events: list[Event]) -> UploadEngine:
    config = s3.with_endpoint(proxy.url).engine_config(fast_path=fast_path, part_size=5 * MiB)
    return UploadEngine(config, on_event=events.append)


def _check(exc: BadAnswer, proxy: FaultProxy, operation: str, sent: int = 1) -> None:
    """``sent``: requests of ``operation`` the upload makes (a part each), none retried."""
    assert exc.operation == operation and exc.code == "BadAnswer"
    assert proxy.url in str(exc), str(exc)  # names the endpoint
    assert proxy.stats.requests(operation) <= sent
    assert proxy.stats.faults(operation) == 1


CASES = [
    # (operation answered wrongly, fault, size uploaded)
    ("PutObject", "html_200", 10),
    ("PutObject", "strip_etag", 10),
    ("CreateMultipartUpload", "html_200", 6 * MiB),
    ("UploadPart", "html_200", 6 * MiB),
    ("UploadPart", "strip_etag", 6 * MiB),
    ("CompleteMultipartUpload", "html_200", 6 * MiB),
]


@PATHS
@pytest.mark.parametrize(
    ("operation", "fault", "size"), CASES, ids=[f"{o}-{f}" for o, f, _ in CASES]
)
@MOTO
async def test_an_upload_answered_without_its_fields_fails(
    s3: S3Target,
    fault_proxy: Callable[..., FaultProxy],
    fast_path: bool,
    operation: str,
    fault: str,
    size: int,
) -> None:
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(FaultRule(operation=operation, fault=fault, max_faults=1))  # type: ignore[arg-type]
    events: list[Event] = []
    data = random.Random(size).randbytes(size)
    key = s3.key(f"lied-{operation}")
    async with _engine(s3, proxy, fast_path, events) as engine:
        assert isinstance(engine._client, FastClient) == fast_path
        with pytest.raises(BadAnswer) as info:
            await engine.upload(s3.bucket, key, data)
        assert engine.stats.uploads_completed == 0 and engine.stats.retries == 0
    _check(info.value, proxy, operation, 2 if operation == "UploadPart" else 1)
    assert not any(isinstance(e, UploadCompleted) for e in events)
    assert pending_keys(s3) == []  # a multipart upload that failed is aborted
    if fault == "html_200" or operation != "PutObject":
        assert object_keys(s3) == []  # nothing reached the store, or nothing completed


@PATHS
@MOTO
async def test_a_deferred_complete_answered_with_html_fails_and_leaves_the_upload(
    s3: S3Target, fault_proxy: Callable[..., FaultProxy], fast_path: bool
) -> None:
    proxy = fault_proxy(s3.endpoint_url)
    events: list[Event] = []
    async with _engine(s3, proxy, fast_path, events) as engine:
        pend = await engine.upload(s3.bucket, s3.key("deferred"), b"abc", defer=True)
        proxy.add_rule(FaultRule(operation="CompleteMultipartUpload", fault="html_200"))
        with pytest.raises(BadAnswer) as info:
            await engine.complete(pend)
        batch = await engine.complete_many([pend])
        assert (batch.succeeded, batch.failed) == (0, 1)
        assert batch.failures[0].code == "BadAnswer"
    assert proxy.url in str(info.value)
    assert proxy.stats.requests("CompleteMultipartUpload") == 2  # one each, no retry
    assert object_keys(s3) == [] and pending_keys(s3) == [s3.key("deferred")]


@PATHS
@pytest.mark.parametrize("fault", ["html_200", "strip_etag"])
@MOTO
async def test_a_small_object_write_without_an_etag_fails(
    s3: S3Target, fault_proxy: Callable[..., FaultProxy], fast_path: bool, fault: str
) -> None:
    """put_object (the committers' records and _SUCCESS) never returns an empty ETag."""
    proxy = fault_proxy(s3.endpoint_url)
    proxy.add_rule(FaultRule(operation="PutObject", fault=fault))  # type: ignore[arg-type]
    async with _engine(s3, proxy, fast_path, []) as engine:
        with pytest.raises(BadAnswer) as info:
            await engine.put_object(s3.bucket, s3.key("_SUCCESS"), b"{}")
    _check(info.value, proxy, "PutObject")


async def test_the_proxy_faults_are_what_they_say(
    moto_s3: S3Target, fault_proxy: Callable[..., FaultProxy]
) -> None:
    """html_200 answers itself (nothing reaches the store); strip_etag forwards."""
    proxy = fault_proxy(moto_s3.endpoint_url)
    client = moto_s3.with_endpoint(proxy.url).boto3_client()
    rule = proxy.add_rule(FaultRule(operation="PutObject", fault="html_200", max_faults=1))
    resp = client.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("a"), Body=b"1")
    assert "ETag" not in resp and rule.fired == 1
    assert object_keys(moto_s3) == []
    proxy.add_rule(FaultRule(operation="PutObject", fault="strip_etag", max_faults=1))
    resp = client.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key("b"), Body=b"2")
    assert "ETag" not in resp
    assert object_keys(moto_s3) == [moto_s3.key("b")]
    assert proxy.stats.faults("PutObject", "html_200") == 1
    assert proxy.stats.faults("PutObject", "strip_etag") == 1
