"""Plain records the engine returns: deferred uploads, completed uploads, batch results.

A :class:`PendingUpload` is everything needed to complete or abort a multipart upload
later, from any process: it round-trips through JSON exactly.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zerorename.engine.errors import RecordError

PENDING_UPLOAD_VERSION = 1


@dataclass(frozen=True)
class PartInfo:
    """One uploaded part: number (1-based), ETag as S3 returned it, size, checksum."""

    number: int
    etag: str
    size: int
    checksum: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"number": self.number, "etag": self.etag, "size": self.size}
        if self.checksum is not None:
            d["checksum"] = self.checksum
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartInfo:
        try:
            number, etag, size = d["number"], d["etag"], d["size"]
        except (KeyError, TypeError) as exc:
            raise RecordError(f"part record lacks a field: {exc}") from None
        checksum = d.get("checksum")
        if not isinstance(number, int) or not isinstance(etag, str) or not isinstance(size, int):
            raise RecordError(f"part record has a field of the wrong type: {dict(d)!r}")
        if checksum is not None and not isinstance(checksum, str):
            raise RecordError("part checksum must be a string")
        return cls(number=number, etag=etag, size=size, checksum=checksum)


@dataclass(frozen=True)
class PendingUpload:
    """A multipart upload whose parts are all uploaded but which is not yet completed."""

    bucket: str
    key: str
    upload_id: str
    parts: tuple[PartInfo, ...]
    length: int
    created: float = field(default_factory=time.time)
    #: checksum algorithm of the part checksums (None when checksums are off).
    checksum_algorithm: str | None = None

    def __post_init__(self) -> None:
        numbers = [p.number for p in self.parts]
        if numbers != sorted(set(numbers)) or (numbers and numbers[0] < 1):
            raise RecordError(
                f"parts of s3://{self.bucket}/{self.key} must have distinct ascending numbers"
            )
        if sum(p.size for p in self.parts) != self.length:
            raise RecordError(
                f"parts of s3://{self.bucket}/{self.key} add up to "
                f"{sum(p.size for p in self.parts)} bytes, record says {self.length}"
            )

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": PENDING_UPLOAD_VERSION,
            "bucket": self.bucket,
            "key": self.key,
            "upload_id": self.upload_id,
            "parts": [p.to_dict() for p in self.parts],
            "length": self.length,
            "created": self.created,
            "checksum_algorithm": self.checksum_algorithm,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PendingUpload:
        if not isinstance(d, Mapping):
            raise RecordError("pending upload record must be a JSON object")
        version = d.get("version")
        if version != PENDING_UPLOAD_VERSION:
            raise RecordError(
                f"pending upload record version {version!r} is not supported "
                f"(this zerorename reads version {PENDING_UPLOAD_VERSION})"
            )
        try:
            parts = tuple(PartInfo.from_dict(p) for p in d["parts"])
            rec = cls(
                bucket=str(d["bucket"]),
                key=str(d["key"]),
                upload_id=str(d["upload_id"]),
                parts=parts,
                length=int(d["length"]),
                created=float(d["created"]),
                checksum_algorithm=d.get("checksum_algorithm"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, RecordError):
                raise
            raise RecordError(f"pending upload record is malformed: {exc!r}") from None
        return rec

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> PendingUpload:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(f"pending upload record is not valid JSON: {exc}") from None
        return cls.from_dict(data)


@dataclass(frozen=True)
class UploadResult:
    """A completed upload."""

    bucket: str
    key: str
    etag: str
    length: int
    parts: int
    #: None when the object was written with a single PutObject.
    upload_id: str | None = None


@dataclass(frozen=True)
class UploadInfo:
    """A pending multipart upload as ListMultipartUploads reports it."""

    bucket: str
    key: str
    upload_id: str
    initiated: float


@dataclass(frozen=True)
class ObjectInfo:
    """An object as listing or HEAD reports it."""

    bucket: str
    key: str
    size: int
    etag: str
    last_modified: float


@dataclass(frozen=True)
class BatchFailure:
    """One record complete_many/abort_many could not handle."""

    bucket: str
    key: str
    upload_id: str
    error: str
    code: str = ""


@dataclass
class BatchResult:
    """What complete_many/abort_many did: counts and bytes, and the failures."""

    succeeded: int = 0
    failed: int = 0
    bytes: int = 0
    failures: list[BatchFailure] = field(default_factory=list)
    #: failures kept in ``failures`` (the count in ``failed`` is always exact).
    max_failures_kept: int = 1000

    def add_failure(self, failure: BatchFailure) -> None:
        self.failed += 1
        if len(self.failures) < self.max_failures_kept:
            self.failures.append(failure)

    @property
    def ok(self) -> bool:
        return self.failed == 0


def multipart_etag(upload: PendingUpload) -> str | None:
    """The ETag S3 gives the completed object (MD5 of the part MD5s, '-N'), when every part
    ETag is a plain MD5; None otherwise (e.g. SSE-KMS stores)."""
    digests = []
    for p in upload.parts:
        e = p.etag.strip('"')
        if len(e) != 32:
            return None
        try:
            digests.append(bytes.fromhex(e))
        except ValueError:
            return None
    return f"{hashlib.md5(b''.join(digests)).hexdigest()}-{len(digests)}"


def is_completed_object(
    upload: PendingUpload, info: ObjectInfo | None, *, strict: bool = False
) -> bool:
    """True when ``info`` is the object that completing ``upload`` produces: the right
    multipart ETag where it can be computed, else the right size. ``strict`` (the store
    refused our complete with If-None-Match: the key existed first) accepts only the
    right multipart ETag when it can be computed, so a racer's same-size PUT is not ours."""
    if info is None or info.size != upload.length:
        return False
    want = multipart_etag(upload)
    have = info.etag.strip('"')
    if want is None or (not strict and (not have or "-" not in have)):
        return True
    return have == want
