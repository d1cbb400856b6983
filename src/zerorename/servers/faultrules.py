"""Pure parts of the fault proxy: S3 operation classification, fault rules, stats and
S3 error responses (no I/O; see :mod:`zerorename.servers.faultproxy`)."""

from __future__ import annotations

import collections
import random
import threading
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from zerorename.servers.requestlog import Request

FaultKind = Literal[
    "slowdown",
    "internal_error",
    "reset",
    "latency",
    "stall",
    "drop_response",
    "html_200",
    "strip_etag",
    "no_such_upload",
    "drip",
]
FAULT_KINDS: tuple[str, ...] = (
    "slowdown",
    "internal_error",
    "reset",
    "latency",
    "stall",
    "drop_response",
    "html_200",
    "strip_etag",
    "no_such_upload",
    "drip",
)

Headers = list[tuple[str, str]]


# ---------------------------------------------------------------- classification (pure)

_BUCKET_GET_SUBRESOURCES = {
    "uploads": "ListMultipartUploads",
    "versions": "ListObjectVersions",
    "location": "GetBucketLocation",
    "versioning": "GetBucketVersioning",
    "policy": "GetBucketPolicy",
    "acl": "GetBucketAcl",
    "tagging": "GetBucketTagging",
    "lifecycle": "GetBucketLifecycleConfiguration",
    "cors": "GetBucketCors",
    "encryption": "GetBucketEncryption",
}


def classify(method: str, target: str, headers: Headers | None = None) -> str:
    """The S3 operation name of a path-style request (``"ListBuckets"``, ``"UploadPart"``...).

    ``target`` is the request target (path and query). Unknown shapes give ``"<METHOD>"``
    plus ``Bucket``/``Object`` (e.g. ``"PATCHObject"``).
    """
    method = method.upper()
    split = urlsplit(target)
    path = unquote(split.path)
    query = {k for k, _ in parse_qsl(split.query, keep_blank_values=True)}
    names = {k.lower() for k, _ in headers or ()}
    bucket, _, key = path.lstrip("/").partition("/")
    if not bucket:
        return "ListBuckets" if method == "GET" else f"{method}Service"
    if not key:
        if method == "GET":
            if "list-type" in query:
                return "ListObjectsV2"
            for sub, op in _BUCKET_GET_SUBRESOURCES.items():
                if sub in query:
                    return op
            return "ListObjects"
        if method == "POST" and "delete" in query:
            return "DeleteObjects"
        if method == "PUT":
            return "PutBucketVersioning" if "versioning" in query else "CreateBucket"
        if method == "DELETE":
            return "DeleteBucket"
        if method == "HEAD":
            return "HeadBucket"
        return f"{method}Bucket"
    if method == "POST":
        if "uploads" in query:
            return "CreateMultipartUpload"
        if "uploadId" in query:
            return "CompleteMultipartUpload"
    elif method == "PUT":
        copy = "x-amz-copy-source" in names
        if "partNumber" in query and "uploadId" in query:
            return "UploadPartCopy" if copy else "UploadPart"
        if "tagging" in query:
            return "PutObjectTagging"
        if "acl" in query:
            return "PutObjectAcl"
        return "CopyObject" if copy else "PutObject"
    elif method == "GET":
        if "uploadId" in query:
            return "ListParts"
        if "tagging" in query:
            return "GetObjectTagging"
        if "acl" in query:
            return "GetObjectAcl"
        return "GetObject"
    elif method == "HEAD":
        return "HeadObject"
    elif method == "DELETE":
        if "uploadId" in query:
            return "AbortMultipartUpload"
        if "tagging" in query:
            return "DeleteObjectTagging"
        return "DeleteObject"
    return f"{method}Object"


# ---------------------------------------------------------------- rules and stats


@dataclass(eq=False)
class FaultRule:
    """When and how to break requests of one operation (or all, with ``operation=None``).

    Choose at most one selector: ``rate`` (probability, seeded by ``seed``), ``every`` (every
    N-th matching request), ``schedule`` (1-based indexes among matching requests) or
    ``burst=(first, count)`` (``count`` consecutive requests from index ``first``); with none,
    every matching request is faulted. ``max_faults`` caps the faults of this rule.
    ``path_contains`` narrows the match to requests whose decoded path contains it.
    """

    operation: str | None = None
    fault: FaultKind = "slowdown"
    rate: float | None = None
    every: int | None = None
    schedule: Collection[int] | None = None
    burst: tuple[int, int] | None = None
    reset_after_bytes: int | None = None
    delay: float = 1.0
    max_faults: int | None = None
    path_contains: str | None = None
    seed: int = 0
    #: matching requests seen so far / faults injected so far (updated by the proxy).
    seen: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.fault not in FAULT_KINDS:
            raise ValueError(f"fault must be one of {', '.join(FAULT_KINDS)}; got {self.fault!r}")
        chosen = [n for n in ("rate", "every", "schedule", "burst") if getattr(self, n) is not None]
        if len(chosen) > 1:
            raise ValueError(f"give at most one of rate, every, schedule, burst; got {chosen}")
        if self.rate is not None and not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be in [0, 1], got {self.rate}")
        if self.every is not None and self.every < 1:
            raise ValueError(f"every must be >= 1, got {self.every}")
        if self.burst is not None and (self.burst[0] < 1 or self.burst[1] < 0):
            raise ValueError(f"burst must be (first >= 1, count >= 0), got {self.burst}")
        if self.schedule is not None:
            self.schedule = frozenset(self.schedule)
        if self.delay < 0:
            raise ValueError(f"delay must be >= 0, got {self.delay}")
        if self.reset_after_bytes is not None and self.reset_after_bytes < 0:
            raise ValueError(f"reset_after_bytes must be >= 0, got {self.reset_after_bytes}")
        self._rng = random.Random(self.seed)

    def matches(self, operation: str, path: str) -> bool:
        if self.operation is not None and self.operation != operation:
            return False
        return self.path_contains is None or self.path_contains in path

    def decide(self) -> bool:
        """Count one matching request; True when it is to be faulted (caller holds the lock)."""
        self.seen += 1
        n = self.seen
        if self.max_faults is not None and self.fired >= self.max_faults:
            return False
        if self.rate is not None:
            hit = self._rng.random() < self.rate
        elif self.every is not None:
            hit = n % self.every == 0
        elif self.schedule is not None:
            hit = n in self.schedule
        elif self.burst is not None:
            hit = self.burst[0] <= n < self.burst[0] + self.burst[1]
        else:
            hit = True
        if hit:
            self.fired += 1
        return hit


@dataclass(frozen=True)
class RequestRecord:
    """One request that went through the proxy, in arrival order."""

    index: int
    operation: str
    method: str
    path: str
    fault: str | None


class ProxyStats:
    """Thread-safe counters: requests per operation and faults per operation and kind, and
    a timed log of the answered requests (:class:`~zerorename.servers.requestlog.Request`)."""

    def __init__(self, history: int = 100_000) -> None:
        self._lock = threading.Lock()
        self._requests: collections.Counter[str] = collections.Counter()
        self._faults: dict[str, collections.Counter[str]] = {}
        self._log: collections.deque[RequestRecord] = collections.deque(maxlen=history)
        self._timed: collections.deque[Request] = collections.deque(maxlen=history)
        self._connections = 0
        self._body_bytes = 0
        self._upstream_connections = 0
        self._tls_handshakes = 0
        self._tls_failures = 0
        self._tls_sessions: collections.Counter[tuple[str, str]] = collections.Counter()

    def _record(self, op: str, method: str, path: str, fault: str | None) -> int:
        """Count a request as it arrives; returns its number (1 = the first)."""
        with self._lock:
            self._requests[op] += 1
            if fault is not None:
                self._faults.setdefault(op, collections.Counter())[fault] += 1
            index = sum(self._requests.values())
            self._log.append(RequestRecord(index, op, method, path, fault))
            return index

    def _answered(self, request: Request) -> None:
        """A request ended (answered, faulted or cut): log it with its times."""
        with self._lock:
            self._timed.append(request)

    def _relayed(self, n: int) -> None:
        """``n`` bytes of an answer's body were handed to a client."""
        with self._lock:
            self._body_bytes += n

    @property
    def body_bytes(self) -> int:
        """Bytes of answers' bodies handed to clients (what they could have read)."""
        with self._lock:
            return self._body_bytes

    def _connection(self, upstream: bool = False) -> None:
        with self._lock:
            if upstream:
                self._upstream_connections += 1
            else:
                self._connections += 1

    def _handshake(self, session: tuple[str, str] | None) -> None:
        """A TLS handshake ended: ``(version, cipher)`` when it succeeded, None when not."""
        with self._lock:
            if session is None:
                self._tls_failures += 1
            else:
                self._tls_handshakes += 1
                self._tls_sessions[session] += 1

    def requests(self, operation: str | None = None) -> int:
        """Requests seen (for one operation, or all)."""
        with self._lock:
            if operation is None:
                return sum(self._requests.values())
            return self._requests[operation]

    def faults(self, operation: str | None = None, kind: str | None = None) -> int:
        """Faults injected, filtered by operation and/or kind."""
        with self._lock:
            return sum(
                n
                for op, kinds in self._faults.items()
                if operation is None or op == operation
                for k, n in kinds.items()
                if kind is None or k == kind
            )

    @property
    def connections(self) -> int:
        """Client connections accepted (keep-alive reuse keeps this low)."""
        with self._lock:
            return self._connections

    @property
    def upstream_connections(self) -> int:
        with self._lock:
            return self._upstream_connections

    @property
    def tls_handshakes(self) -> int:
        """TLS handshakes with clients that succeeded (a TLS proxy only)."""
        with self._lock:
            return self._tls_handshakes

    @property
    def tls_failures(self) -> int:
        """TLS handshakes with clients that failed, e.g. the client refused the certificate."""
        with self._lock:
            return self._tls_failures

    def tls_sessions(self) -> dict[tuple[str, str], int]:
        """Successful handshakes per negotiated (TLS version, cipher)."""
        with self._lock:
            return dict(self._tls_sessions)

    def log(self) -> list[RequestRecord]:
        """The recent requests in arrival order (a copy)."""
        with self._lock:
            return list(self._log)

    def timed(self) -> list[Request]:
        """The ended requests with their start and end times, by number (a copy): what
        :func:`~zerorename.servers.requestlog.sequential_requests` reads."""
        with self._lock:
            return sorted(self._timed, key=lambda r: r.number)

    def snapshot(self) -> dict[str, Any]:
        """{"requests": {op: n}, "faults": {op: {kind: n}}, "connections": n, ...}."""
        with self._lock:
            return {
                "requests": dict(self._requests),
                "faults": {op: dict(k) for op, k in self._faults.items()},
                "connections": self._connections,
                "upstream_connections": self._upstream_connections,
                "tls_handshakes": self._tls_handshakes,
                "tls_failures": self._tls_failures,
            }

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._faults.clear()
            self._log.clear()
            self._timed.clear()
            self._connections = self._upstream_connections = self._body_bytes = 0
            self._tls_handshakes = self._tls_failures = 0
            self._tls_sessions.clear()

    def __repr__(self) -> str:
        return f"ProxyStats({self.snapshot()!r})"


# ---------------------------------------------------------------- HTTP helpers (pure)


def parse_head(raw: bytes) -> tuple[str, Headers]:
    lines = raw.decode("latin-1").split("\r\n")
    headers: Headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line!r}")
        headers.append((name.strip(), value.strip()))
    return lines[0], headers


def header(headers: Headers, name: str) -> str | None:
    name = name.lower()
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def has_token(headers: Headers, name: str, token: str) -> bool:
    return token_in(header(headers, name), token)


def header_map(headers: Headers) -> dict[str, str]:
    """Lower-cased name -> value of its first line (what :func:`header` finds), for a
    message whose headers are looked up several times."""
    out: dict[str, str] = {}
    for k, v in headers:
        out.setdefault(k.lower(), v)
    return out


def token_in(value: str | None, token: str) -> bool:
    """``token`` (lower case) is one of the comma-separated tokens of a header's value."""
    return value is not None and token in (t.strip().lower() for t in value.split(","))


_HOP_BY_HOP = frozenset(
    ("connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade")
)


def end_to_end(headers: Headers, *drop: str) -> Headers:
    """``headers`` without the hop-by-hop ones (and those named by Connection, and ``drop``).
    Transfer-Encoding is kept: bodies are relayed with their framing unchanged."""
    named = {t.strip().lower() for t in (header(headers, "Connection") or "").split(",")}
    skip = _HOP_BY_HOP | named | {d.lower() for d in drop}
    return [(k, v) for k, v in headers if k.lower() not in skip]


def encode_head(first: str, headers: Headers) -> bytes:
    lines = [first, *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


_ERRORS = {
    "slowdown": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
    "internal_error": (
        500,
        "Internal Server Error",
        "InternalError",
        "We encountered an internal error. Please try again.",
    ),
    "no_such_upload": (
        404,
        "Not Found",
        "NoSuchUpload",
        "The specified upload does not exist. The upload ID may be invalid, or the upload "
        "may have been aborted or completed.",
    ),
}


def error_response(kind: str, resource: str, *, head: bool, close: bool) -> bytes:
    """A complete S3 error response (status line, headers, XML body) for ``kind``."""
    status, reason, code, message = _ERRORS[kind]
    request_id = uuid.uuid4().hex[:16].upper()
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{_xml_escape(resource)}</Resource><RequestId>{request_id}</RequestId></Error>"
    ).encode()
    headers: Headers = [
        ("Content-Type", "application/xml"),
        ("Content-Length", str(len(body))),
        ("x-amz-request-id", request_id),
        ("Date", formatdate(usegmt=True)),
        ("Server", "zerorename-faultproxy"),
        ("Connection", "close" if close else "keep-alive"),
    ]
    return encode_head(f"HTTP/1.1 {status} {reason}", headers) + (b"" if head else body)


#: what a captive portal or a misconfigured proxy answers instead of S3 (well-formed, so
#: it parses as XML: only the missing fields tell it from an S3 answer)
HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head>"
    b"<body><p>Please sign in to use this network.</p></body></html>\n"
)


def html_response(*, head: bool, close: bool) -> bytes:
    """A complete ``200 OK`` answer with an HTML page: no ETag, no S3 XML."""
    headers: Headers = [
        ("Content-Type", "text/html; charset=utf-8"),
        ("Content-Length", str(len(HTML_PAGE))),
        ("Date", formatdate(usegmt=True)),
        ("Server", "zerorename-faultproxy"),
        ("Connection", "close" if close else "keep-alive"),
    ]
    return encode_head("HTTP/1.1 200 OK", headers) + (b"" if head else HTML_PAGE)


def _xml_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
