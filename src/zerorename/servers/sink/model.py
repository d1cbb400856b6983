"""The sink's S3 model: objects, uploads, buckets, parsed requests and their operation
names, error type, and the few body formats it decodes (aws-chunked, CompleteMultipartUpload)."""

from __future__ import annotations

import hashlib
import time
from http import HTTPStatus
from xml.etree import ElementTree

from zerorename.units import MiB

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
KEEP_MAX = 8 * MiB  # PutObject bodies up to this size are kept
_RECORD_MAX = 256 * MiB  # ... and up to this size when the Content-Type is JSON
_OTHER_MAX = 64 * MiB  # bodies of other requests (XML) kept up to this size
_MIN_PART = 5 * MiB  # every part but the last of a complete must be this large
_MD5_MAX = MiB  # kept bodies up to this size get a real MD5 ETag; larger a derived one
_COMPLETED_TTL = 600.0  # a retried complete of a finished upload succeeds for this long
_MAX_HEAD = 64 * 1024
_ZEROS = memoryview(bytes(MiB))
_STATUS = {s.value: b"HTTP/1.1 %d %s\r\n" % (s.value, s.phrase.encode()) for s in HTTPStatus}
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_XML = b"Content-Type: application/xml\r\n"
_XML_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
_OWNER = "<Owner><ID>sink</ID><DisplayName>sink</DisplayName></Owner>"
_CHECKSUMS = (
    "x-amz-checksum-crc32c",
    "x-amz-checksum-crc32",
    "x-amz-checksum-sha256",
    "x-amz-checksum-sha1",
    "x-amz-checksum-crc64nvme",
)
_SUBRESOURCES = (  # query keys of operations the sink does not implement
    "acl policy tagging lifecycle cors encryption versions versioning website logging "
    "notification replication object-lock ownershipControls publicAccessBlock accelerate "
    "requestPayment retention legal-hold torrent restore select attributes"
)
_UNSUPPORTED = frozenset(_SUBRESOURCES.split())


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"


def _md5(data: bytes | str) -> str:
    return hashlib.md5(data.encode() if isinstance(data, str) else data).hexdigest()


class _Headers:
    """Request headers looked up lazily in the raw head (most are never read: parsing them
    all into a dict costs more than the few lookups a request makes)."""

    __slots__ = ("low", "raw")

    def __init__(self, raw: str) -> None:
        self.raw, self.low = raw, raw.lower()

    def get(self, name: str, default: str = "") -> str:
        """The value of header ``name`` (lower case), or ``default``."""
        i = self.low.find(f"\r\n{name}:")
        if i < 0:
            return default
        i += len(name) + 3
        j = self.raw.find("\r\n", i)
        return self.raw[i : j if j >= 0 else None].strip()

    def __contains__(self, name: str) -> bool:
        return f"\r\n{name}:" in self.low


class _S3Error(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _precondition() -> _S3Error:
    return _S3Error(
        412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold"
    )


class _Obj:
    __slots__ = ("ctype", "data", "etag", "mtime", "size")

    def __init__(self, size: int, etag: str, data: bytes | None, ctype: str) -> None:
        self.size, self.etag, self.data, self.ctype = size, etag, data, ctype
        self.mtime = time.time()


class _Upload:
    __slots__ = ("ctype", "initiated", "key", "parts", "upload_id")

    def __init__(self, key: str, upload_id: str, ctype: str) -> None:
        self.key, self.upload_id, self.ctype = key, upload_id, ctype
        self.initiated = time.time()
        self.parts: dict[int, tuple[str, int, float]] = {}  # number -> (etag, size, time)


class _Bucket:
    __slots__ = ("_sorted", "created", "name", "objects", "uploads")

    def __init__(self, name: str) -> None:
        self.name, self.created = name, time.time()
        self.objects: dict[str, _Obj] = {}
        self.uploads: dict[str, _Upload] = {}
        self._sorted: list[str] | None = None

    def put(self, key: str, obj: _Obj) -> None:
        if key not in self.objects:
            self._sorted = None
        self.objects[key] = obj

    def delete(self, key: str) -> bool:
        if self.objects.pop(key, None) is None:
            return False
        self._sorted = None
        return True

    def keys(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted


class _Req:
    """One parsed request; ``body`` is None when it was discarded (only counted)."""

    __slots__ = (
        "body",
        "bucket",
        "close",
        "h",
        "key",
        "method",
        "op",
        "path",
        "q",
        "size",
        "tail",
        "zeros",
    )

    def __init__(self, method: str, path: str, q: dict[str, str], h: _Headers, op: str) -> None:
        self.method, self.path, self.q, self.h, self.op = method, path, q, h, op
        self.bucket, _, self.key = path[1:].partition("/")
        self.body: bytes | None = None
        #: the last bytes of a discarded aws-chunked body: its trailers are in them
        self.tail = b""
        self.size = 0
        self.zeros = 0  # set by GetObject of a discarded object: stream this many zeros
        self.close = "\r\nconnection:" in h.low and h.get("connection").lower() == "close"


def _classify(method: str, bucket: str, key: str, q: dict[str, str], h: _Headers) -> str:
    """The S3 operation name (same names as the fault proxy's classifier)."""
    if not bucket:
        return "ListBuckets" if method == "GET" else "Unsupported"
    if not _UNSUPPORTED.isdisjoint(q):
        return "Unsupported"
    if not key:
        if method == "GET":
            if "uploads" in q:
                return "ListMultipartUploads"
            if "location" in q:
                return "GetBucketLocation"
            return "ListObjectsV2" if "list-type" in q else "ListObjects"
        if method == "POST":
            return "DeleteObjects" if "delete" in q else "Unsupported"
        ops = {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}
        return ops.get(method, "Unsupported")
    if method == "PUT":
        copy = "x-amz-copy-source" in h
        if "uploadId" in q:
            return "UploadPartCopy" if copy else "UploadPart"
        return "CopyObject" if copy else "PutObject"
    if method == "POST":
        if "uploadId" in q:
            return "CompleteMultipartUpload"
        return "CreateMultipartUpload" if "uploads" in q else "Unsupported"
    if method == "GET":
        return "ListParts" if "uploadId" in q else "GetObject"
    if method == "DELETE":
        return "AbortMultipartUpload" if "uploadId" in q else "DeleteObject"
    return "HeadObject" if method == "HEAD" else "Unsupported"


def _decode_aws_chunked(raw: bytes) -> tuple[bytes, dict[str, str]]:
    """The payload and trailers of an ``aws-chunked`` body (ValueError when malformed)."""
    out: list[bytes] = []
    pos = 0
    while True:
        eol = raw.index(b"\r\n", pos)
        size = int(raw[pos:eol].split(b";", 1)[0], 16)
        pos = eol + 2
        if size == 0:
            break
        out.append(raw[pos : pos + size])
        if raw[pos + size : pos + size + 2] != b"\r\n":
            raise ValueError("bad aws-chunked framing")
        pos += size + 2
    trailers: dict[str, str] = {}
    for line in raw[pos:].split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep:
            trailers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return b"".join(out), trailers


#: bytes kept from the end of a discarded aws-chunked body (the final chunk and trailers)
TAIL_MAX = 512


def _tail_trailers(tail: bytes) -> dict[str, str]:
    """The trailers of an ``aws-chunked`` body from its last bytes (the data before them
    discarded): what follows the last final-chunk line. Empty when none is found."""
    if not tail.endswith(b"\r\n"):
        return {}
    end = max(tail.rfind(b"\r\n0\r\n"), tail.rfind(b"\r\n0;"))
    if end < 0:
        return {}
    eol = tail.find(b"\r\n", end + 2)
    trailers: dict[str, str] = {}
    for line in tail[eol + 2 :].split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep:
            trailers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return trailers


def _parse_parts(body: bytes | None) -> list[tuple[int, str]]:
    """(PartNumber, ETag without quotes) of a CompleteMultipartUpload body, cheaply."""
    if not body:
        raise ValueError("empty body")
    text = body.decode()
    segments = text.split("<Part>")[1:]
    if not segments:  # prefixed or unusual XML: the slow way
        root = ElementTree.fromstring(body)
        segments = [
            "".join(
                f"<{c.tag.rpartition('}')[2]}>{c.text or ''}</{c.tag.rpartition('}')[2]}>"
                for c in p
            )
            for p in root
            if p.tag.endswith("Part")
        ]
    parts = []
    for seg in segments:
        number = seg.partition("<PartNumber>")[2].partition("</PartNumber>")[0]
        etag = seg.partition("<ETag>")[2].partition("</ETag>")[0]
        parts.append((int(number), etag.replace("&quot;", "").replace('"', "").strip().lower()))
    return parts
