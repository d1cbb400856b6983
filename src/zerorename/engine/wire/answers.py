"""Checks of what a store answered (DESIGN invariant 9): a success without the fields S3
always sends is an error naming the endpoint, on both send paths, before anything is
recorded as written."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from zerorename.engine.errors import BadAnswer

#: what each operation's success must carry (botocore's field names) and how S3 sends it.
REQUIRED = {
    "UploadPart": (("ETag",), "an ETag header"),
    "PutObject": (("ETag",), "an ETag header"),
    "CreateMultipartUpload": (("UploadId",), "an InitiateMultipartUploadResult with an UploadId"),
    # any field of the result shows it was there; its ETag may be empty (Ceph RGW sends
    # <ETag></ETag>), so the result, not a non-empty ETag, is what is required
    "CompleteMultipartUpload": (
        ("ETag", "Bucket", "Key", "Location"),
        "a CompleteMultipartUploadResult",
    ),
}


def endpoint_of(client: Any) -> str:
    """The scheme and host of the client's endpoint (never user info, path or query)."""
    return _endpoint_text(str(getattr(getattr(client, "meta", None), "endpoint_url", "") or ""))


@functools.lru_cache(maxsize=64)
def _endpoint_text(url: str) -> str:
    """:func:`endpoint_of` of one URL, worked out once: every answer's check names it."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return "the S3 endpoint"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}"


def require(resp: Any, operation: str, *, endpoint: str, bucket: str, key: str) -> str:
    """The ETag (UploadId for CreateMultipartUpload) of a success, or :class:`BadAnswer`
    when the answer lacks what S3 always sends (see :data:`REQUIRED`): an HTML page from
    a proxy, say. Only a complete's ETag may be empty (when the result is there)."""
    names, what = REQUIRED[operation]
    got = resp if isinstance(resp, Mapping) else {}
    if operation == "CompleteMultipartUpload":
        etag = got.get("ETag")
        if any(isinstance(got.get(n), str) for n in names):
            return etag if isinstance(etag, str) else ""
    else:
        value = got.get(names[0])
        if isinstance(value, str) and value.strip('"'):
            return value
    raise BadAnswer(
        f"{operation} {f's3://{bucket}/{key}'!r}: {endpoint} answered success without {what}, "
        "which S3 always sends: that is not an S3 store answering (a proxy, a captive "
        "portal or a wrong endpoint_url?); nothing was recorded as written",
        code="BadAnswer",
        operation=operation,
        bucket=bucket,
        key=key,
    )


def require_checksum(
    resp: Any,
    operation: str,
    field: str,
    expected: str,
    *,
    endpoint: str,
    bucket: str,
    key: str,
) -> None:
    """:class:`BadAnswer` when the answer confirms a checksum (``field``, botocore's name:
    ``ChecksumCRC32C``...) other than the one computed over the bytes sent: the store
    holds something else than what the record would say. No checksum in the answer is
    no confirmation and no contradiction (Ceph RGW pacific ignores checksums)."""
    got = resp.get(field) if isinstance(resp, Mapping) else None
    if got is None or got == expected:
        return
    raise BadAnswer(
        f"{operation} {f's3://{bucket}/{key}'!r}: {endpoint} confirmed checksum {got!r}, "
        f"but the bytes sent have {expected!r}: the store did not keep what was sent; "
        "nothing was recorded as written",
        code="BadAnswer",
        operation=operation,
        bucket=bucket,
        key=key,
    )
