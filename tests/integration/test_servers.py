"""Both local servers speak real S3 for what zerorename relies on; documents their quirks.

Plain boto3 on purpose: these tests check the servers, not the library.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

from zerorename.servers.servers import MotoServer
from zerorename.servers.targets import S3Target

MiB = 1024 * 1024


def _part(seed: int, size: int) -> bytes:
    block = hashlib.sha256(str(seed).encode()).digest() * (64 * 1024 // 32)
    return (block * (size // len(block) + 1))[:size]


def test_multipart_two_parts_list_complete_abort(s3: S3Target) -> None:
    c = s3.boto3_client()
    key = s3.key("dir one/part-00000 ü%+#.parquet")  # keys with spaces/unicode round-trip
    other = s3.key("dir one0/x")  # shares the bare prefix but not prefix + '/'
    p1, p2 = _part(1, 5 * MiB), _part(2, 1 * MiB + 7)

    up = c.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]
    up_other = c.create_multipart_upload(Bucket=s3.bucket, Key=other)["UploadId"]
    e1 = c.upload_part(Bucket=s3.bucket, Key=key, UploadId=up, PartNumber=1, Body=p1)["ETag"]
    e2 = c.upload_part(Bucket=s3.bucket, Key=key, UploadId=up, PartNumber=2, Body=p2)["ETag"]

    # nothing is visible before completion
    listed = c.list_objects_v2(Bucket=s3.bucket, Prefix=s3.prefix)
    assert listed["KeyCount"] == 0

    # ListMultipartUploads filters by Prefix (a directory prefix ending with '/')
    pending = c.list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.key("dir one/"))
    assert [(u["Key"], u["UploadId"]) for u in pending.get("Uploads", [])] == [(key, up)]
    parts = c.list_parts(Bucket=s3.bucket, Key=key, UploadId=up)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, len(p1)), (2, len(p2))]

    # a completion issued later (by another "process") publishes the object atomically
    done = c.complete_multipart_upload(
        Bucket=s3.bucket,
        Key=key,
        UploadId=up,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]},
    )
    head = c.head_object(Bucket=s3.bucket, Key=key)
    assert head["ContentLength"] == len(p1) + len(p2)
    assert head["ETag"].strip('"').endswith("-2")
    if s3.name == "rgw":
        # quirk: RGW answers CompleteMultipartUpload with an empty ETag; HEAD has it
        assert done.get("ETag", "") in ("", '""', head["ETag"])
    else:
        assert done["ETag"] == head["ETag"]
    body = c.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    assert hashlib.sha256(body).digest() == hashlib.sha256(p1 + p2).digest()

    # abort removes the other pending upload
    c.abort_multipart_upload(Bucket=s3.bucket, Key=other, UploadId=up_other)
    left = c.list_multipart_uploads(Bucket=s3.bucket, Prefix=s3.prefix)
    assert left.get("Uploads", []) == []
    assert c.list_objects_v2(Bucket=s3.bucket, Prefix=other)["KeyCount"] == 0


def test_part_too_small_and_wrong_etag_rejected(s3: S3Target) -> None:
    c = s3.boto3_client()
    key = s3.key("small")
    up = c.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]
    e1 = c.upload_part(Bucket=s3.bucket, Key=key, UploadId=up, PartNumber=1, Body=b"a" * 1000)[
        "ETag"
    ]
    e2 = c.upload_part(Bucket=s3.bucket, Key=key, UploadId=up, PartNumber=2, Body=b"b" * 1000)[
        "ETag"
    ]
    parts = [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]
    with pytest.raises(ClientError) as small:
        c.complete_multipart_upload(
            Bucket=s3.bucket, Key=key, UploadId=up, MultipartUpload={"Parts": parts}
        )
    assert small.value.response["Error"]["Code"] == "EntityTooSmall"

    bad = [{"PartNumber": 1, "ETag": '"' + "0" * 32 + '"'}]
    with pytest.raises(ClientError) as wrong:
        c.complete_multipart_upload(
            Bucket=s3.bucket, Key=key, UploadId=up, MultipartUpload={"Parts": bad}
        )
    assert wrong.value.response["Error"]["Code"] == "InvalidPart"
    c.abort_multipart_upload(Bucket=s3.bucket, Key=key, UploadId=up)


def test_list_parts_after_abort(s3: S3Target) -> None:
    """Quirk: RGW says NoSuchKey for list_parts on an aborted upload; moto NoSuchUpload."""
    c = s3.boto3_client()
    key = s3.key("aborted")
    up = c.create_multipart_upload(Bucket=s3.bucket, Key=key)["UploadId"]
    c.upload_part(Bucket=s3.bucket, Key=key, UploadId=up, PartNumber=1, Body=b"x")
    c.abort_multipart_upload(Bucket=s3.bucket, Key=key, UploadId=up)
    with pytest.raises(ClientError) as err:
        c.list_parts(Bucket=s3.bucket, Key=key, UploadId=up)
    code = err.value.response["Error"]["Code"]
    if s3.name == "rgw":
        assert code in ("NoSuchKey", "NoSuchUpload")
    elif s3.name == "moto":
        assert code == "NoSuchUpload"


def test_delete_objects_batch(s3: S3Target) -> None:
    c = s3.boto3_client()
    keys = [s3.key(f"k{i:03d}") for i in range(25)]
    for k in keys:
        c.put_object(Bucket=s3.bucket, Key=k, Body=os.urandom(16))
    out = c.delete_objects(
        Bucket=s3.bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
    )
    assert out.get("Errors", []) == []
    assert c.list_objects_v2(Bucket=s3.bucket, Prefix=s3.prefix)["KeyCount"] == 0


def test_rgw_server_reports_start(rgw_server: object) -> None:
    from zerorename.servers.servers import RgwServer

    assert isinstance(rgw_server, RgwServer)
    assert rgw_server.start_seconds is not None and rgw_server.start_seconds > 0
    assert rgw_server.log_dir is not None and (rgw_server.log_dir / "client.rgw.log").is_file()


def test_moto_looks_up_the_service_of_s3_requests_once(
    moto_server: MotoServer, moto_s3: S3Target
) -> None:
    """moto's dispatcher works out each request's service (a directory listing, a stat per
    service, every service's URL patterns): MotoServer asks it once for S3-signed requests
    and keeps the answer; an unsigned request still goes through it."""
    app = moto_server._server.app  # the WSGI app MotoServer serves
    dispatcher = app._dispatcher
    looked_up = []
    lookup = dispatcher.get_application

    def counted(environ: dict[str, object]) -> object:
        looked_up.append(environ.get("PATH_INFO"))
        return lookup(environ)

    dispatcher.get_application = counted  # this server's instance only
    try:
        c = moto_s3.boto3_client()
        for i in range(3):
            c.put_object(Bucket=moto_s3.bucket, Key=moto_s3.key(f"k{i}"), Body=b"x")
        assert c.list_objects_v2(Bucket=moto_s3.bucket, Prefix=moto_s3.prefix)["KeyCount"] == 3
        assert looked_up == []
        url = f"{moto_s3.endpoint_url}/{moto_s3.bucket}/{moto_s3.key('k0')}"
        with pytest.raises(urllib.error.HTTPError) as unsigned:  # S3 refuses it, as it should
            urllib.request.urlopen(url)
        assert unsigned.value.code == 403
        assert looked_up == [f"/{moto_s3.bucket}/{moto_s3.key('k0')}"]
    finally:
        del dispatcher.get_application


def test_boto3_client_is_shared_per_target_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Making a boto3 client costs more CPU than a request: ``boto3_client()`` hands out one
    per target settings (a new prefix or bucket is the same client); another endpoint, an
    AWS_* variable or keyword arguments make another."""

    def target(bucket: str) -> S3Target:
        return S3Target(
            name="moto",
            endpoint_url="http://127.0.0.1:9",
            bucket=bucket,
            region="us-east-1",
            access_key="AK",
            secret_key="SK",
            prefix="p/",
        )

    t = target("b")
    c = t.boto3_client()
    assert t.with_prefix("q/").boto3_client() is c
    assert target("b2").boto3_client() is c
    assert t.with_endpoint("http://127.0.0.1:10").boto3_client() is not c
    assert t.boto3_client(retries={"max_attempts": 1}) is not c
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_required")
    assert t.boto3_client() is not c
