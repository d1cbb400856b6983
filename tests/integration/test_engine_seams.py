"""UploadEngine.upload_parts, the public seam writers use, against a real S3 server (moto:
the seam is zerorename's own, whatever the store)."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator

import pytest

from engine_helpers import ablocks, get, object_keys, pending_keys
from zerorename.engine import PendingUpload, UploadEngine, UploadResult, errors
from zerorename.engine.bodies.sources import Part, part_stream
from zerorename.servers.targets import S3Target
from zerorename.units import MiB

#: tests of zerorename's own logic, which no store changes, run on moto only (the rule in
#: tests/conftest.py's docstring)
MOTO = pytest.mark.parametrize("s3", ["moto"], indirect=True)

DATA = os.urandom(11 * MiB + 7)


@MOTO
async def test_upload_parts_completes_and_defers(s3: S3Target) -> None:
    cfg = s3.engine_config(part_size=5 * MiB, max_concurrency=3)
    async with UploadEngine(cfg) as engine:
        parts = part_stream(ablocks(DATA, 1 << 20), part_size=5 * MiB, size=None)
        done = await engine.upload_parts(s3.bucket, s3.key("seam-done"), parts)
        parts = part_stream(ablocks(DATA, 1 << 20), part_size=5 * MiB, size=None)
        pend = await engine.upload_parts(
            s3.bucket, s3.key("seam-deferred"), parts, defer=True, ContentType="text/x-zr"
        )
        assert isinstance(pend, PendingUpload) and len(pend.parts) == 3
        assert s3.key("seam-deferred") not in object_keys(s3)  # nothing visible yet
        await engine.complete(pend)
    assert isinstance(done, UploadResult) and (done.length, done.parts) == (len(DATA), 3)
    assert get(s3, s3.key("seam-done")) == DATA
    assert get(s3, s3.key("seam-deferred")) == DATA
    head = s3.boto3_client().head_object(Bucket=s3.bucket, Key=s3.key("seam-deferred"))
    assert head["ContentType"] == "text/x-zr"
    assert pending_keys(s3) == []


@MOTO
async def test_upload_parts_aborts_when_the_parts_fail(s3: S3Target) -> None:
    async def broken() -> AsyncGenerator[Part, None]:
        yield Part(1, DATA[: 5 * MiB], last=False)
        raise LookupError("the producer broke")

    async with UploadEngine(s3.engine_config(part_size=5 * MiB)) as engine:
        with pytest.raises(LookupError, match="the producer broke"):
            await engine.upload_parts(s3.bucket, s3.key("seam-broken"), broken())
        with pytest.raises(errors.ConfigError):
            await engine.upload_parts(s3.bucket, "", broken())
    assert pending_keys(s3) == []
