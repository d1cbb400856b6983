"""A lean, signed aiohttp path for the engine's hot S3 calls.

UploadPart, CompleteMultipartUpload, CreateMultipartUpload, AbortMultipartUpload and
PutObject are the calls a large job makes by the thousand; here each is one
aiohttp request signed with SigV4 (``UNSIGNED-PAYLOAD``, or a trailing checksum:
trailer.py; signing key cached per day).
What botocore decides -- endpoint and addressing style per bucket, signing region,
credentials, error shapes -- is learnt from the engine's own aiobotocore client, so the
requests are the ones botocore would send and failures look the same to the callers
(:class:`botocore.exceptions.ClientError` and botocore's connection errors). A call the
fast path cannot make exactly right goes to botocore instead.

Here are the pure parts of a request (signing, building: no loop, no server), those of
its answer are in fastanswers.py; :class:`zerorename.engine.wire.client.FastClient` sends.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from zerorename.engine.checksums import PARAM
from zerorename.engine.errors import EngineConfigError
from zerorename.engine.planning import key_problem
from zerorename.engine.wire import trailer

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
#: the operations the fast path sends itself (botocore's names and the client's methods).
HOT_OPERATIONS = {
    "UploadPart": "upload_part",
    "CompleteMultipartUpload": "complete_multipart_upload",
    "CreateMultipartUpload": "create_multipart_upload",
    "AbortMultipartUpload": "abort_multipart_upload",
    "PutObject": "put_object",
}
PROBE_KEY = "zr-probe"
_S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
_COMPLETED_PART_FIELDS = frozenset(
    {
        "PartNumber",
        "ETag",
        "ChecksumCRC32",
        "ChecksumCRC32C",
        "ChecksumCRC64NVME",
        "ChecksumSHA1",
        "ChecksumSHA256",
    }
)


# -- SigV4 (pure) ---------------------------------------------------------------------
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.~/-]*").fullmatch
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.~-]*").fullmatch


def quote_key(key: str) -> str:
    """An object key as it goes into the URL path and the canonical URI: UTF-8, every
    byte but ``A-Za-z0-9-._~`` and '/' percent-encoded (S3 does not double-encode)."""
    return key if _PLAIN_KEY(key) else quote(key, safe="/")


def quote_value(value: str) -> str:
    """A query-string name or value, URI-encoded as SigV4 wants (also '/')."""
    return value if _PLAIN_VALUE(value) else quote(value, safe="")


def host_header(url: str) -> str:
    """The Host header botocore signs for ``url``: lower-case host, the port only when
    it is not the scheme's default, no user info."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None and parts.port != {"http": 80, "https": 443}.get(parts.scheme):
        host = f"{host}:{parts.port}"
    return host


def canonical_value(value: str) -> str:
    """A header value as SigV4 canonicalises it (trimmed, inner spaces collapsed)."""
    return " ".join(value.split())


def amz_date(now: float) -> str:
    """``YYYYMMDDTHHMMSSZ`` for a Unix time."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


class SigV4Signer:
    """SigV4 for one (region, service), payload unsigned (or a trailer). The derived key
    is cached per (date, secret), so a request costs one SHA-256 and one HMAC."""

    __slots__ = ("_cache", "_scope_tail", "region", "service")

    def __init__(self, region: str, service: str = "s3") -> None:
        self.region = region
        self.service = service
        self._scope_tail = f"/{region}/{service}/aws4_request"
        self._cache: dict[tuple[str, str], bytes] = {}

    def __repr__(self) -> str:  # never the cached keys
        return f"SigV4Signer(region={self.region!r}, service={self.service!r})"

    def signing_key(self, secret_key: str, date: str) -> bytes:
        """HMAC chain AWS4+secret -> date -> region -> service -> aws4_request."""
        cache_key = (date, secret_key)
        key = self._cache.get(cache_key)
        if key is None:
            key = ("AWS4" + secret_key).encode()
            for part in (date, self.region, self.service, "aws4_request"):
                key = hmac.digest(key, part.encode(), "sha256")
            if len(self._cache) >= 4:  # a new day or rotated credentials
                self._cache.clear()
            self._cache[cache_key] = key
        return key

    def authorization(
        self,
        method: str,
        path: str,
        query: str,
        headers: list[tuple[str, str]],
        access_key: str,
        secret_key: str,
        date_time: str,
        payload_hash: str = UNSIGNED_PAYLOAD,
    ) -> str:
        """The Authorization header for a request. ``path`` and ``query`` are already
        encoded (as sent; the query's names sorted); ``headers`` are the signed headers as
        (lower-case name, canonical value), sorted by name; ``payload_hash`` is what
        x-amz-content-sha256 says."""
        signed = ";".join(name for name, _ in headers)
        canonical = "".join(
            [
                method,
                "\n",
                path,
                "\n",
                query,
                "\n",
                *[f"{name}:{value}\n" for name, value in headers],
                "\n",
                signed,
                "\n",
                payload_hash,
            ]
        )
        date = date_time[:8]
        scope = date + self._scope_tail
        to_sign = (
            f"{ALGORITHM}\n{date_time}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        )
        signature = hmac.digest(self.signing_key(secret_key, date), to_sign.encode(), "sha256")
        return (
            f"{ALGORITHM} Credential={access_key}/{scope}, SignedHeaders={signed}, "
            f"Signature={signature.hex()}"
        )


# -- requests (pure) ------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """Where one bucket's requests go, as botocore resolved it."""

    origin: str  # scheme://netloc
    path_prefix: str  # the encoded path before the key: '/bucket/' or '/'
    host: str  # the Host header, signed
    signer: SigV4Signer


@dataclass(frozen=True)
class OpSpec:
    """How botocore serialises one operation: method, fixed query, and which parameters
    become which headers (those the fast path may pass through unchanged)."""

    name: str
    method: str
    static_query: str  # e.g. "uploads" for CreateMultipartUpload
    headers: Mapping[str, tuple[str, str]]  # parameter -> (header name, type name)
    meta_prefix: str | None  # "x-amz-meta-" for Metadata
    query: Mapping[str, str]  # parameter -> query name
    payload: str | None  # Body / MultipartUpload


def op_spec(operation_model: Any) -> OpSpec:
    """An :class:`OpSpec` from botocore's operation model. Header parameters that botocore
    transforms (SSE-C keys, the SDK checksum algorithm it computes itself, timestamps,
    lists, JSON values) are left out: a call that uses one goes to botocore."""
    shape = operation_model.input_shape
    uri = operation_model.http["requestUri"]
    static_query = uri.split("?", 1)[1] if "?" in uri else ""
    headers: dict[str, tuple[str, str]] = {}
    query: dict[str, str] = {}
    meta_prefix = None
    for name, member in shape.members.items():
        ser = member.serialization
        location = ser.get("location")
        if location == "header":
            header = ser.get("name", name)
            if (
                member.type_name in ("string", "integer", "long", "boolean")
                and not name.startswith("SSECustomer")
                and header.lower() != "x-amz-sdk-checksum-algorithm"
                and not ser.get("jsonvalue")
            ):
                headers[name] = (header, member.type_name)
        elif location == "headers" and member.type_name == "map":
            meta_prefix = ser.get("name")
        elif location == "querystring" and member.type_name in ("string", "integer"):
            query[name] = ser.get("name", name)
    return OpSpec(
        name=operation_model.name,
        method=operation_model.http["method"],
        static_query=static_query,
        headers=headers,
        meta_prefix=meta_prefix,
        query=query,
        payload=shape.serialization.get("payload"),
    )


@dataclass(frozen=True)
class Request:
    """One request the fast path will sign and send."""

    method: str
    path: str  # encoded, as sent and signed
    query: str  # canonical: encoded, names sorted, every name with '='
    wire_query: str  # as sent: like botocore, a bare name (``?uploads``) has no '='
    headers: dict[str, str]  # extra headers to send and sign (lower-case names)
    body: Any  # None, bytes-like, a sized async iterable (memoryview slices, a FileRange),
    # or a TrailerBody (sent aws-chunked)
    length: int  # Content-Length: the encoded length of a TrailerBody
    payload_hash: str = UNSIGNED_PAYLOAD


def _printable(value: str) -> bool:
    return value.isascii() and value.isprintable()


def _header_value(value: Any, type_name: str) -> str | None:
    if type_name == "string":
        return value if isinstance(value, str) and _printable(value) else None
    if type_name == "boolean":
        return ("true" if value else "false") if isinstance(value, bool) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _body_length(body: Any) -> tuple[Any, int] | None:
    if body is None:
        return None, 0
    if isinstance(body, bytes | bytearray):
        return body, len(body)
    if isinstance(body, memoryview):
        if not body.contiguous:
            return None
        view = body.cast("B") if body.format != "B" or body.ndim != 1 else body
        return view, view.nbytes
    if hasattr(body, "__aiter__") and hasattr(body, "__len__"):
        return body, len(body)
    return None


def _xml_escape(text: str) -> str:
    # what ElementTree does to element text (botocore serialises with it)
    if "&" in text:
        text = text.replace("&", "&amp;")
    if "<" in text:
        text = text.replace("<", "&lt;")
    if ">" in text:
        text = text.replace(">", "&gt;")
    return text


def complete_body(multipart_upload: Any) -> bytes | None:
    """The CompleteMultipartUpload XML botocore would send for ``MultipartUpload``
    (elements in the caller's order, like botocore), or None when it holds anything but
    parts with plain fields."""
    if not isinstance(multipart_upload, dict) or set(multipart_upload) != {"Parts"}:
        return None
    parts = multipart_upload["Parts"]
    if not isinstance(parts, list | tuple) or not parts:
        return None
    out = [f'<CompleteMultipartUpload xmlns="{_S3_XMLNS}">']
    for part in parts:
        if not isinstance(part, dict) or not part.keys() <= _COMPLETED_PART_FIELDS:
            return None
        out.append("<Part>")
        for name, value in part.items():
            if value is None:
                continue
            if name == "PartNumber":
                if not isinstance(value, int) or isinstance(value, bool):
                    return None
                text = str(value)
            elif isinstance(value, str):
                text = _xml_escape(value)
            else:
                return None
            out.append(f"<{name}>{text}</{name}>")
        out.append("</Part>")
    out.append("</CompleteMultipartUpload>")
    return "".join(out).encode()


def build_request(spec: OpSpec, target: Target, params: Mapping[str, Any]) -> Request | None:
    """The request for ``params`` (the client method's keyword arguments), or None when
    one of them is something only botocore knows how to send. Every hot operation is an
    object operation: a missing or empty key is refused (:class:`EngineConfigError`), never sent
    (``DELETE /bucket?uploadId=`` would be DeleteBucket) nor handed to botocore."""
    key = params.get("Key")
    problem = key_problem(key)
    if problem is not None or not isinstance(key, str):
        raise EngineConfigError(f"{spec.name} refused: {problem}")
    headers: dict[str, str] = {}
    query_items: list[tuple[str, str, bool]] = []  # (name, value, bare on the wire)
    if spec.static_query:
        query_items.append((spec.static_query, "", True))
    body: Any = None
    length = decoded = 0
    declared_length: int | None = None
    for name, value in params.items():
        if name in ("Bucket", "Key") or value is None:
            continue
        if name == spec.payload:
            if spec.name == "CompleteMultipartUpload":
                body = complete_body(value)
                if body is None:
                    return None
                length = len(body)
            elif isinstance(value, trailer.TrailerBody):  # checksum in a trailer: no header
                if any(p in params for p in PARAM.values()):
                    return None
                body, length, decoded = value, value.encoded_length, value.length
                headers.update(trailer.request_headers(value.algorithm, decoded))
            else:
                measured = _body_length(value)
                if measured is None:
                    return None
                body, length = measured
                decoded = length
        elif name == "ContentLength":
            if not isinstance(value, int) or isinstance(value, bool):
                return None
            declared_length = value
        elif name in spec.query:
            if isinstance(value, bool) or not isinstance(value, str | int):
                return None
            query_items.append((spec.query[name], quote_value(str(value)), False))
        elif name in spec.headers:
            header, type_name = spec.headers[name]
            text = _header_value(value, type_name)
            if text is None:
                return None
            headers[header.lower()] = text
        elif name == "Metadata" and spec.meta_prefix and isinstance(value, dict):
            for meta_key, meta_value in value.items():
                header = (spec.meta_prefix + str(meta_key)).lower()
                if not (
                    isinstance(meta_key, str)
                    and isinstance(meta_value, str)
                    and _printable(meta_key)
                    and _printable(meta_value)
                    and header not in headers  # keys differing only in case
                ):
                    return None
                headers[header] = meta_value
        else:
            return None
    if declared_length is not None and declared_length != decoded:
        return None
    query_items.sort()
    query = "&".join(f"{quote_value(n)}={v}" for n, v, _ in query_items)
    wire = "&".join(
        quote_value(n) if bare else f"{quote_value(n)}={v}" for n, v, bare in query_items
    )
    path = target.path_prefix + quote_key(key)
    if isinstance(body, trailer.TrailerBody):
        return Request(
            spec.method, path, query, wire, headers, body, length, trailer.STREAMING_TRAILER
        )
    return Request(spec.method, path, query, wire, headers, body, length)


def signed_headers(
    target: Target,
    request: Request,
    access_key: str,
    secret_key: str,
    token: str | None,
    date_time: str,
) -> dict[str, str]:
    """Every header the request is sent with: Host, the SigV4 ones, the request's own,
    the session token, Content-Length, and the Authorization over all but the last."""
    payload_hash = request.payload_hash
    signed = [
        ("host", target.host),
        ("x-amz-content-sha256", payload_hash),
        ("x-amz-date", date_time),
    ]
    headers = {
        "Host": target.host,
        "X-Amz-Date": date_time,
        "X-Amz-Content-SHA256": payload_hash,
        "Content-Length": str(request.length),
    }
    if token:
        signed.append(("x-amz-security-token", token))
        headers["X-Amz-Security-Token"] = token
    for name, value in request.headers.items():
        signed.append((name, canonical_value(value)))
        headers[name] = value
    if len(signed) > 3:
        signed.sort()
    headers["Authorization"] = target.signer.authorization(
        request.method,
        request.path,
        request.query,
        signed,
        access_key,
        secret_key,
        date_time,
        payload_hash,
    )
    return headers


def target_for(probe_url: str, region: str | None) -> Target | None:
    """The :class:`Target` behind the URL botocore built for the probe key, or None when
    the URL is anything but a plain http(s) base plus the key."""
    parts = urlsplit(probe_url)
    if (
        parts.scheme not in ("http", "https")
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
        or not parts.path.endswith("/" + PROBE_KEY)
        or not region
    ):
        return None
    return Target(
        origin=f"{parts.scheme}://{parts.netloc}",
        path_prefix=parts.path[: -len(PROBE_KEY)],
        host=host_header(probe_url),
        signer=SigV4Signer(region),
    )


__all__ = [
    "HOT_OPERATIONS",
    "OpSpec",
    "Request",
    "SigV4Signer",
    "Target",
    "amz_date",
    "build_request",
    "canonical_value",
    "complete_body",
    "host_header",
    "op_spec",
    "quote_key",
    "quote_value",
    "signed_headers",
    "target_for",
]
