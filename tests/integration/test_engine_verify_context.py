"""Engines share one TLS verify context per CA bundle (engine/wire/client.share_verify_context).

aiobotocore parsed the CA bundle (certifi's: about 40 ms of CPU) again for every client's
first request through botocore, over HTTP too; a short-lived engine (a CLI command, a
Spark task's list or head) paid it each time. The context is built once per bundle file
and shared; a changed bundle file is read again; a proxy (it changes the context it is
given) keeps a client's own. Verification itself is held by test_tls_engine.py and
test_perf_tls.py (a wrong CA fails, the right one uploads) over HTTPS.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from zerorename.engine import UploadEngine
from zerorename.servers.targets import S3Target


def verify_builder(engine: UploadEngine) -> Any:
    client = engine._client
    raw = getattr(client, "_client", client)  # under the fast path: the botocore client
    return raw._endpoint.http_session._build_verify_context


async def test_engines_share_the_context_of_one_bundle(moto_s3: S3Target) -> None:
    cfg = moto_s3.engine_config()
    async with UploadEngine(cfg) as a, UploadEngine(cfg) as b:
        await a._client.list_objects_v2(Bucket=moto_s3.bucket)  # a request through botocore
        await b._client.list_objects_v2(Bucket=moto_s3.bucket)
        assert verify_builder(a)() is verify_builder(b)()


async def test_a_changed_bundle_file_is_read_again(moto_s3: S3Target, tmp_path: Path) -> None:
    from botocore.httpsession import get_cert_path

    bundle = tmp_path / "ca.pem"
    shutil.copyfile(get_cert_path(True), bundle)
    async with UploadEngine(moto_s3.engine_config(ca_bundle=str(bundle))) as a:
        first = verify_builder(a)()
    with bundle.open("a") as f:
        f.write("\n")  # another size: another file
    async with UploadEngine(moto_s3.engine_config(ca_bundle=str(bundle))) as b:
        assert verify_builder(b)() is not first


async def test_with_a_proxy_in_the_environment_each_client_builds_its_own(
    moto_s3: S3Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # never used: the test sends nothing
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert os.environ["HTTPS_PROXY"]
    async with UploadEngine(moto_s3.engine_config()) as a:
        build = verify_builder(a)
        assert build() is not build()
