"""The ``awscrt`` client of the ``upload`` and ``many`` scenarios: AWS's C runtime S3 client.

``awscrt.s3.S3Client`` is the S3 client under boto3's CRT transfer manager and the AWS
CLI's CRT mode; boto3's CRT manager only talks to AWS (it ignores ``endpoint_url``), so the
harness drives the client directly: one ``make_request(PUT_OBJECT)`` per object, the file
handed over by path (``send_filepath``) or the bytes as a body stream. Settings:

- the same part size (``part_size``, threshold = part size) and concurrency: the client's
  ``max_active_connections_override`` = ``--concurrency`` (its ``throughput_target_gbps``
  left at its default, which only sizes the pool below that cap);
- the engine's checksum (CRC32C by default) computed by the CRT and sent in an
  ``aws-chunked`` trailer (``S3ChecksumLocation.TRAILER``), over HTTP and HTTPS, or in a
  header where a 1-byte probe before the run finds trailers refused (RGW pacific over
  HTTPS; the ``trailer`` metric says which); ``--checksum none``: no checksum;
- over HTTPS the target's CA through ``TlsContextOptions.override_default_trust_store_from_
  path``.

Like every client it runs in a fresh child; what arrived is checked (untimed) with boto3:
the size, and for a multipart object the part count in its ETag.
"""

from __future__ import annotations

import importlib.util
import io
import threading
import uuid
from typing import Any
from urllib.parse import quote, urlsplit

from zerorename.perf.model import Meter, Target
from zerorename.units import MiB

NAME = "awscrt"
#: what the report says about the client's settings
NOTE = (
    "awscrt: awscrt.s3.S3Client driven directly (boto3's CRT manager ignores endpoint_url): "
    "PUT_OBJECT with send_filepath (upload) or a body stream (many), part_size = "
    "--part-size, max_active_connections_override = --concurrency (throughput_target_gbps "
    "left at its default), the engine's checksum computed by the CRT in an aws-chunked "
    "trailer; over HTTPS the run's CA via override_default_trust_store_from_path."
)
_CHECKSUMS = ("CRC32C", "CRC32", "SHA256")


def available() -> bool:
    """Whether awscrt is importable here (the client is skipped with a note where not)."""
    return importlib.util.find_spec("awscrt") is not None


class _Crt:
    """One S3Client for a target, and the requests of a run."""

    def __init__(self, target: Target, params: dict[str, Any]) -> None:
        from awscrt import auth, s3
        from awscrt import io as crt_io

        self.s3 = s3
        self.target = target
        part = int(params["part_size"])
        if target.access_key and target.secret_key:
            creds = auth.AwsCredentialsProvider.new_static(target.access_key, target.secret_key)
        else:
            creds = auth.AwsCredentialsProvider.new_default_chain()
        signing = s3.create_default_s3_signing_config(
            region=target.region, credential_provider=creds
        )
        kwargs: dict[str, Any] = {}
        if target.tls:
            opts = crt_io.TlsContextOptions()
            if target.ca_bundle:
                opts.override_default_trust_store_from_path(None, target.ca_bundle)
            ctx = crt_io.ClientTlsContext(opts)
            kwargs["tls_connection_options"] = ctx.new_connection_options()
            kwargs["tls_mode"] = s3.S3RequestTlsMode.ENABLED
        else:
            kwargs["tls_mode"] = s3.S3RequestTlsMode.DISABLED
        self.client = s3.S3Client(
            region=target.region,
            signing_config=signing,
            part_size=part,
            multipart_upload_threshold=part,
            max_active_connections_override=int(params["concurrency"]),
            **kwargs,
        )
        url = urlsplit(target.endpoint_url or f"https://s3.{target.region}.amazonaws.com")
        if target.addressing_style == "virtual" or (
            target.endpoint_url is None and target.addressing_style == "auto"
        ):
            self.host, self.prefix = f"{target.bucket}.{url.netloc}", "/"
        else:
            self.host, self.prefix = url.netloc, f"/{quote(target.bucket, safe='')}/"
        algo = str(params.get("checksum", "CRC32C"))
        self.checksum = (
            s3.S3ChecksumConfig(
                algorithm=s3.S3ChecksumAlgorithm[algo],
                location=s3.S3ChecksumLocation.TRAILER,
            )
            if algo in _CHECKSUMS
            else None
        )

    def settle_checksum_location(self, key: str) -> float:
        """Untimed, before a run: a 1-byte PUT with the trailing checksum; a store that
        refuses trailers with a 4xx (Ceph RGW pacific over HTTPS) gets the checksum in a
        header from then on (the CRT reads each part twice), as the engine falls back.
        Returns 1.0 for a trailer, 0.0 for a header (the ``trailer`` metric)."""
        if self.checksum is None:
            return 0.0
        try:
            self.put(key, 1, body=io.BytesIO(b"x")).finished_future.result()
        except self.s3.S3ResponseError as exc:
            if not 400 <= int(exc.status_code or 0) < 500:
                raise
            self.checksum = self.s3.S3ChecksumConfig(
                algorithm=self.checksum.algorithm, location=self.s3.S3ChecksumLocation.HEADER
            )
            self.put(key, 1, body=io.BytesIO(b"x")).finished_future.result()
            return 0.0
        return 1.0

    def put(self, key: str, size: int, *, path: str | None = None, body: Any = None) -> Any:
        """Start a PUT_OBJECT of ``size`` bytes from ``path`` or the stream ``body``
        (``size`` < 0: unknown length); returns the request (its ``finished_future``)."""
        from awscrt.http import HttpHeaders, HttpRequest

        headers = [("Host", self.host)]
        if size >= 0:
            headers.append(("Content-Length", str(size)))
        request = HttpRequest(
            "PUT", self.prefix + quote(key, safe="/~"), HttpHeaders(headers), body
        )
        return self.client.make_request(
            type=self.s3.S3RequestType.PUT_OBJECT,
            request=request,
            send_filepath=path,
            checksum_config=self.checksum,
        )


def upload_awscrt(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """One object: the file by path (``--source file``), bytes in memory, or the 1 MiB-block
    generator as a non-seekable stream of unknown length."""
    from zerorename.perf import clients

    crt = _Crt(target, params)
    size, part = int(params["size"]), int(params["part_size"])
    key = target.key("upload", uuid.uuid4().hex)
    kind = params.get("source", "file")
    data = clients.make_data(size) if kind == "memory" else None
    trailer = crt.settle_checksum_location(key)
    with Meter() as m:
        if kind == "file":
            request = crt.put(key, size, path=str(params["path"]))
        elif data is not None:
            request = crt.put(key, size, body=io.BytesIO(data))
        else:
            reader = io.BufferedReader(clients.StreamReader(size), buffer_size=MiB)
            request = crt.put(key, -1, body=reader)
        request.finished_future.result()
    _check_and_delete(target, key, size, part)
    return clients._metrics(m, size, verified=1.0, trailer=trailer)


def _check_and_delete(target: Target, key: str, size: int, part: int) -> None:
    client = target.plain_boto3_client()
    head = client.head_object(Bucket=target.bucket, Key=key)
    etag = str(head.get("ETag", "")).strip('"')
    parts = -(-size // part) if size > part else 0
    if head["ContentLength"] != size:
        raise RuntimeError(f"uploaded object has {head['ContentLength']} bytes, expected {size}")
    if parts and not etag.endswith(f"-{parts}"):
        raise RuntimeError(f"uploaded object's ETag {etag!r} is not that of {parts} parts")
    client.delete_object(Bucket=target.bucket, Key=key)


def many_awscrt(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """``--count`` objects, ``--concurrency`` requests in flight (a window released as each
    finishes), each a PUT_OBJECT from the same bytes in memory."""
    from zerorename.perf import clients

    crt = _Crt(target, params)
    count, size = int(params["count"]), int(params["size"])
    data = clients.make_data(size)
    base = target.key("many", uuid.uuid4().hex)
    keys = [f"{base}/obj-{i:07d}" for i in range(count)]
    trailer = crt.settle_checksum_location(keys[0])
    window = threading.Semaphore(int(params["concurrency"]))
    errors: list[BaseException] = []

    def done(future: Any) -> None:
        if future.exception() is not None:
            errors.append(future.exception())
        window.release()

    with Meter() as m:
        requests = []
        for key in keys:
            window.acquire()
            if errors:
                break
            request = crt.put(key, size, body=io.BytesIO(data))
            request.finished_future.add_done_callback(done)
            requests.append(request)
        for request in requests:
            request.finished_future.result()
    if errors:
        raise errors[0]
    clients._check_and_delete_boto3(target.plain_boto3_client(), target.bucket, base, keys, size)
    return {**clients._many_metrics(m, count, size), "trailer": trailer}
