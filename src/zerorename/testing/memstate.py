"""What a :class:`~zerorename.testing.memstore.MemoryStore` holds: buckets of objects and
pending multipart uploads, shared by every handle opened on it, and S3's listing rule."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

from zerorename.engine import errors
from zerorename.engine.planning import bucket_problem
from zerorename.engine.results import ObjectInfo


@dataclass(frozen=True)
class StoredObject:
    data: bytes
    etag: str
    modified: float
    content_type: str | None = None


@dataclass(frozen=True)
class StoredPart:
    data: bytes
    etag: str
    checksum: str | None


@dataclass
class StoredUpload:
    bucket: str
    key: str
    upload_id: str
    initiated: float
    seq: int
    checksum_algorithm: str | None
    parts: dict[int, StoredPart] = field(default_factory=dict)


def quoted_md5(data: bytes) -> str:
    """An object's ETag as S3 gives it to a single PUT or part: its MD5, quoted."""
    return f'"{hashlib.md5(data).hexdigest()}"'


class MemoryState:
    """Buckets of objects and the pending multipart uploads: the store's content, shared
    by every handle (process) opened on it."""

    def __init__(self, *buckets: str) -> None:
        self.buckets: dict[str, dict[str, StoredObject]] = {}
        self.uploads: dict[str, StoredUpload] = {}
        self._seq = 0
        for name in buckets:
            self.create_bucket(name)

    def create_bucket(self, name: str) -> None:
        problem = bucket_problem(name)
        if problem is not None:
            raise errors.ConfigError(problem)
        self.buckets.setdefault(name, {})

    def copy(self) -> MemoryState:
        """An independent copy (to run two endings of one test from the same point). Objects
        and parts are immutable, so the copy shares them; buckets, uploads and each
        upload's parts are new containers."""
        new = MemoryState()
        new.buckets = {name: dict(objs) for name, objs in self.buckets.items()}
        new.uploads = {i: replace(u, parts=dict(u.parts)) for i, u in self.uploads.items()}
        new._seq = self._seq
        return new

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix`` with its bytes (no request: a test's view)."""
        objs = self.buckets[bucket]
        return {k: objs[k].data for k in sorted(objs) if k.startswith(prefix)}

    def etags(self, bucket: str, prefix: str = "") -> dict[str, str]:
        objs = self.buckets[bucket]
        return {k: objs[k].etag for k in sorted(objs) if k.startswith(prefix)}

    def pending(self, bucket: str, prefix: str = "") -> list[tuple[str, str]]:
        """(key, upload id) of every pending upload under ``prefix``, sorted."""
        return sorted(
            (u.key, u.upload_id)
            for u in self.uploads.values()
            if u.bucket == bucket and u.key.startswith(prefix)
        )


def list_page(
    bucket: str,
    objs: dict[str, StoredObject],
    prefix: str,
    delimiter: str | None,
    after: tuple[str, bool] | None,
    page_size: int,
) -> tuple[list[ObjectInfo], list[str], tuple[str, bool] | None]:
    """One ListObjectsV2 page: objects, common prefixes, and where the next page starts
    (the last key or common prefix it held; None when there is no next page)."""
    contents: list[ObjectInfo] = []
    prefixes: list[str] = []
    for k in sorted(objs):
        if not k.startswith(prefix):
            continue
        if after is not None:
            mark, is_prefix = after
            if k <= mark or (is_prefix and k.startswith(mark)):
                continue
        rest = k[len(prefix) :]
        cut = rest.find(delimiter) if delimiter else -1
        common = prefix + rest[: cut + len(delimiter or "")] if cut >= 0 else None
        if len(contents) + len(prefixes) == page_size:
            return contents, prefixes, after
        if common is not None:
            prefixes.append(common)
            after = (common, True)
            continue
        o = objs[k]
        contents.append(ObjectInfo(bucket, k, len(o.data), o.etag, o.modified))
        after = (k, False)
    return contents, prefixes, None


__all__ = ["MemoryState", "StoredObject", "StoredPart", "StoredUpload", "list_page", "quoted_md5"]
