"""Open a benchmark target: an embedded server the harness starts, or a user's endpoint.

- ``moto``: moto's S3 server in its own process (its CPU never counts as client CPU).
- ``rgw``: a single-node Ceph RGW started by the project's launcher (needs radosgw).
- ``sink``: a do-nothing S3 server in its own process (measures the client alone).
- ``aws`` or an ``http(s)://`` URL: AWS S3 or any S3-compatible store (MinIO, Ceph);
  credentials come from the AWS chain (env, profile, role); ``--bucket`` must exist
  unless ``--create-bucket`` is given.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress

from zerorename.perf.model import DEFAULT_BUCKET, Target

log = logging.getLogger(__name__)

EMBEDDED = ("moto", "rgw", "sink")
#: credentials for the embedded moto and sink servers (they accept any)
_BENCH_KEY, _BENCH_SECRET = "zerorenamebench", "zerorenamebenchsecret"


class TargetError(RuntimeError):
    """A target could not be opened; the message says what to do."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def _moto_process() -> Iterator[str]:
    """moto's server in a child process on a free loopback port."""
    port = _free_port()
    code = (
        "import logging,sys\n"
        "logging.getLogger('werkzeug').setLevel(logging.ERROR)\n"
        "from moto.server import ThreadedMotoServer\n"
        f"s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False)\n"
        "s.start()\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    raise TargetError(
                        f"moto server did not start (is moto[server] installed? "
                        f"pip install 'zerorename[perf]'): {err.strip()[-500:]}"
                    ) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _create_bucket(target: Target) -> None:
    client = target.boto3_client()
    with suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=target.bucket)


@contextmanager
def open_target(
    spec: str,
    *,
    bucket: str | None = None,
    region: str | None = None,
    addressing_style: str | None = None,
    create_bucket: bool = False,
    rgw_store: str = "bluestore",
) -> Iterator[Target]:
    """Yield a :class:`Target` for ``spec`` (moto, rgw, sink, aws or a URL); embedded
    servers are stopped on exit. Each call gets its own run prefix."""
    prefix = f"zerorename-perf/{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        if spec == "moto":
            url = stack.enter_context(_moto_process())
            target = Target(
                "moto",
                url,
                bucket or DEFAULT_BUCKET,
                region or "us-east-1",
                addressing_style or "path",
                _BENCH_KEY,
                _BENCH_SECRET,
                prefix,
            )
            _create_bucket(target)
        elif spec == "sink":
            from zerorename.perf.sink import SinkServer

            b = bucket or DEFAULT_BUCKET
            sink = stack.enter_context(SinkServer(buckets=(b,)))
            target = Target(
                "sink",
                sink.endpoint_url,
                b,
                region or "us-east-1",
                "path",
                _BENCH_KEY,
                _BENCH_SECRET,
                prefix,
            )
        elif spec == "rgw":
            from zerorename.testing.servers import RgwServer

            if not RgwServer.available():
                raise TargetError(
                    "Ceph RGW is not installed here (needs radosgw, ceph-mon, ceph-osd): "
                    "run scripts/test.sh once, or apt-get install radosgw ceph-mon ceph-osd"
                )
            rgw = stack.enter_context(RgwServer(store=rgw_store))
            target = Target(
                "rgw",
                rgw.endpoint_url,
                bucket or DEFAULT_BUCKET,
                region or "us-east-1",
                addressing_style or "path",
                rgw.access_key,
                rgw.secret_key,
                prefix,
            )
            _create_bucket(target)
        elif spec == "aws" or spec.startswith(("http://", "https://")):
            if not bucket:
                raise TargetError(
                    f"target {spec} needs --bucket NAME (a bucket you can write to; "
                    "add --create-bucket to create it)"
                )
            endpoint = None if spec == "aws" else spec
            target = Target(
                "aws" if endpoint is None else "url",
                endpoint,
                bucket,
                region
                or os.environ.get("AWS_REGION")
                or os.environ.get("AWS_DEFAULT_REGION")
                # a custom endpoint (MinIO, Ceph) usually ignores the region
                or "us-east-1",
                addressing_style or ("auto" if endpoint is None else "path"),
                None,
                None,
                prefix,
            )
            if create_bucket:
                _create_bucket(target)
        else:
            raise TargetError(
                f"unknown target {spec!r}: use moto, rgw, sink, aws, or an endpoint URL "
                "such as http://127.0.0.1:9000"
            )
        yield target
