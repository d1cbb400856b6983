"""Target: one S3 endpoint, bucket and key prefix, where a benchmark, the demo or a test
writes (the perf harness's targets and the tests' fixtures hand out the same class)."""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zerorename.logsafe import redact_url

if TYPE_CHECKING:  # the engine (aiobotocore, aiohttp) is imported by the clients that use it:
    # a benchmark baseline's child never loads it
    from zerorename.engine.config import AddressingStyle, EngineConfig


_BUCKET_BAD = re.compile(r"[^a-z0-9-]+")

#: Target.boto3_client's clients by their settings, least recently used first
_CLIENTS: dict[tuple[Any, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()
_CLIENTS_KEPT = 16


def unique_bucket_name(hint: str = "", *, prefix: str = "zr") -> str:
    """A fresh, valid S3 bucket name: lowercase letters, digits and '-', 3..63 chars."""
    stem = _BUCKET_BAD.sub("-", hint.lower()).strip("-")[:30].strip("-")
    parts = [prefix, stem, uuid.uuid4().hex[:12]] if stem else [prefix, uuid.uuid4().hex[:12]]
    return "-".join(parts)[:63]


def unique_prefix(hint: str = "") -> str:
    """A fresh key prefix ending with '/' (unique per test)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", hint).strip("-")[:40]
    return f"{stem or 'test'}-{uuid.uuid4().hex[:8]}/"


#: the prefix a Target writes under when none is given (the perf harness's runs: each
#: benchmark run gives its own prefix below it)
DEFAULT_PREFIX = "zerorename-perf"


@dataclass(frozen=True)
class Target:
    """Where a client writes: an S3 endpoint (None: AWS's), a bucket, a region, the
    addressing style, credentials (None: the AWS chain: env, profile, instance role), a key
    prefix, and for an HTTPS endpoint with a private CA the CA bundle (PEM path) that
    verifies it. The one target of the benchmarks, the demo and the tests.

    ``name`` is the server kind ("moto", "rgw", "sink", "external"; the perf harness's
    "aws" or "url"), the same over HTTP and HTTPS. Secrets never leave here:
    :meth:`describe` and ``repr`` leave them out. A test's prefix ends with '/' (one per
    test, :func:`unique_prefix`); a benchmark's is a run's directory with no '/' at its end.
    """

    name: str
    endpoint_url: str | None
    bucket: str
    region: str = "us-east-1"
    addressing_style: AddressingStyle = "path"
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    #: prefix under which every key is (a test's or a benchmark run's: runs never collide)
    prefix: str = DEFAULT_PREFIX
    ca_bundle: str | None = None

    @property
    def tls(self) -> bool:
        """True when the endpoint is HTTPS (AWS's default endpoint is)."""
        return (self.endpoint_url or "https:").startswith("https:")

    def describe(self) -> dict[str, Any]:
        """What a report shows of the target: no credentials, the endpoint redacted."""
        return {
            "name": self.name,
            "endpoint_url": redact_url(self.endpoint_url) if self.endpoint_url else "(AWS default)",
            "bucket": self.bucket,
            "region": self.region,
            "addressing_style": self.addressing_style,
            "tls": self.tls,
            "ca_bundle": self.ca_bundle,
        }

    def env(self) -> dict[str, str]:
        """Environment variables a subprocess (a CLI, boto3) needs to reach this target the
        way this process does: the endpoint, and ``AWS_CA_BUNDLE`` when there is one."""
        out = {"AWS_ENDPOINT_URL": self.endpoint_url} if self.endpoint_url else {}
        if self.ca_bundle is not None:
            out["AWS_CA_BUNDLE"] = self.ca_bundle
        return out

    def key(self, *parts: str) -> str:
        """A key inside the prefix: ``prefix + name`` when the prefix is empty or ends with
        '/' (a test's), else the prefix and the parts joined by '/' (a benchmark run's)."""
        if not self.prefix or self.prefix.endswith("/"):
            return self.prefix + "/".join(parts)
        return "/".join([self.prefix, *parts])

    def destination(self, *parts: str) -> tuple[str, str]:
        """A run's destination under the prefix: its ``s3://`` URI and the prefix that
        lists exactly it (ending in '/'), as the committers' Destination names them (a
        test checks), without importing them: a baseline's child never loads the engine."""
        key = self.key(*parts)
        return f"s3://{self.bucket}/{key}", key + "/"

    def engine_config(self, **overrides: Any) -> EngineConfig:
        """An EngineConfig that talks to this target's endpoint (its credentials when it has
        both keys, else the AWS chain; its CA bundle when it has one); keyword arguments
        override any field."""
        from zerorename.engine.config import EngineConfig

        kwargs: dict[str, Any] = {
            "endpoint_url": self.endpoint_url,
            "region": self.region,
            "addressing_style": self.addressing_style,
        }
        if self.ca_bundle is not None:
            kwargs["ca_bundle"] = self.ca_bundle
        if self.access_key is not None and self.secret_key is not None:
            kwargs["aws_access_key_id"] = self.access_key
            kwargs["aws_secret_access_key"] = self.secret_key
        kwargs.update(overrides)
        return EngineConfig(**kwargs)

    def boto3_client(self, **config: Any) -> Any:
        """A boto3 S3 client for checking state in tests and scripts (never used by the
        library): standard retries (3 attempts), a 10 s connect and 60 s read timeout.

        Keyword arguments go to ``botocore.config.Config`` (e.g. ``retries=...``). Over
        HTTPS the client verifies with the target's CA bundle and adds checksums only where
        S3 requires them: boto3 >= 1.36 would otherwise send trailing checksums
        (``aws-chunked``) over TLS, which Ceph RGW pacific refuses (MissingContentLength).
        Without keyword arguments the client is shared by every call with the same target
        settings in this process: use it, do not close it or hook its events.
        """
        import boto3
        from botocore.config import Config

        cfg: dict[str, Any] = {
            "s3": {"addressing_style": self.addressing_style},
            "retries": {"max_attempts": 3, "mode": "standard"},
            "connect_timeout": 10,
            "read_timeout": 60,
        }
        if self.tls:
            cfg["request_checksum_calculation"] = "when_required"
        cfg.update(config)
        if config:  # a client made to measure: a fresh one
            return self._new_boto3_client(boto3.client, Config(**cfg))
        # without arguments, the same client for the same target settings (making one
        # costs more CPU than a request): keyed by every input boto3 reads, the AWS_*
        # environment included
        key = (
            self.endpoint_url,
            self.region,
            self.access_key,
            self.secret_key,
            self.ca_bundle,
            repr(sorted(cfg.items())),
            tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("AWS_"))),
            id(boto3.DEFAULT_SESSION),
        )
        with _CLIENTS_LOCK:
            client = _CLIENTS.pop(key, None)
            if client is not None:
                _CLIENTS[key] = client  # most recently used last
                return client
        client = self._new_boto3_client(boto3.client, Config(**cfg))
        with _CLIENTS_LOCK:
            _CLIENTS[key] = client
            while len(_CLIENTS) > _CLIENTS_KEPT:
                del _CLIENTS[next(iter(_CLIENTS))]
        return client

    def plain_boto3_client(self, **config: Any) -> Any:
        """A new boto3 S3 client, as a user's program makes one: its own session, botocore's
        defaults (retries, timeouts, checksums) but for ``config`` (botocore's Config; its
        ``s3`` addressing style is filled in unless given), verifying with the CA bundle.
        The perf harness's clients: its baselines measure exactly this."""
        import boto3
        from botocore.config import Config

        s3 = dict(config.pop("s3", {}))
        s3.setdefault("addressing_style", self.addressing_style)
        return self._new_boto3_client(boto3.session.Session().client, Config(s3=s3, **config))

    def _new_boto3_client(self, make: Any, config: Any) -> Any:
        return make(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            verify=self.ca_bundle,
            config=config,
        )

    def with_endpoint(self, url: str) -> Target:
        """The same target (credentials, bucket, prefix, CA bundle) reached through another
        endpoint, e.g. a :class:`~zerorename.servers.faultproxy.FaultProxy` in front of the
        server."""
        return dataclasses.replace(self, endpoint_url=url)

    def with_prefix(self, prefix: str) -> Target:
        """The same target with another key prefix."""
        return dataclasses.replace(self, prefix=prefix)

    def to_json(self) -> dict[str, Any]:
        """Everything a child needs (including credentials: pass it on stdin, never argv)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Target:
        return cls(**data)


#: the tests' name for :class:`Target` (the same class)
S3Target = Target


def purge(target: S3Target, *, delete_bucket: bool, client: Any = None) -> None:
    """Abort the pending uploads and delete the objects under ``target.prefix`` (the whole
    bucket when the prefix is empty), then optionally delete the bucket. Best effort is the
    caller's business: errors propagate."""
    c = client if client is not None else target.boto3_client()
    prefix = "" if delete_bucket else target.prefix
    paginator = c.get_paginator("list_multipart_uploads")
    for page in paginator.paginate(Bucket=target.bucket, Prefix=prefix):
        for up in page.get("Uploads", []):
            c.abort_multipart_upload(Bucket=target.bucket, Key=up["Key"], UploadId=up["UploadId"])
    for page in c.get_paginator("list_objects_v2").paginate(Bucket=target.bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            c.delete_objects(Bucket=target.bucket, Delete={"Objects": keys, "Quiet": True})
    if delete_bucket:
        c.delete_bucket(Bucket=target.bucket)
