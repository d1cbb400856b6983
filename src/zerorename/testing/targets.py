"""S3Target: one S3 endpoint + bucket + per-test prefix, as handed to tests by the fixtures."""

from __future__ import annotations

import dataclasses
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from zerorename.engine.config import EngineConfig

AddressingStyle = Literal["auto", "path", "virtual"]

_BUCKET_BAD = re.compile(r"[^a-z0-9-]+")


def unique_bucket_name(hint: str = "", *, prefix: str = "zr") -> str:
    """A fresh, valid S3 bucket name: lowercase letters, digits and '-', 3..63 chars."""
    stem = _BUCKET_BAD.sub("-", hint.lower()).strip("-")[:30].strip("-")
    parts = [prefix, stem, uuid.uuid4().hex[:12]] if stem else [prefix, uuid.uuid4().hex[:12]]
    return "-".join(parts)[:63]


def unique_prefix(hint: str = "") -> str:
    """A fresh key prefix ending with '/' (unique per test)."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", hint).strip("-")[:40]
    return f"{stem or 'test'}-{uuid.uuid4().hex[:8]}/"


class _Endpoint(Protocol):
    @property
    def endpoint_url(self) -> str | None: ...
    @property
    def region(self) -> str: ...
    @property
    def addressing_style(self) -> str: ...
    @property
    def access_key(self) -> str | None: ...
    @property
    def secret_key(self) -> str | None: ...


def endpoint_engine_config(target: _Endpoint, **overrides: Any) -> EngineConfig:
    """An EngineConfig that talks to ``target``'s endpoint (its credentials when it has
    both keys, else the AWS chain); keyword arguments override any field."""
    kwargs: dict[str, Any] = {
        "endpoint_url": target.endpoint_url,
        "region": target.region,
        "addressing_style": target.addressing_style,
    }
    if target.access_key is not None and target.secret_key is not None:
        kwargs["aws_access_key_id"] = target.access_key
        kwargs["aws_secret_access_key"] = target.secret_key
    kwargs.update(overrides)
    return EngineConfig(**kwargs)


@dataclass(frozen=True)
class S3Target:
    """Where a test writes: endpoint, region, credentials (None = AWS chain), bucket, prefix."""

    name: str
    endpoint_url: str | None
    region: str
    access_key: str | None = field(repr=False)
    secret_key: str | None = field(repr=False)
    bucket: str
    prefix: str
    addressing_style: AddressingStyle = "path"

    def key(self, name: str) -> str:
        """``prefix + name``: a key inside this test's prefix."""
        return self.prefix + name

    def engine_config(self, **overrides: Any) -> EngineConfig:
        """An EngineConfig for this target; keyword arguments override any field."""
        return endpoint_engine_config(self, **overrides)

    def boto3_client(self, **config: Any) -> Any:
        """A plain boto3 S3 client for checking state in tests (never used by the library).

        Keyword arguments go to ``botocore.config.Config`` (e.g. ``retries=...``).
        """
        import boto3
        from botocore.config import Config

        cfg: dict[str, Any] = {
            "s3": {"addressing_style": self.addressing_style},
            "retries": {"max_attempts": 3, "mode": "standard"},
            "connect_timeout": 10,
            "read_timeout": 60,
        }
        cfg.update(config)
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(**cfg),
        )

    def with_endpoint(self, url: str) -> S3Target:
        """The same target (credentials, bucket, prefix) reached through another endpoint,
        e.g. a :class:`~zerorename.testing.faultproxy.FaultProxy` in front of the server."""
        return dataclasses.replace(self, endpoint_url=url)

    def with_prefix(self, prefix: str) -> S3Target:
        """The same target with another key prefix."""
        return dataclasses.replace(self, prefix=prefix)


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
