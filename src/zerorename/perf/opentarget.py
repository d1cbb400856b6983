"""Open a benchmark target: an embedded server the harness starts, or a user's endpoint.

- ``moto``: moto's S3 server in its own process (its CPU never counts as client CPU).
- ``rgw``: a single-node Ceph RGW started by the project's launcher (needs radosgw).
- ``sink``: a do-nothing S3 server in its own process (measures the client alone).
- ``aws`` or an ``http(s)://`` URL: AWS S3 or any S3-compatible store (MinIO, Ceph);
  credentials come from the AWS chain (env, profile, role); ``--bucket`` must exist
  unless ``--create-bucket`` is given.

With ``tls`` an embedded target is reached over HTTPS, verified with a CA made for this run
(``make_tls_files`` in a temp dir): the sink serves HTTPS itself, RGW natively (beast
``ssl_endpoint``), moto behind a TLS-terminating :class:`FaultProxy` in this process (no
faults: a front only). An ``https://`` URL is verified with ``ca_bundle`` (``--ca-bundle``),
else ``AWS_CA_BUNDLE``, else the system's roots.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from zerorename.logsafe import redact_url
from zerorename.perf.errors import TargetError as TargetError  # re-exported
from zerorename.perf.model import DEFAULT_BUCKET, Target

if TYPE_CHECKING:  # the harness and a baseline's child load no engine
    from zerorename.engine.config import AddressingStyle
    from zerorename.servers.tls import TlsFiles

log = logging.getLogger(__name__)

EMBEDDED = ("moto", "rgw", "sink")
#: credentials for the embedded moto and sink servers (they accept any)
_BENCH_KEY, _BENCH_SECRET = "zerorenamebench", "zerorenamebenchsecret"


@contextmanager
def _moto_process() -> Iterator[str]:
    """moto's server in a child process (:func:`zerorename.servers.servers.moto_process`:
    the tests' keep-alive :class:`~zerorename.servers.servers.MotoServer`, whose figures do
    not carry the TCP connection and thread per request of moto's werkzeug server)."""
    from zerorename.servers.errors import ServerStartError
    from zerorename.servers.servers import moto_process

    with ExitStack() as stack:
        try:
            url = stack.enter_context(moto_process())
        except ServerStartError as exc:
            raise TargetError(f"{exc} (pip install 'zerorename[perf]')") from None
        yield url


def _tls_files(stack: ExitStack) -> TlsFiles:
    """A fresh CA and server certificate for this run, removed when the target closes."""
    from zerorename.servers.tls import make_tls_files

    directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="zr-perf-tls-"))
    return make_tls_files(directory)


def url_ca_bundle(spec: str, ca_bundle: str | None) -> str | None:
    """The CA bundle that verifies the URL target ``spec``: ``ca_bundle``, else
    ``AWS_CA_BUNDLE``, else None (the system's roots). Raises TargetError for a bundle that
    is not a readable file, or one given for a plain-HTTP endpoint."""
    given = ca_bundle or os.environ.get("AWS_CA_BUNDLE") or None
    if given is None:
        return None
    where = "--ca-bundle" if ca_bundle else "AWS_CA_BUNDLE"
    if ca_bundle and spec.startswith("http://"):
        raise TargetError(
            f"--ca-bundle is for https:// endpoints; {redact_url(spec)} is plain HTTP"
        )
    if not Path(given).is_file() or not os.access(given, os.R_OK):
        raise TargetError(f"{where} {given} is not a readable file: give the CA bundle (PEM)")
    return given


#: the environment variables botocore reads an endpoint from (the first set one wins)
ENDPOINT_ENV = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def target_problem(spec: str, environ: Mapping[str, str]) -> str | None:
    """Why the target ``spec`` cannot be used, or None. Checked before anything starts: an
    endpoint URL (``--target URL``, or for ``aws`` the endpoint in AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL, which every client honours) must pass the engine's rule (no
    credentials, query or fragment); messages show it only through redact_url."""
    if spec in EMBEDDED:
        return None
    # the engine's rule, imported here: the engine (aiobotocore, aiohttp) costs the harness
    # ~0.7 s of CPU at every start, and an embedded target never needs it
    from zerorename.engine.config import endpoint_problem

    if spec == "aws":
        for name in ENDPOINT_ENV:
            value = environ.get(name)
            if value:
                problem = endpoint_problem(value)
                return f"{name}: {problem}" if problem else None
        return None
    if spec.startswith(("http://", "https://")) or any(c in spec for c in ":@?#"):
        problem = endpoint_problem(spec)
        return f"--target: {problem}" if problem else None
    return (
        f"unknown target {spec!r}: use moto, rgw, sink, aws, or an endpoint URL "
        "such as http://127.0.0.1:9000"
    )


def _create_bucket(target: Target) -> None:
    client = target.plain_boto3_client()
    with suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=target.bucket)


@contextmanager
def open_target(
    spec: str,
    *,
    bucket: str | None = None,
    region: str | None = None,
    addressing_style: AddressingStyle | None = None,
    create_bucket: bool = False,
    rgw_store: str = "bluestore",
    tls: bool = False,
    ca_bundle: str | None = None,
) -> Iterator[Target]:
    """Yield a :class:`Target` for ``spec`` (moto, rgw, sink, aws or a URL); embedded
    servers are stopped on exit. Each call gets its own run prefix. ``tls``: an embedded
    server over HTTPS with this run's own CA; ``ca_bundle``: verifies an https:// URL."""
    problem = target_problem(spec, os.environ)
    if problem is not None:
        raise TargetError(problem)
    prefix = f"zerorename-perf/{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    embedded = spec in EMBEDDED
    if tls and not embedded:
        raise TargetError(
            f"--tls is for the embedded targets ({', '.join(EMBEDDED)}); for {spec} give an "
            "https:// endpoint URL (and --ca-bundle FILE for a private CA)"
        )
    if ca_bundle and embedded:
        raise TargetError(
            f"--ca-bundle is for aws and URL targets; {spec} --tls makes its own CA per run"
        )
    with ExitStack() as stack:
        files = _tls_files(stack) if tls else None
        bundle = str(files.ca_bundle) if files is not None else None
        if spec == "moto":
            url = stack.enter_context(_moto_process())
            if files is not None:
                from zerorename.servers.faultproxy import FaultProxy

                front = FaultProxy(url, tls=files.server.server_context())
                url = stack.enter_context(front).url
            target = Target(
                "moto",
                url,
                bucket or DEFAULT_BUCKET,
                region or "us-east-1",
                addressing_style or "path",
                _BENCH_KEY,
                _BENCH_SECRET,
                prefix,
                bundle,
            )
            _create_bucket(target)
        elif spec == "sink":
            from zerorename.servers.sink import SinkServer

            b = bucket or DEFAULT_BUCKET
            cert = files.server if files is not None else None
            sink = stack.enter_context(SinkServer(buckets=(b,), tls=cert))
            target = Target(
                "sink",
                sink.endpoint_url,
                b,
                region or "us-east-1",
                "path",
                _BENCH_KEY,
                _BENCH_SECRET,
                prefix,
                bundle,
            )
        elif spec == "rgw":
            from zerorename.servers.servers import RgwServer

            if not RgwServer.available():
                raise TargetError(
                    "Ceph RGW is not installed here (needs radosgw, ceph-mon, ceph-osd): "
                    "run scripts/test.sh once, or apt-get install radosgw ceph-mon ceph-osd"
                )
            cert = files.server if files is not None else None
            rgw = stack.enter_context(RgwServer(store=rgw_store, tls=cert))
            target = Target(
                "rgw",
                rgw.https_endpoint_url if cert is not None else rgw.endpoint_url,
                bucket or DEFAULT_BUCKET,
                region or "us-east-1",
                addressing_style or "path",
                rgw.access_key,
                rgw.secret_key,
                prefix,
                bundle,
            )
            _create_bucket(target)
        else:  # aws or an endpoint URL (target_problem refused anything else)
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
                url_ca_bundle(spec, ca_bundle),
            )
            if create_bucket:
                _create_bucket(target)
        yield target
