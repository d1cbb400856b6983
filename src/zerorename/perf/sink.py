"""A do-nothing S3 server for benchmarks: valid S3 answers for almost no work per request.

Run it as its own process (``python -m zerorename.perf.sink``, or :class:`SinkServer`) so its
CPU is not counted against the client under test. Raw ``asyncio`` protocol on uvloop, path-style
addressing, no signature checks, state in memory. PutObject bodies up to 8 MiB (JSON: 256 MiB)
are kept, so the committers' records round-trip exactly; larger bodies and all part data are
counted and dropped, and GetObject of such an object streams zeros with
``x-zerorename-sink: discarded``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import collections
import hashlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request
from collections.abc import Callable, Sequence
from email.utils import formatdate
from http import HTTPStatus
from pathlib import Path
from typing import IO, Any, NoReturn, Self, cast
from urllib.parse import quote, unquote, unquote_plus
from xml.etree import ElementTree

from zerorename.testing.service import Service

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
MiB = 1024 * 1024
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
        "zeros",
    )

    def __init__(self, method: str, path: str, q: dict[str, str], h: _Headers, op: str) -> None:
        self.method, self.path, self.q, self.h, self.op = method, path, q, h, op
        self.bucket, _, self.key = path[1:].partition("/")
        self.body: bytes | None = None
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


class _Sink:
    """The state and the operations: each handler takes a request and returns the response."""

    def __init__(self, buckets: Sequence[str] = ()) -> None:
        self.buckets = {name: _Bucket(name) for name in buckets}
        self.counts: dict[str, int] = {}
        self.bytes_received = 0
        self.wire_bytes = 0
        self.connections = 0
        self.open_connections = 0
        self.rid = 0
        self.nonce = os.urandom(4).hex()
        self.uploads_created = 0
        self.completed: dict[tuple[str, str], tuple[str, str]] = {}
        self.completed_order: collections.deque[tuple[float, tuple[str, str]]] = collections.deque()
        self.ops: dict[str, Callable[[_Req], bytes]] = {
            name[3:]: getattr(self, name) for name in dir(self) if name.startswith("op_")
        }

    # -- plumbing ----------------------------------------------------------------------
    def handle(self, r: _Req) -> bytes:
        if not r.op.startswith("Sink"):
            self.counts[r.op] = self.counts.get(r.op, 0) + 1
            self.bytes_received += r.size
        try:
            fn = self.ops.get(r.op.lower())
            if fn is None:
                raise _S3Error(501, "NotImplemented", f"the sink does not implement {r.op}")
            return fn(r)
        except _S3Error as e:
            return self.error(r, e)
        except Exception:
            print(f"sink: {r.op} {r.path} failed:\n{traceback.format_exc()}", file=sys.stderr)
            return self.error(r, _S3Error(500, "InternalError", "the sink failed"))

    def resp(self, status: int, headers: bytes = b"", body: bytes = b"", length: int = -1) -> bytes:
        self.rid += 1
        return b"%sx-amz-request-id: %X\r\nContent-Length: %d\r\n%s\r\n%s" % (
            _STATUS[status],
            self.rid,
            len(body) if length < 0 else length,
            headers,
            body,
        )

    def xml(self, text: str, headers: bytes = b"", status: int = 200) -> bytes:
        return self.resp(status, _XML + headers, (_XML_HEAD + text).encode())

    def error(self, r: _Req, e: _S3Error) -> bytes:
        if r.method == "HEAD":
            return self.resp(e.status, b"Connection: close\r\n" if r.close else b"", length=0)
        text = (
            f"<Error><Code>{e.code}</Code><Message>{_esc(e.message)}</Message>"
            f"<Resource>{_esc(r.path)}</Resource><RequestId>{self.rid + 1:X}</RequestId></Error>"
        )
        return self.xml(text, status=e.status)

    def bucket(self, r: _Req) -> _Bucket:
        b = self.buckets.get(r.bucket)
        if b is None:
            raise _S3Error(404, "NoSuchBucket", "The specified bucket does not exist")
        return b

    def obj(self, b: _Bucket, key: str) -> _Obj:
        o = b.objects.get(key)
        if o is None:
            raise _S3Error(404, "NoSuchKey", "The specified key does not exist.")
        return o

    def upload(self, r: _Req) -> tuple[_Bucket, _Upload]:
        b = self.bucket(r)
        u = b.uploads.get(r.q.get("uploadId", ""))
        if u is None or u.key != r.key:
            raise _S3Error(404, "NoSuchUpload", "The specified upload does not exist.")
        return b, u

    def payload(self, r: _Req) -> tuple[bytes | None, int, dict[str, str]]:
        """(kept data or None, decoded size, trailers), undoing ``aws-chunked`` framing."""
        h = r.h
        aws = "aws-chunked" in h.get("content-encoding") or "x-amz-decoded-content-length" in h
        if not aws:
            return r.body, r.size, {}
        if r.body is None:
            return None, int(h.get("x-amz-decoded-content-length") or 0), {}
        try:
            data, trailers = _decode_aws_chunked(r.body)
        except ValueError as exc:
            raise _S3Error(400, "IncompleteBody", "malformed aws-chunked body") from exc
        return data, len(data), trailers

    @staticmethod
    def echo(h: _Headers, trailers: dict[str, str]) -> bytes:
        """The checksum headers (or aws-chunked trailers) the client sent, to send back."""
        out = b""
        if not trailers and "\r\nx-amz-checksum-" not in h.low:
            return out
        for name in _CHECKSUMS:
            value = h.get(name) or trailers.get(name)
            if value:
                out += b"%s: %s\r\n" % (name.encode(), value.encode("latin-1"))
        return out

    def source(self, r: _Req) -> _Obj:
        src = unquote(r.h.get("x-amz-copy-source")).partition("?versionId=")[0].lstrip("/")
        bucket, _, key = src.partition("/")
        b = self.buckets.get(bucket)
        if b is None:
            raise _S3Error(404, "NoSuchBucket", "The specified bucket does not exist")
        return self.obj(b, key)

    # -- service and buckets -------------------------------------------------------------
    def op_sinkstats(self, r: _Req) -> bytes:
        stats = {
            "requests": dict(self.counts),
            "bytes_received": self.bytes_received,
            "wire_bytes": self.wire_bytes,
            "connections": self.connections,
            "open_connections": self.open_connections,
            "buckets": len(self.buckets),
            "objects": sum(len(b.objects) for b in self.buckets.values()),
            "uploads": sum(len(b.uploads) for b in self.buckets.values()),
        }
        return self.resp(200, b"Content-Type: application/json\r\n", json.dumps(stats).encode())

    def op_sinkreset(self, r: _Req) -> bytes:
        self.counts.clear()
        self.bytes_received = self.wire_bytes = self.connections = 0
        return self.resp(204)

    def op_listbuckets(self, r: _Req) -> bytes:
        items = "".join(
            f"<Bucket><Name>{b.name}</Name><CreationDate>{_iso(b.created)}</CreationDate></Bucket>"
            for b in sorted(self.buckets.values(), key=lambda b: b.name)
        )
        return self.xml(
            f'<ListAllMyBucketsResult xmlns="{NS}">{_OWNER}<Buckets>{items}</Buckets>'
            "</ListAllMyBucketsResult>"
        )

    def op_createbucket(self, r: _Req) -> bytes:
        # an existing bucket is fine (us-east-1 behaviour): benchmarks re-create freely
        self.buckets.setdefault(r.bucket, _Bucket(r.bucket))
        return self.resp(200, b"Location: /%s\r\n" % r.bucket.encode())

    def op_headbucket(self, r: _Req) -> bytes:
        self.bucket(r)
        return self.resp(200, b"x-amz-bucket-region: us-east-1\r\n")

    def op_deletebucket(self, r: _Req) -> bytes:
        b = self.bucket(r)
        if b.objects or b.uploads:
            raise _S3Error(409, "BucketNotEmpty", "The bucket you tried to delete is not empty")
        del self.buckets[r.bucket]
        return self.resp(204)

    def op_getbucketlocation(self, r: _Req) -> bytes:
        self.bucket(r)
        return self.xml(f'<LocationConstraint xmlns="{NS}"/>')

    # -- listings --------------------------------------------------------------------------
    @staticmethod
    def walk(
        b: _Bucket, prefix: str, delimiter: str, after: str, limit: int
    ) -> tuple[list[tuple[str, _Obj]], list[str], bool, str]:
        """(contents, common prefixes, truncated, last item) of one listing page."""
        if limit <= 0:
            return [], [], False, ""
        keys = b.keys()
        i = bisect.bisect_left(keys, prefix)
        if after:
            i = max(i, bisect.bisect_right(keys, after))
        contents: list[tuple[str, _Obj]] = []
        prefixes: list[str] = []
        last = ""
        while i < len(keys):
            k = keys[i]
            if not k.startswith(prefix):
                break
            item = k
            j = k.find(delimiter, len(prefix)) if delimiter else -1
            if j >= 0:
                item = k[: j + len(delimiter)]
                # all keys under this common prefix sort together: jump past them
                i = bisect.bisect_left(keys, item[:-1] + chr(ord(item[-1]) + 1), i)
                if after and item <= after:
                    continue
            if len(contents) + len(prefixes) >= limit:
                return contents, prefixes, True, last
            if j >= 0:
                prefixes.append(item)
            else:
                contents.append((k, b.objects[k]))
                i += 1
            last = item
        return contents, prefixes, False, last

    def listing(self, r: _Req, v2: bool) -> bytes:
        b, q = self.bucket(r), r.q
        prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
        try:
            limit = min(int(q.get("max-keys", "1000")), 1000)
            token = q.get("continuation-token")
            after = base64.urlsafe_b64decode(token).decode() if token else None
        except ValueError as exc:
            raise _S3Error(400, "InvalidArgument", "bad max-keys or continuation-token") from exc
        if after is None:
            after = q.get("start-after", "") if v2 else q.get("marker", "")
        url = q.get("encoding-type") == "url"

        def enc(s: str) -> str:
            return quote(s, safe="/") if url else _esc(s)

        contents, prefixes, truncated, last = self.walk(b, prefix, delimiter, after, limit)
        out = [
            f'<ListBucketResult xmlns="{NS}"><Name>{b.name}</Name><Prefix>{enc(prefix)}</Prefix>'
        ]
        if delimiter:
            out.append(f"<Delimiter>{enc(delimiter)}</Delimiter>")
        out.append(f"<MaxKeys>{limit}</MaxKeys><IsTruncated>{str(truncated).lower()}</IsTruncated>")
        if url:
            out.append("<EncodingType>url</EncodingType>")
        if v2:
            out.append(f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount>")
            if token:
                out.append(f"<ContinuationToken>{_esc(token)}</ContinuationToken>")
            if truncated:
                nxt = base64.urlsafe_b64encode(last.encode()).decode()
                out.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>")
            if "start-after" in q:
                out.append(f"<StartAfter>{enc(q['start-after'])}</StartAfter>")
        else:
            out.append(f"<Marker>{enc(q.get('marker', ''))}</Marker>")
            if truncated:
                out.append(f"<NextMarker>{enc(last)}</NextMarker>")
        for k, o in contents:
            out.append(
                f"<Contents><Key>{enc(k)}</Key><LastModified>{_iso(o.mtime)}</LastModified>"
                f"<ETag>&quot;{o.etag}&quot;</ETag><Size>{o.size}</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        out.extend(f"<CommonPrefixes><Prefix>{enc(p)}</Prefix></CommonPrefixes>" for p in prefixes)
        out.append("</ListBucketResult>")
        return self.xml("".join(out))

    def op_listobjects(self, r: _Req) -> bytes:
        return self.listing(r, v2=False)

    def op_listobjectsv2(self, r: _Req) -> bytes:
        return self.listing(r, v2=True)

    def op_listmultipartuploads(self, r: _Req) -> bytes:
        b, q = self.bucket(r), r.q
        prefix, key_marker, id_marker = (
            q.get(n, "") for n in ("prefix", "key-marker", "upload-id-marker")
        )
        limit = min(int(q.get("max-uploads", "1000")), 1000)
        items = sorted(
            (u.key, u.upload_id, u)
            for u in b.uploads.values()
            if u.key.startswith(prefix)
            and (
                not key_marker
                or u.key > key_marker
                or (bool(id_marker) and u.key == key_marker and u.upload_id > id_marker)
            )
        )
        page, truncated = items[:limit], len(items) > limit
        url = q.get("encoding-type") == "url"

        def enc(s: str) -> str:
            return quote(s, safe="/") if url else _esc(s)

        out = [
            f'<ListMultipartUploadsResult xmlns="{NS}"><Bucket>{b.name}</Bucket>'
            f"<KeyMarker>{enc(key_marker)}</KeyMarker><UploadIdMarker>{id_marker}</UploadIdMarker>"
            f"<Prefix>{enc(prefix)}</Prefix><MaxUploads>{limit}</MaxUploads>"
            f"<IsTruncated>{str(truncated).lower()}</IsTruncated>"
        ]
        if url:
            out.append("<EncodingType>url</EncodingType>")
        if page:
            out.append(
                f"<NextKeyMarker>{enc(page[-1][0])}</NextKeyMarker>"
                f"<NextUploadIdMarker>{page[-1][1]}</NextUploadIdMarker>"
            )
        for key, uid, u in page:
            out.append(
                f"<Upload><Key>{enc(key)}</Key><UploadId>{uid}</UploadId>"
                f"<Initiator><ID>sink</ID><DisplayName>sink</DisplayName></Initiator>{_OWNER}"
                f"<StorageClass>STANDARD</StorageClass><Initiated>{_iso(u.initiated)}</Initiated>"
                "</Upload>"
            )
        out.append("</ListMultipartUploadsResult>")
        return self.xml("".join(out))

    def op_listparts(self, r: _Req) -> bytes:
        b, u = self.upload(r)
        marker = int(r.q.get("part-number-marker") or 0)
        limit = min(int(r.q.get("max-parts", "1000")), 1000)
        numbers = sorted(n for n in u.parts if n > marker)
        page, truncated = numbers[:limit], len(numbers) > limit
        out = [
            f'<ListPartsResult xmlns="{NS}"><Bucket>{b.name}</Bucket><Key>{_esc(u.key)}</Key>'
            f"<UploadId>{u.upload_id}</UploadId><PartNumberMarker>{marker}</PartNumberMarker>"
            f"<NextPartNumberMarker>{page[-1] if page else marker}</NextPartNumberMarker>"
            f"<MaxParts>{limit}</MaxParts><IsTruncated>{str(truncated).lower()}</IsTruncated>"
            f"<Initiator><ID>sink</ID><DisplayName>sink</DisplayName></Initiator>{_OWNER}"
            "<StorageClass>STANDARD</StorageClass>"
        ]
        for n in page:
            etag, size, ts = u.parts[n]
            out.append(
                f"<Part><PartNumber>{n}</PartNumber><LastModified>{_iso(ts)}</LastModified>"
                f"<ETag>&quot;{etag}&quot;</ETag><Size>{size}</Size></Part>"
            )
        out.append("</ListPartsResult>")
        return self.xml("".join(out))

    # -- objects ---------------------------------------------------------------------------
    def op_putobject(self, r: _Req) -> bytes:
        b = self.bucket(r)
        if r.h.get("if-none-match") == "*" and r.key in b.objects:
            raise _precondition()
        data, size, trailers = self.payload(r)
        if data is not None and size <= _MD5_MAX:
            etag = _md5(data)
        else:
            etag = _md5(f"{r.bucket}/{r.key}:{size}:{time.time()}")
        b.put(r.key, _Obj(size, etag, data, r.h.get("content-type", "binary/octet-stream")))
        return self.resp(200, b'ETag: "%s"\r\n%s' % (etag.encode(), self.echo(r.h, trailers)))

    def op_copyobject(self, r: _Req) -> bytes:
        b = self.bucket(r)
        src = self.source(r)
        if r.h.get("if-none-match") == "*" and r.key in b.objects:
            raise _precondition()
        etag = _md5(src.data) if src.data is not None else _md5(f"copy:{src.etag}:{time.time()}")
        obj = _Obj(src.size, etag, src.data, src.ctype)
        b.put(r.key, obj)
        return self.xml(
            f'<CopyObjectResult xmlns="{NS}"><LastModified>{_iso(obj.mtime)}</LastModified>'
            f"<ETag>&quot;{etag}&quot;</ETag></CopyObjectResult>"
        )

    def op_getobject(self, r: _Req) -> bytes:
        o = self.obj(self.bucket(r), r.key)
        h = r.h
        if_match = h.get("if-match")
        if if_match and if_match != "*" and if_match.strip('"') != o.etag:
            raise _precondition()
        if_none = h.get("if-none-match")
        headers = (
            b'ETag: "%s"\r\nLast-Modified: %s\r\nContent-Type: %s\r\nAccept-Ranges: bytes\r\n'
            % (
                o.etag.encode(),
                formatdate(o.mtime, usegmt=True).encode(),
                o.ctype.encode("latin-1"),
            )
        )
        if if_none and (if_none == "*" or if_none.strip('"') == o.etag):
            return self.resp(304, headers, length=0)
        start, end, status = 0, o.size - 1, 200
        rng = h.get("range")
        if rng.startswith("bytes=") and "," not in rng:
            first, _, second = rng[6:].partition("-")
            try:
                if first:
                    start, end = int(first), min(int(second) if second else end, end)
                else:
                    start = max(0, o.size - int(second))
            except ValueError as exc:
                raise _S3Error(400, "InvalidArgument", "bad Range header") from exc
            if start >= o.size or start > end or (not first and second == "0"):
                raise _S3Error(416, "InvalidRange", "The requested range is not satisfiable")
            status = 206
            headers += b"Content-Range: bytes %d-%d/%d\r\n" % (start, end, o.size)
        length = max(0, end - start + 1)
        if o.data is None:
            headers += b"x-zerorename-sink: discarded\r\n"
        if r.close:
            headers += b"Connection: close\r\n"
        if r.method == "HEAD":
            return self.resp(status, headers, length=length)
        if o.data is not None:
            body = o.data if status == 200 else o.data[start : end + 1]
            return self.resp(status, headers, body)
        r.zeros = length  # the connection streams them after the head
        return self.resp(status, headers, length=length)

    op_headobject = op_getobject

    def op_deleteobject(self, r: _Req) -> bytes:
        self.bucket(r).delete(r.key)
        return self.resp(204)

    def op_deleteobjects(self, r: _Req) -> bytes:
        b = self.bucket(r)
        try:
            root = ElementTree.fromstring(r.body or b"")
        except ElementTree.ParseError as exc:
            raise _S3Error(400, "MalformedXML", "The XML you provided was not well-formed") from exc
        quiet = False
        keys: list[str] = []
        for el in root:
            tag = el.tag.rpartition("}")[2]
            if tag == "Quiet":
                quiet = (el.text or "").strip().lower() == "true"
            elif tag == "Object":
                for child in el:
                    if child.tag.rpartition("}")[2] == "Key":
                        keys.append(child.text or "")
        for k in keys:
            b.delete(k)
        deleted = "" if quiet else "".join(f"<Deleted><Key>{_esc(k)}</Key></Deleted>" for k in keys)
        return self.xml(f'<DeleteResult xmlns="{NS}">{deleted}</DeleteResult>')

    # -- multipart -------------------------------------------------------------------------
    def op_createmultipartupload(self, r: _Req) -> bytes:
        b = self.bucket(r)
        self.uploads_created += 1
        uid = f"{self.nonce}{self.uploads_created:016x}"  # sorts by creation, unique per run
        b.uploads[uid] = _Upload(r.key, uid, r.h.get("content-type", "binary/octet-stream"))
        alg = r.h.get("x-amz-checksum-algorithm")
        extra = b"x-amz-checksum-algorithm: %s\r\n" % alg.encode() if alg else b""
        return self.xml(
            f'<InitiateMultipartUploadResult xmlns="{NS}"><Bucket>{b.name}</Bucket>'
            f"<Key>{_esc(r.key)}</Key><UploadId>{uid}</UploadId></InitiateMultipartUploadResult>",
            extra,
        )

    @staticmethod
    def part_number(r: _Req) -> int:
        try:
            n = int(r.q.get("partNumber", ""))
        except ValueError:
            n = 0
        if not 1 <= n <= 10000:
            raise _S3Error(400, "InvalidArgument", "partNumber must be between 1 and 10000")
        return n

    def op_uploadpart(self, r: _Req) -> bytes:
        _, u = self.upload(r)
        n = self.part_number(r)
        _, size, trailers = self.payload(r)
        etag = _md5(f"{u.upload_id}:{n}:{size}")  # cheap and deterministic: no body hashing
        u.parts[n] = (etag, size, time.time())
        return self.resp(200, b'ETag: "%s"\r\n%s' % (etag.encode(), self.echo(r.h, trailers)))

    def op_uploadpartcopy(self, r: _Req) -> bytes:
        _, u = self.upload(r)
        n = self.part_number(r)
        src = self.source(r)
        size = src.size
        rng = r.h.get("x-amz-copy-source-range")
        if rng.startswith("bytes="):
            first, _, second = rng[6:].partition("-")
            start, end = int(first), int(second)
            if start > end or end >= src.size:
                raise _S3Error(416, "InvalidRange", "The requested range is not satisfiable")
            size = end - start + 1
        etag = _md5(f"{u.upload_id}:{n}:{size}")
        ts = time.time()
        u.parts[n] = (etag, size, ts)
        return self.xml(
            f'<CopyPartResult xmlns="{NS}"><LastModified>{_iso(ts)}</LastModified>'
            f"<ETag>&quot;{etag}&quot;</ETag></CopyPartResult>"
        )

    def completed_result(self, b: _Bucket, key: str, etag: str) -> bytes:
        k = _esc(key)
        return self.xml(
            f'<CompleteMultipartUploadResult xmlns="{NS}"><Location>/{b.name}/{k}</Location>'
            f"<Bucket>{b.name}</Bucket><Key>{k}</Key><ETag>&quot;{etag}&quot;</ETag>"
            "</CompleteMultipartUploadResult>"
        )

    def op_completemultipartupload(self, r: _Req) -> bytes:
        b = self.bucket(r)
        uid = r.q.get("uploadId", "")
        u = b.uploads.get(uid)
        if u is None or u.key != r.key:
            done = self.completed.get((b.name, uid))
            if done is not None and done[0] == r.key:  # a retried complete, as S3 answers it
                return self.completed_result(b, r.key, done[1])
            raise _S3Error(404, "NoSuchUpload", "The specified upload does not exist.")
        if r.h.get("if-none-match") == "*" and r.key in b.objects:
            raise _precondition()
        try:
            parts = _parse_parts(r.body)
        except (ValueError, ElementTree.ParseError) as exc:
            raise _S3Error(400, "MalformedXML", "The XML you provided was not well-formed") from exc
        if not parts:
            raise _S3Error(400, "MalformedXML", "You must specify at least one part")
        digests = bytearray()
        total = previous = 0
        last = len(parts) - 1
        for i, (n, etag) in enumerate(parts):
            if n <= previous:
                raise _S3Error(400, "InvalidPartOrder", "The parts were not in ascending order.")
            previous = n
            part = u.parts.get(n)
            if part is None or part[0] != etag:
                raise _S3Error(400, "InvalidPart", f"part {n} was not found or its ETag differs")
            if part[1] < _MIN_PART and i < last:
                raise _S3Error(400, "EntityTooSmall", f"part {n} is smaller than 5 MiB")
            digests += bytes.fromhex(etag)
            total += part[1]
        etag = f"{hashlib.md5(digests).hexdigest()}-{len(parts)}"
        del b.uploads[uid]
        obj = _Obj(total, etag, None, u.ctype)
        b.put(r.key, obj)
        now = obj.mtime
        self.completed[(b.name, uid)] = (r.key, etag)
        order = self.completed_order
        order.append((now, (b.name, uid)))
        while order[0][0] < now - _COMPLETED_TTL:
            self.completed.pop(order.popleft()[1], None)
        return self.completed_result(b, r.key, etag)

    def op_abortmultipartupload(self, r: _Req) -> bytes:
        b, u = self.upload(r)
        del b.uploads[u.upload_id]
        return self.resp(204)


# connection states
_HEAD, _BODY, _CSIZE, _CDATA, _CEND, _CTRAIL, _STREAM, _DEAD = range(8)


class _Conn(asyncio.BufferedProtocol):
    """One HTTP/1.1 connection: reads into the sink's shared buffer (handling is synchronous,
    so one buffer serves every connection); bodies are kept or only counted."""

    def __init__(self, sink: _Sink, rbuf: memoryview) -> None:
        self.sink, self.rbuf = sink, rbuf
        self.t: asyncio.Transport | None = None
        self.state = _HEAD
        self.head = bytearray()
        self.line = bytearray()
        self.req: _Req | None = None
        self.left = 0
        self.got = 0
        self.keep: bytearray | None = None
        self.keep_max = 0
        self.zeros = 0
        self.paused = False
        self.stash = b""
        self.close_after = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.t = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.sink.connections += 1
        self.sink.open_connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.sink.open_connections -= 1
        self.state, self.zeros = _DEAD, 0

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.rbuf

    def buffer_updated(self, nbytes: int) -> None:
        self.sink.wire_bytes += nbytes
        # small reads (whole requests, usually) as bytes: searched and sliced in place
        self.feed(self.rbuf[:nbytes] if nbytes > 65536 else self.rbuf[:nbytes].tobytes())

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.state == _STREAM:
            self.pump()

    def fail(self) -> None:
        assert self.t is not None
        self.t.write(_BAD)
        self.t.close()
        self.state = _DEAD

    def feed(self, view: memoryview | bytes) -> None:
        pos, n = 0, len(view)
        while pos < n:
            st = self.state
            if st == _HEAD and not self.head and isinstance(view, bytes):
                end = view.find(b"\r\n\r\n", pos)
                if end >= 0:  # a whole head in this read: no copy into self.head
                    text, pos = view[pos:end], end + 4
                    if text.strip():
                        self.on_head(text.lstrip())
                    continue
            if st in (_BODY, _CDATA):
                k = min(n - pos, self.left)
                if self.keep is not None:
                    if len(self.keep) + k > self.keep_max:
                        self.keep = None  # too large to keep after all: only count it
                    else:
                        self.keep += view[pos : pos + k]
                self.got += k
                self.left -= k
                pos += k
                if not self.left:
                    if st == _BODY:
                        self.finish()
                    else:
                        self.state = _CEND
            elif st != _STREAM and st != _DEAD:  # a head, or a line of chunked framing
                buf = self.head if st == _HEAD else self.line
                prev = len(buf)
                take = view[pos : pos + 65536]
                buf += take
                end = buf.find(b"\r\n\r\n" if st == _HEAD else b"\r\n", max(0, prev - 3))
                if end < 0:
                    pos += len(take)
                    if len(buf) > _MAX_HEAD:
                        self.fail()
                    continue
                pos += end + (4 if st == _HEAD else 2) - prev
                text = bytes(buf[:end])
                buf.clear()
                if st == _HEAD:
                    if text.strip():  # (stray empty lines between requests are allowed)
                        self.on_head(text.lstrip())
                else:
                    self.on_chunk_line(st, text)
            elif st == _STREAM:
                self.stash += view[pos:]
                return
            else:
                return

    def on_chunk_line(self, st: int, text: bytes) -> None:
        if st == _CSIZE:
            try:
                self.left = int(text.split(b";", 1)[0], 16)
            except ValueError:
                self.fail()
                return
            self.state = _CDATA if self.left else _CTRAIL
        elif st == _CEND:
            self.state = _CSIZE
        elif not text:  # the empty line after the trailers
            self.finish()

    def on_head(self, head: bytes) -> None:
        try:
            text = head.decode("latin-1")
            method, target, _ = text.partition("\r\n")[0].split(" ")
            h = _Headers(text)
            te = h.get("transfer-encoding").lower() if "\r\ntransfer-encoding:" in h.low else ""
            length = 0 if "chunked" in te else int(h.get("content-length") or 0)
        except ValueError:
            self.fail()
            return
        path, _, qs = target.partition("?")
        q: dict[str, str] = {}
        if qs:
            for item in qs.split("&"):
                name, _, value = item.partition("=")
                q[name] = unquote_plus(value) if "%" in value or "+" in value else value
        if "%" in path:
            path = unquote(path)
        if ".localhost" in text:  # virtual-host style: bucket.localhost[:port]
            host = h.get("host")
            host = host.rpartition(":")[0] or host
            if host.endswith(".localhost"):
                path = f"/{host[:-10]}{path}"
        if path.startswith("/__sink/"):
            op = "SinkStats" if path == "/__sink/stats" else "SinkReset"
        else:
            bucket, _, key = path[1:].partition("/")
            op = _classify(method, bucket, key, q, h)
        self.req = _Req(method, path, q, h, op)
        keep, decoded = _OTHER_MAX, length
        if op == "PutObject":  # JSON (the committers' records) is kept even when large
            keep = _RECORD_MAX if "json" in h.get("content-type") else KEEP_MAX
            if "\r\nx-amz-decoded-content-length:" in h.low:
                value = h.get("x-amz-decoded-content-length")
                decoded = int(value) if value.isdigit() else 0
        if op == "UploadPart" or decoded > keep:
            self.keep = None
        else:
            self.keep, self.keep_max = bytearray(), max(length, keep + MiB)
        self.got = 0
        assert self.t is not None
        if length or "chunked" in te:
            if h.get("expect").lower() == "100-continue":
                self.t.write(_CONTINUE)
            self.state, self.left = (_CSIZE, 0) if "chunked" in te else (_BODY, length)
        else:
            self.finish()

    def finish(self) -> None:
        r, t = self.req, self.t
        assert r is not None and t is not None
        r.size = self.got
        r.body = bytes(self.keep) if self.keep is not None else None
        self.keep, self.req, self.state = None, None, _HEAD
        t.write(self.sink.handle(r))
        if r.zeros:
            self.zeros, self.state = r.zeros, _STREAM
            t.pause_reading()
            self.close_after = r.close
            self.pump()
        elif r.close:
            t.close()
            self.state = _DEAD

    def pump(self) -> None:
        """Stream the zeros of a discarded object, as fast as the socket takes them."""
        t = self.t
        assert t is not None
        while self.zeros and not self.paused:
            k = min(self.zeros, len(_ZEROS))
            t.write(_ZEROS[:k])
            self.zeros -= k
        if self.zeros or self.state != _STREAM:
            return
        self.state = _HEAD
        if self.close_after:
            t.close()
            self.state = _DEAD
            return
        t.resume_reading()
        stash, self.stash = self.stash, b""
        if stash:
            self.feed(stash)


# -- process entry point ----------------------------------------------------------------------
async def serve(host: str, port: int, buckets: Sequence[str]) -> None:
    """Serve until SIGTERM/SIGINT or until the parent process dies; prints SINK READY <port>."""
    loop = asyncio.get_running_loop()
    sink = _Sink(buckets)
    rbuf = memoryview(bytearray(MiB))
    server = await loop.create_server(
        lambda: _Conn(sink, rbuf), host, port, backlog=4096, reuse_address=True
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()

    def watchdog() -> None:
        if os.getppid() != parent:
            stop.set()
        else:
            loop.call_later(1.0, watchdog)

    loop.call_later(1.0, watchdog)
    print(f"SINK READY {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zerorename.perf.sink", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bucket", action="append", default=[], help="pre-create (repeatable)")
    args = parser.parse_args(argv)
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(serve(args.host, args.port, args.bucket))
    return 0


class SinkServer(Service):
    """Runs the sink as a child process: ``with SinkServer() as s: s.endpoint_url``."""

    def __init__(self, host: str = "127.0.0.1", buckets: Sequence[str] = ("bench",)) -> None:
        self.host = host
        self.buckets = tuple(buckets)
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("the sink is not running")
        return self._proc.pid

    def start(self, timeout: float = 30.0) -> Self:
        """Spawn the child and wait for its READY line (RuntimeError with its stderr if not)."""
        if self._proc is not None:
            return self
        cmd = [sys.executable, "-m", "zerorename.perf.sink", "--host", self.host, "--port", "0"]
        for b in self.buckets:
            cmd += ["--bucket", b]
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])  # importable even when not installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, env=env
        )
        self._proc = proc
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout
        line = b""
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self._fail(f"no READY line within {timeout:g} s")
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    self._fail(f"exited with code {proc.wait()} before it was ready")
                line += chunk
        words = line.split()
        if words[:2] != [b"SINK", b"READY"]:
            self._fail(f"unexpected first line {line!r}")
        self.port = int(words[2])
        return self

    def _fail(self, why: str) -> NoReturn:
        self._terminate()
        err = b""
        if self._stderr is not None:
            self._stderr.seek(0)
            err = self._stderr.read()
        self.stop()
        raise RuntimeError(f"the sink {why}; stderr:\n{err.decode(errors='replace')[-4000:]}")

    def stop(self) -> None:
        """Terminate the child (kill after 5 s); safe to call twice."""
        self._terminate()
        err, self._stderr = self._stderr, None
        if err is not None:
            err.close()

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def _call(self, method: str, path: str) -> bytes:
        req = urllib.request.Request(self.endpoint_url + path, method=method)
        with urllib.request.urlopen(req, timeout=30) as resp:
            body: bytes = resp.read()
            return body

    def stats(self) -> dict[str, Any]:
        """{"requests": {op: count}, "bytes_received": body bytes, "connections": accepted,...}"""
        result: dict[str, Any] = json.loads(self._call("GET", "/__sink/stats"))
        return result

    def reset_stats(self) -> None:
        """Zero the request, byte and connection counters (objects are kept)."""
        self._call("POST", "/__sink/reset")


if __name__ == "__main__":
    sys.exit(main())
