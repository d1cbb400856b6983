"""The perf sink (a do-nothing S3 server) against boto3, our engine and a committer job,
each over HTTP to a real sink subprocess."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import textwrap
import time
import uuid
import zlib
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from zerorename.committers import CommitOptions
from zerorename.committers.sync import SyncCommitter
from zerorename.engine import EngineConfig, PendingUpload, UploadEngine
from zerorename.engine.results import multipart_etag
from zerorename.servers.sink import SinkServer
from zerorename.servers.tls import make_tls_files

MiB = 1024 * 1024
BUCKET = "bench"


@pytest.fixture(scope="module")
def sink() -> Iterator[SinkServer]:
    with SinkServer(buckets=(BUCKET, "other")) as s:
        yield s


@pytest.fixture
def prefix() -> str:
    return f"t-{uuid.uuid4().hex[:8]}/"


def client(sink: SinkServer, **config: Any) -> Any:
    cfg: dict[str, Any] = {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 1}}
    cfg.update(config)
    return boto3.client(
        "s3",
        endpoint_url=sink.endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
        config=Config(**cfg),
    )


def engine_config(sink: SinkServer, **kw: Any) -> EngineConfig:
    return EngineConfig(
        endpoint_url=sink.endpoint_url,
        region="us-east-1",
        addressing_style="path",
        aws_access_key_id="x",
        aws_secret_access_key="y",
        **kw,
    )


def code(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    err = exc.value.response
    return err["Error"]["Code"], err["ResponseMetadata"]["HTTPStatusCode"]


def raw(sink: SinkServer, method: str, path: str, body: bytes = b"", **headers: str) -> Any:
    """One plain HTTP request (for framings boto3 does not send over http://)."""
    conn = http.client.HTTPConnection("127.0.0.1", sink.port, timeout=30)
    conn.request(method, path, body=body, headers=headers)
    resp = conn.getresponse()
    resp.data = resp.read()
    conn.close()
    return resp


# -- boto3 ------------------------------------------------------------------------------------
def test_put_get_head_delete_round_trip(sink: SinkServer, prefix: str) -> None:
    c = client(sink)
    key = prefix + "dätä sét #1+%/rec ord.json"
    body = json.dumps({"x": "ü" * 100}).encode()
    etag = c.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType="application/json")["ETag"]
    assert etag == f'"{hashlib.md5(body).hexdigest()}"'
    got = c.get_object(Bucket=BUCKET, Key=key)
    assert got["Body"].read() == body and got["ETag"] == etag
    assert got["ContentType"] == "application/json"
    head = c.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] == len(body) and head["ETag"] == etag
    c.delete_object(Bucket=BUCKET, Key=key)
    with pytest.raises(ClientError) as exc:
        c.get_object(Bucket=BUCKET, Key=key)
    assert code(exc) == ("NoSuchKey", 404)
    with pytest.raises(ClientError) as exc:
        c.head_object(Bucket=BUCKET, Key=key)
    assert code(exc)[1] == 404
    with pytest.raises(ClientError) as exc:
        c.get_object(Bucket="no-such-bucket", Key=key)
    assert code(exc) == ("NoSuchBucket", 404)


def test_default_checksum_config_round_trips_and_is_echoed(sink: SinkServer, prefix: str) -> None:
    c = client(sink)  # botocore's default: a CRC32 checksum on every PutObject
    body = os.urandom(3 * MiB + 17)  # > 1 MiB: boto3 also sends Expect: 100-continue
    resp = c.put_object(Bucket=BUCKET, Key=prefix + "k", Body=body)
    crc = b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    assert resp["ResponseMetadata"]["HTTPHeaders"]["x-amz-checksum-crc32"] == crc
    assert c.get_object(Bucket=BUCKET, Key=prefix + "k")["Body"].read() == body


def test_aws_chunked_body_is_decoded(sink: SinkServer, prefix: str) -> None:
    """botocore sends aws-chunked (trailing checksum) only over TLS, so it is built by hand."""
    payload = b'{"pendingset": "' + b"x" * 70000 + b'"}'
    crc = b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
    chunks = [payload[:65536], payload[65536:]]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
    framed += b"0\r\nx-amz-checksum-crc32:%s\r\n\r\n" % crc.encode()
    resp = raw(
        sink,
        "PUT",
        f"/{BUCKET}/{prefix}chunked.json",
        framed,
        **{
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(payload)),
            "x-amz-trailer": "x-amz-checksum-crc32",
            "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        },
    )
    assert resp.status == 200 and resp.getheader("x-amz-checksum-crc32") == crc
    got = client(sink).get_object(Bucket=BUCKET, Key=prefix + "chunked.json")
    assert got["Body"].read() == payload and got["ContentLength"] == len(payload)


@pytest.mark.parametrize("chunk", [1 * MiB, 65536, 999_983])
def test_upload_part_trailer_is_echoed_though_the_part_is_discarded(
    sink: SinkServer, prefix: str, chunk: int
) -> None:
    """Part data is only counted, never kept; the trailing checksum (read from the body's
    last bytes) is still answered, as S3 does, so a client's trailer is confirmed."""
    c = client(sink)
    key = prefix + "trailer"
    upload_id = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    payload = os.urandom(6 * MiB + 7)
    crc = b64encode(zlib.crc32(payload).to_bytes(4, "big")).decode()
    pieces = [payload[i : i + chunk] for i in range(0, len(payload), chunk)]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    framed += b"0\r\nx-amz-checksum-crc32:%s\r\n\r\n" % crc.encode()
    resp = raw(
        sink,
        "PUT",
        f"/{BUCKET}/{key}?partNumber=1&uploadId={upload_id}",
        framed,
        **{
            "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(payload)),
            "x-amz-trailer": "x-amz-checksum-crc32",
            "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        },
    )
    assert resp.status == 200 and resp.getheader("x-amz-checksum-crc32") == crc
    parts = c.list_parts(Bucket=BUCKET, Key=key, UploadId=upload_id)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in parts] == [(1, len(payload))]
    c.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=upload_id)


def test_transfer_encoding_chunked_body(sink: SinkServer, prefix: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", sink.port, timeout=30)
    conn.request("PUT", f"/{BUCKET}/{prefix}te", body=iter([b"abc", b"", b"defgh" * 1000]))
    assert conn.getresponse().status == 200  # http.client sends an iterable chunked
    conn.close()
    assert client(sink).get_object(Bucket=BUCKET, Key=prefix + "te")["Body"].read() == (
        b"abc" + b"defgh" * 1000
    )


def test_if_none_match_and_range(sink: SinkServer, prefix: str) -> None:
    c = client(sink)
    key = prefix + "once"
    c.put_object(Bucket=BUCKET, Key=key, Body=b"0123456789", IfNoneMatch="*")
    with pytest.raises(ClientError) as exc:
        c.put_object(Bucket=BUCKET, Key=key, Body=b"again", IfNoneMatch="*")
    assert code(exc) == ("PreconditionFailed", 412)
    got = c.get_object(Bucket=BUCKET, Key=key, Range="bytes=2-5")
    assert got["Body"].read() == b"2345" and got["ContentRange"] == "bytes 2-5/10"
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert c.get_object(Bucket=BUCKET, Key=key, Range="bytes=7-")["Body"].read() == b"789"
    assert c.get_object(Bucket=BUCKET, Key=key, Range="bytes=-3")["Body"].read() == b"789"
    with pytest.raises(ClientError) as exc:
        c.get_object(Bucket=BUCKET, Key=key, Range="bytes=20-30")
    assert code(exc) == ("InvalidRange", 416)


def test_list_v2_delimiter_and_pagination(sink: SinkServer, prefix: str) -> None:
    c = client(sink)
    keys = [f"{prefix}a/{i:02d}" for i in range(5)] + [f"{prefix}b+c/x", f"{prefix}b+c/y"]
    keys += [f"{prefix}f {i}" for i in range(4)]
    for k in keys:
        c.put_object(Bucket=BUCKET, Key=k, Body=b"1")
    pages = list(
        c.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=prefix, Delimiter="/", PaginationConfig={"PageSize": 2}
        )
    )
    assert len(pages) == 3 and pages[0]["IsTruncated"] and pages[0]["KeyCount"] == 2
    found = [o["Key"] for p in pages for o in p.get("Contents", [])]
    cps = [cp["Prefix"] for p in pages for cp in p.get("CommonPrefixes", [])]
    assert cps == [f"{prefix}a/", f"{prefix}b+c/"]
    assert found == sorted(f"{prefix}f {i}" for i in range(4))
    flat = [
        o["Key"]
        for p in c.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=prefix, PaginationConfig={"PageSize": 3}
        )
        for o in p.get("Contents", [])
    ]
    assert flat == sorted(keys)
    after = c.list_objects_v2(Bucket=BUCKET, Prefix=prefix, StartAfter=f"{prefix}b+c/x")
    assert after["Contents"][0]["Key"] == f"{prefix}b+c/y"
    v1 = c.list_objects(Bucket=BUCKET, Prefix=prefix, MaxKeys=4)
    assert v1["IsTruncated"] and [o["Key"] for o in v1["Contents"]] == sorted(keys)[:4]


def test_copy_and_delete_objects(sink: SinkServer, prefix: str) -> None:
    c = client(sink)
    c.put_object(Bucket=BUCKET, Key=prefix + "src ü", Body=b"payload")
    res = c.copy_object(
        Bucket="other", Key=prefix + "dst", CopySource={"Bucket": BUCKET, "Key": prefix + "src ü"}
    )
    assert res["CopyObjectResult"]["ETag"] == f'"{hashlib.md5(b"payload").hexdigest()}"'
    assert c.get_object(Bucket="other", Key=prefix + "dst")["Body"].read() == b"payload"
    keys = [f"{prefix}d/{i} &<>" for i in range(3)]
    for k in keys:
        c.put_object(Bucket=BUCKET, Key=k, Body=b"")
    res = c.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in keys]})
    assert sorted(d["Key"] for d in res["Deleted"]) == keys
    assert "Contents" not in c.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "d/")


def test_multipart_lifecycle(sink: SinkServer, prefix: str) -> None:
    c = client(sink, request_checksum_calculation="when_required")
    key = prefix + "big ü.bin"
    uid = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    sizes = [5 * MiB, 5 * MiB, 123]
    etags = [
        c.upload_part(Bucket=BUCKET, Key=key, UploadId=uid, PartNumber=n, Body=bytes(s))["ETag"]
        for n, s in enumerate(sizes, 1)
    ]
    parts = c.list_parts(Bucket=BUCKET, Key=key, UploadId=uid)["Parts"]
    assert [(p["PartNumber"], p["Size"], p["ETag"]) for p in parts] == list(
        zip([1, 2, 3], sizes, etags, strict=True)
    )
    listed = [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]
    with pytest.raises(ClientError) as exc:  # a part ETag that differs
        bad = [*listed[:2], {"PartNumber": 3, "ETag": '"' + "0" * 32 + '"'}]
        c.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=uid, MultipartUpload={"Parts": bad}
        )
    assert code(exc) == ("InvalidPart", 400)
    with pytest.raises(ClientError) as exc:  # a small part that is not the last
        c.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=uid, MultipartUpload={"Parts": [listed[2], listed[0]]}
        )
    assert code(exc)[1] == 400
    done = c.complete_multipart_upload(
        Bucket=BUCKET, Key=key, UploadId=uid, MultipartUpload={"Parts": listed}
    )
    digest = hashlib.md5(b"".join(bytes.fromhex(e.strip('"')) for e in etags)).hexdigest()
    assert done["ETag"] == f'"{digest}-3"'
    again = c.complete_multipart_upload(  # a retried complete succeeds, as on S3
        Bucket=BUCKET, Key=key, UploadId=uid, MultipartUpload={"Parts": listed}
    )
    assert again["ETag"] == done["ETag"]
    head = c.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] == sum(sizes) and head["ETag"] == done["ETag"]
    got = c.get_object(Bucket=BUCKET, Key=key, Range=f"bytes={5 * MiB - 2}-{5 * MiB + 1}")
    assert got["Body"].read() == bytes(4)
    assert got["ResponseMetadata"]["HTTPHeaders"]["x-zerorename-sink"] == "discarded"
    whole = c.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert len(whole) == sum(sizes) and whole.count(0) == len(whole)

    uid2 = c.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    e2 = c.upload_part(Bucket=BUCKET, Key=key, UploadId=uid2, PartNumber=1, Body=b"z")["ETag"]
    with pytest.raises(ClientError) as exc:
        c.complete_multipart_upload(
            Bucket=BUCKET,
            Key=key,
            UploadId=uid2,
            IfNoneMatch="*",
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e2}]},
        )
    assert code(exc) == ("PreconditionFailed", 412)
    c.abort_multipart_upload(Bucket=BUCKET, Key=key, UploadId=uid2)
    for call in (c.abort_multipart_upload, c.list_parts):
        with pytest.raises(ClientError) as exc:
            call(Bucket=BUCKET, Key=key, UploadId=uid2)
        assert code(exc) == ("NoSuchUpload", 404)
    with pytest.raises(ClientError) as exc:
        c.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId="nope", MultipartUpload={"Parts": listed}
        )
    assert code(exc) == ("NoSuchUpload", 404)


def test_upload_part_copy(sink: SinkServer, prefix: str) -> None:
    c = client(sink)
    c.put_object(Bucket=BUCKET, Key=prefix + "src", Body=b"0123456789")
    uid = c.create_multipart_upload(Bucket=BUCKET, Key=prefix + "dst")["UploadId"]
    src = {"Bucket": BUCKET, "Key": prefix + "src"}
    res = c.upload_part_copy(
        Bucket=BUCKET,
        Key=prefix + "dst",
        UploadId=uid,
        PartNumber=1,
        CopySource=src,
        CopySourceRange="bytes=2-5",
    )
    parts = [{"PartNumber": 1, "ETag": res["CopyPartResult"]["ETag"]}]
    c.complete_multipart_upload(
        Bucket=BUCKET, Key=prefix + "dst", UploadId=uid, MultipartUpload={"Parts": parts}
    )
    assert c.head_object(Bucket=BUCKET, Key=prefix + "dst")["ContentLength"] == 4


def test_list_multipart_uploads_pages(sink: SinkServer, prefix: str) -> None:
    c = client(sink)
    before = time.time()
    made = []
    for k in ("b", "a", "b", "c"):
        uid = c.create_multipart_upload(Bucket=BUCKET, Key=prefix + k)["UploadId"]
        made.append((prefix + k, uid))
    c.create_multipart_upload(Bucket=BUCKET, Key=prefix.rstrip("/") + "0/x")  # not under prefix
    pages = list(
        c.get_paginator("list_multipart_uploads").paginate(
            Bucket=BUCKET, Prefix=prefix, PaginationConfig={"PageSize": 3}
        )
    )
    assert len(pages) == 2 and pages[0]["IsTruncated"]
    seen = [(u["Key"], u["UploadId"]) for p in pages for u in p.get("Uploads", [])]
    assert seen == sorted(made)  # by key, then by creation (the ids sort that way)
    # the sink's clock (this machine's) stamped the upload between our two readings of it
    # (an order, not a duration; Initiated is kept to the millisecond)
    initiated = pages[0]["Uploads"][0]["Initiated"].timestamp()
    assert before - 0.001 <= initiated <= time.time()


def test_buckets(sink: SinkServer) -> None:
    c = client(sink)
    name = f"b-{uuid.uuid4().hex[:8]}"
    c.create_bucket(Bucket=name)
    c.head_bucket(Bucket=name)
    assert name in [b["Name"] for b in c.list_buckets()["Buckets"]]
    c.put_object(Bucket=name, Key="k", Body=b"")
    with pytest.raises(ClientError) as exc:
        c.delete_bucket(Bucket=name)
    assert code(exc) == ("BucketNotEmpty", 409)
    c.delete_object(Bucket=name, Key="k")
    c.delete_bucket(Bucket=name)
    with pytest.raises(ClientError) as exc:
        c.head_bucket(Bucket=name)
    assert code(exc)[1] == 404


def test_large_put_is_discarded_and_read_back_as_zeros(sink: SinkServer, prefix: str) -> None:
    c = client(sink, request_checksum_calculation="when_required")
    c.put_object(Bucket=BUCKET, Key=prefix + "large", Body=b"\x01" * (9 * MiB))
    got = c.get_object(Bucket=BUCKET, Key=prefix + "large")
    assert got["ResponseMetadata"]["HTTPHeaders"]["x-zerorename-sink"] == "discarded"
    assert got["Body"].read() == bytes(9 * MiB)
    record = json.dumps(["ü" * 100] * 50000).encode()  # a large pendingset is kept
    assert len(record) > 9 * MiB
    c.put_object(Bucket=BUCKET, Key=prefix + "r", Body=record, ContentType="application/json")
    assert c.get_object(Bucket=BUCKET, Key=prefix + "r")["Body"].read() == record


def test_bad_requests_get_errors_not_crashes(sink: SinkServer) -> None:
    resp = raw(sink, "GET", f"/{BUCKET}?versioning")
    assert resp.status == 501 and b"<Code>NotImplemented</Code>" in resp.data
    resp = raw(sink, "GET", "/b/k", Host=f"{BUCKET}.example.com:{sink.port}")
    assert resp.status == 404 and b"<Code>NoSuchBucket</Code>" in resp.data
    client(sink).put_object(Bucket=BUCKET, Key="vhost key", Body=b"v")
    resp = raw(sink, "GET", "/vhost%20key", Host=f"{BUCKET}.localhost:{sink.port}")
    assert resp.status == 200 and resp.data == b"v"  # virtual-host style on *.localhost
    with socket.create_connection(("127.0.0.1", sink.port), timeout=10) as sock:
        sock.sendall(b"GARBAGE\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    assert client(sink).list_buckets()["Buckets"]  # still serving


def test_keep_alive_requests_split_anywhere(sink: SinkServer, prefix: str) -> None:
    """Pipelined requests (sized, chunked and Expect: 100-continue bodies) sent in random
    pieces over one connection all get their answers, in order."""
    key = f"/{BUCKET}/{prefix}split"
    reqs = [
        b"PUT %s HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" % key.encode(),
        b"GET %s HTTP/1.1\r\nHost: h\r\n\r\n" % key.encode(),
        b"PUT %s2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n"
        b"2\r\nde\r\n0\r\nTrailer: 1\r\n\r\n" % key.encode(),
        b"GET %s2 HTTP/1.1\r\n\r\n" % key.encode(),
        b"PUT %s3 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz" % key.encode(),
        b"HEAD %s3 HTTP/1.1\r\n\r\n" % key.encode(),
    ]
    stream = b"".join(reqs)
    rnd = random.Random(7)
    with socket.create_connection(("127.0.0.1", sink.port), timeout=10) as sock:
        pos = 0
        while pos < len(stream):
            n = rnd.randint(1, 40)
            sock.sendall(stream[pos : pos + n])
            pos += n
            time.sleep(0.001)
        got = b""
        while got.count(b"HTTP/1.1 ") < 7 or not got.endswith(b"\r\n\r\n"):
            got += sock.recv(65536)
    statuses = re.findall(rb"HTTP/1\.1 (\d\d\d) ", got)
    assert statuses == [b"200", b"200", b"200", b"200", b"100", b"200", b"200"]
    assert b"\r\n\r\nhello" in got and b"\r\n\r\nabcde" in got


# -- the engine and a committer ------------------------------------------------------------
async def test_engine_deferred_uploads_and_complete_many(sink: SinkServer, prefix: str) -> None:
    async with UploadEngine(engine_config(sink, part_size=5 * MiB)) as eng:
        p = await eng.upload(BUCKET, prefix + "one", os.urandom(11 * MiB), defer=True)
        assert isinstance(p, PendingUpload) and len(p.parts) == 3
        assert await eng.head_object(BUCKET, prefix + "one") is None
        res = await eng.complete(p)
        info = await eng.head_object(BUCKET, prefix + "one")
        assert info is not None and info.size == 11 * MiB
        assert res.etag.strip('"') == info.etag.strip('"') == multipart_etag(p)

        sink.reset_stats()
        pending = [
            await eng.upload(BUCKET, f"{prefix}many/{i}", b"x" * i, defer=True) for i in range(20)
        ]
        batch = await eng.complete_many(pending, if_none_match=True)
        assert batch.succeeded == 20 and not batch.failures
        stats = sink.stats()
        assert stats["requests"]["CompleteMultipartUpload"] == 20
        assert stats["requests"]["UploadPart"] == 20
        assert stats["bytes_received"] >= sum(range(20))
        sizes = {o.key: o.size async for o in eng.list_objects(BUCKET, prefix + "many/")}
        assert sizes == {f"{prefix}many/{i}": i for i in range(20)}
        assert [u async for u in eng.list_uploads(BUCKET, prefix)] == []
        assert await eng.put_object(BUCKET, prefix + "rec.json", b"{}") != ""
        assert await eng.get_object(BUCKET, prefix + "rec.json") == b"{}"


@pytest.mark.parametrize("kind", ["magic", "staging"])
def test_committer_job_commit(sink: SinkServer, prefix: str, kind: str, tmp_path: Path) -> None:
    dest = f"{prefix}dätä sét #1+%/{kind}"
    with SyncCommitter(
        kind,
        f"s3://{BUCKET}/{dest}",
        engine_config(sink),
        options=CommitOptions(staging_dir=tmp_path),
    ) as c:
        job = c.setup_job()
        summaries = []
        for t in range(3):
            ta = job.task_attempt(t)
            ta.setup()
            with ta.open(f"t={t}/part ü.csv") as f:
                f.write(b"row,%d\n" % t * 50)
            summaries.append(ta.commit())
        sink.reset_stats()
        res = job.commit(summaries)
        assert res.files == 3
        assert sink.stats()["requests"]["CompleteMultipartUpload"] == 3
    c3 = client(sink)
    success = json.loads(c3.get_object(Bucket=BUCKET, Key=f"{dest}/_SUCCESS")["Body"].read())
    assert success["jobId"] == job.job_id and len(success["filenames"]) == 3
    listed = c3.list_objects_v2(Bucket=BUCKET, Prefix=dest + "/")["Contents"]
    data = {o["Key"]: o["Size"] for o in listed if o["Key"].endswith(".csv")}
    assert sorted(data.values()) == [len(b"row,%d\n" % t * 50) for t in range(3)]
    assert c3.list_multipart_uploads(Bucket=BUCKET, Prefix=dest + "/").get("Uploads", []) == []


# -- the process -----------------------------------------------------------------------------
def test_stats_and_reset(sink: SinkServer, prefix: str) -> None:
    c = client(sink)
    sink.reset_stats()
    for i in range(5):
        c.put_object(Bucket=BUCKET, Key=f"{prefix}{i}", Body=b"abc")
    stats = sink.stats()
    assert stats["requests"] == {"PutObject": 5}
    assert stats["bytes_received"] == 15 and stats["connections"] >= 1
    sink.reset_stats()
    assert sink.stats()["requests"] == {}


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_stop_ends_the_child() -> None:
    s = SinkServer(buckets=())
    with s:
        pid = s.pid
        assert client(s).list_buckets()["Buckets"] == []
    assert _gone(pid, 5)
    s.stop()  # twice is fine


def test_child_exits_when_its_parent_dies(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import os
        from zerorename.servers.sink import SinkServer
        s = SinkServer().start()
        print(s.pid, flush=True)
        os._exit(0)  # no stop(): the sink's watchdog must notice
        """
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, env=env, timeout=60, check=True
    )
    assert _gone(int(out.stdout.split()[-1]), 10)


def test_start_failure_reports_stderr() -> None:
    with pytest.raises(RuntimeError, match="sink"):
        SinkServer(host="256.0.0.1").start()


# -- HTTPS ---------------------------------------------------------------------------------
async def test_the_sink_serves_https_itself(tmp_path: Path) -> None:
    """With a certificate the sink is an HTTPS server (no terminator in front): boto3 and the
    engine verify it with the CA, the engine's parts go read-once with a trailing checksum
    the sink confirms, stats() works over HTTPS, and a client without the CA is refused."""
    files = make_tls_files(tmp_path / "tls")
    with SinkServer(buckets=(BUCKET,), tls=files.server) as tls_sink:
        assert tls_sink.endpoint_url.startswith("https://127.0.0.1:")
        s3 = client(tls_sink)
        c = boto3.client(
            "s3",
            endpoint_url=tls_sink.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="x",
            aws_secret_access_key="y",
            verify=str(files.ca_bundle),
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )
        c.put_object(Bucket=BUCKET, Key="a.json", Body=b"{}")
        assert c.get_object(Bucket=BUCKET, Key="a.json")["Body"].read() == b"{}"
        data = tmp_path / "data.bin"
        data.write_bytes(os.urandom(11 * MiB))
        cfg = engine_config(tls_sink, part_size=5 * MiB, ca_bundle=str(files.ca_bundle))
        async with UploadEngine(cfg) as eng:
            await eng.upload(BUCKET, "big", data)
            info = await eng.head_object(BUCKET, "big")
            assert info is not None and info.size == 11 * MiB
            assert eng.stats.trailer_checksums is True
            assert (eng.stats.trailer_bodies, eng.stats.trailer_fallbacks) == (3, 0)
        stats = tls_sink.stats()
        assert stats["requests"]["UploadPart"] == 3 and stats["bytes_received"] >= 11 * MiB
        with pytest.raises(Exception, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify"):
            s3.list_objects_v2(Bucket=BUCKET)
