"""Checks of what a store answered (DESIGN invariant 9): a success without the fields S3
always sends is an error naming the endpoint, on both send paths, before anything is
recorded as written."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from zerorename.engine.errors import BadAnswer

#: what each operation's success must carry (the botocore field) and how S3 sends it.
REQUIRED = {
    "UploadPart": ("ETag", "an ETag header"),
    "PutObject": ("ETag", "an ETag header"),
    "CreateMultipartUpload": ("UploadId", "an InitiateMultipartUploadResult with an UploadId"),
    "CompleteMultipartUpload": ("ETag", "a CompleteMultipartUploadResult with an ETag"),
}


def endpoint_of(client: Any) -> str:
    """The scheme and host of the client's endpoint (never user info, path or query)."""
    url = str(getattr(getattr(client, "meta", None), "endpoint_url", "") or "")
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return "the S3 endpoint"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}"


def require(resp: Any, operation: str, *, endpoint: str, bucket: str, key: str) -> str:
    """The field ``operation``'s success must carry (see :data:`REQUIRED`), or
    :class:`BadAnswer` when the answer lacks it (an HTML page from a proxy, say)."""
    name, what = REQUIRED[operation]
    value = resp.get(name) if isinstance(resp, Mapping) else None
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
