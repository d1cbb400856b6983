"""Plain records the engine returns: deferred uploads, completed uploads, batch results.

A :class:`PendingUpload` is everything needed to complete or abort a multipart upload
later, from any process: it round-trips through JSON exactly.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zerorename.engine import checksums
from zerorename.engine.errors import RecordError
from zerorename.engine.planning import (
    MAX_PARTS,
    bucket_problem,
    finite_number,
    is_int,
    key_problem,
)

PENDING_UPLOAD_VERSION = 1


def _part_problem(number: object, etag: object, size: object, checksum: object) -> str | None:
    if not is_int(number) or not 1 <= number <= MAX_PARTS:  # type: ignore[operator]
        return f"part number must be an integer in 1..{MAX_PARTS}, got {number!r}"
    if not isinstance(etag, str) or not etag:
        return f"part {number} ETag must be a non-empty string, got {etag!r}"
    if not is_int(size) or size < 0:  # type: ignore[operator]
        return f"part {number} size must be an integer >= 0, got {size!r}"
    if checksum is not None and (not isinstance(checksum, str) or not checksum):
        return f"part {number} checksum must be a non-empty string or null, got {checksum!r}"
    return None


def target_problem(bucket: object, key: object, upload_id: object) -> str | None:
    """What is wrong with the (bucket, key, upload id) a complete or abort addresses (None:
    nothing). Checked before any request: an empty key would address the bucket."""
    problem = bucket_problem(bucket) or key_problem(key)
    if problem is None and (not isinstance(upload_id, str) or not upload_id):
        problem = f"upload id must be a non-empty string, got {upload_id!r}"
    return problem


@dataclass(frozen=True)
class PartInfo:
    """One uploaded part: number (1-based), ETag as S3 returned it, size, checksum.
    Validated when made: number 1..10000, non-empty ETag, size >= 0."""

    number: int
    etag: str
    size: int
    checksum: str | None = None

    def __post_init__(self) -> None:
        problem = _part_problem(self.number, self.etag, self.size, self.checksum)
        if problem is not None:
            raise RecordError(problem)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"number": self.number, "etag": self.etag, "size": self.size}
        if self.checksum is not None:
            d["checksum"] = self.checksum
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PartInfo:
        """A part from its JSON object; :class:`RecordError` for anything else."""
        if not isinstance(d, Mapping):
            raise RecordError(f"part record must be a JSON object, got {type(d).__name__}")
        missing = [name for name in ("number", "etag", "size") if name not in d]
        if missing:
            raise RecordError(f"part record lacks the field(s) {', '.join(missing)}")
        return cls(number=d["number"], etag=d["etag"], size=d["size"], checksum=d.get("checksum"))


@dataclass(frozen=True)
class PendingUpload:
    """A multipart upload whose parts are all uploaded but which is not yet completed.

    Validated when made (from JSON or not), so a record that exists is one the engine
    may act on: bucket and key by S3's rules, a non-empty upload id, 1..10000 parts in
    ascending order adding up to ``length``, a finite ``created`` time."""

    bucket: str
    key: str
    upload_id: str
    parts: tuple[PartInfo, ...]
    length: int
    created: float = field(default_factory=time.time)
    #: checksum algorithm of the part checksums (None when checksums are off).
    checksum_algorithm: str | None = None

    def __post_init__(self) -> None:
        problem = target_problem(self.bucket, self.key, self.upload_id)
        if problem is not None:
            raise RecordError(f"pending upload record: {problem}")
        where = repr(self.uri)  # repr: a key's control characters stay escaped
        if not isinstance(self.parts, tuple) or not all(
            isinstance(p, PartInfo) for p in self.parts
        ):
            raise RecordError(f"parts of {where} must be a tuple of PartInfo")
        if not 1 <= len(self.parts) <= MAX_PARTS:
            raise RecordError(f"{where} must have 1..{MAX_PARTS} parts, has {len(self.parts)}")
        numbers = [p.number for p in self.parts]
        if any(a >= b for a, b in itertools.pairwise(numbers)):
            raise RecordError(f"parts of {where} must have distinct ascending numbers")
        if not is_int(self.length) or self.length < 0:
            raise RecordError(f"length of {where} must be an integer >= 0, got {self.length!r}")
        total = sum(p.size for p in self.parts)
        if total != self.length:
            raise RecordError(
                f"parts of {where} add up to {total} bytes, record says {self.length}"
            )
        created = finite_number(self.created)
        if created is None:
            raise RecordError(f"created of {where} must be a finite number, got {self.created!r}")
        object.__setattr__(self, "created", created)
        alg = self.checksum_algorithm
        if alg is not None and (not isinstance(alg, str) or alg not in checksums.PARAM):
            raise RecordError(
                f"checksum_algorithm of {where} must be one of "
                f"{', '.join(sorted(checksums.PARAM))} or null, got {alg!r}"
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
        """A record from its JSON object, every field checked with no coercion (a null
        bucket is refused, not turned into "None"); :class:`RecordError` otherwise."""
        if not isinstance(d, Mapping):
            raise RecordError("pending upload record must be a JSON object")
        version = d.get("version")
        if not is_int(version) or version != PENDING_UPLOAD_VERSION:
            raise RecordError(
                f"pending upload record version {version!r} is not supported "
                f"(this zerorename reads version {PENDING_UPLOAD_VERSION})"
            )
        missing = [
            name
            for name in ("bucket", "key", "upload_id", "parts", "length", "created")
            if name not in d
        ]
        if missing:
            raise RecordError(f"pending upload record lacks the field(s) {', '.join(missing)}")
        raw_parts = d["parts"]
        if not isinstance(raw_parts, list | tuple):
            raise RecordError("pending upload record's parts must be a list")
        if len(raw_parts) > MAX_PARTS:
            raise RecordError(f"pending upload record has more than {MAX_PARTS} parts")
        return cls(
            bucket=d["bucket"],
            key=d["key"],
            upload_id=d["upload_id"],
            parts=tuple(PartInfo.from_dict(p) for p in raw_parts),
            length=d["length"],
            created=d["created"],
            checksum_algorithm=d.get("checksum_algorithm"),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> PendingUpload:
        """A record from JSON text or UTF-8 bytes: anything else (not UTF-8, not JSON,
        nested too deep, NaN/Infinity, numbers too large) is a :class:`RecordError`."""
        try:
            if isinstance(text, bytes | bytearray):
                text = bytes(text).decode("utf-8")
            data = json.loads(text, parse_constant=_no_constant)
        except UnicodeDecodeError as exc:
            raise RecordError(
                f"pending upload record is not UTF-8 (byte {exc.start}): give the record file "
                "as written by zerorename"
            ) from None
        except RecursionError:
            raise RecordError("pending upload record is nested too deeply to be a record") from None
        except ValueError as exc:  # JSONDecodeError, NaN/Infinity, ints too long to convert
            raise RecordError(f"pending upload record is not valid JSON: {exc}") from None
        return cls.from_dict(data)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a record may hold")


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


def is_completed_object(upload: PendingUpload, info: ObjectInfo | None) -> bool:
    """True only on proof that ``info`` is the object completing ``upload`` made: its size
    and its ETag equal to the multipart ETag computed from the upload's part ETags (a
    same-size single PUT, or another upload's object with other parts, never matches).
    Where that ETag cannot be computed (part ETags that are not MD5s: SSE-KMS, SSE-C)
    nothing is proven: False, and :func:`unproven_reason` says why."""
    if info is None or info.size != upload.length:
        return False
    want = multipart_etag(upload)
    return want is not None and info.etag.strip('"') == want


def unproven_reason(upload: PendingUpload, info: ObjectInfo | None) -> str:
    """Why ``info`` is not proven to be ``upload``'s completed object (for one-line errors)."""
    if info is None:
        return "no object is at the key"
    want = multipart_etag(upload)
    if want is None:
        return (
            "the upload's part ETags are not MD5s (an encrypted store: SSE-KMS or SSE-C), "
            "so its multipart ETag cannot be computed to prove the object ours"
        )
    if is_completed_object(upload, info):
        return "it is proven ours"
    return (
        f"the object there ({info.size} bytes, ETag {info.etag.strip(chr(34))!r}) is not "
        f"the one our parts make ({upload.length} bytes, ETag {want!r}): another writer's"
    )
