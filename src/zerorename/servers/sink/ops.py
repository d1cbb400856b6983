"""The sink's state and its S3 operations: each handler takes a parsed request and returns
the whole response as bytes (synchronously: the protocol calls it once a body is in)."""

from __future__ import annotations

import base64
import bisect
import collections
import hashlib
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from email.utils import formatdate
from urllib.parse import quote, unquote
from xml.etree import ElementTree

from zerorename.servers.sink.model import (
    _CHECKSUMS,
    _COMPLETED_TTL,
    _MD5_MAX,
    _MIN_PART,
    _OWNER,
    _STATUS,
    _XML,
    _XML_HEAD,
    NS,
    _Bucket,
    _decode_aws_chunked,
    _esc,
    _Headers,
    _iso,
    _md5,
    _Obj,
    _parse_parts,
    _precondition,
    _Req,
    _S3Error,
    _tail_trailers,
    _Upload,
)


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
        if r.body is None:  # discarded: its trailers (a checksum to echo) are in its tail
            return None, int(h.get("x-amz-decoded-content-length") or 0), _tail_trailers(r.tail)
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
