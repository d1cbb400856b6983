"""The fast path's answers (pure): the fields of a success the engine uses, botocore's rule
for a 200 that is an error, the ClientError botocore raises for an error answer (parsed by
botocore's own parser), the botocore exception for an aiohttp failure, and the answers
botocore's S3 region redirector follows. :class:`zerorename.engine.wire.client.FastClient`
uses them so failures look the same on both send paths."""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
import botocore.exceptions as bexc
from botocore.parsers import RestXMLParser

from zerorename.engine.checksums import PARAM

_ENTITIES = (("&quot;", '"'), ("&apos;", "'"), ("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


def _unescape(raw: bytes) -> str:
    if b"&" not in raw:
        return raw.decode()
    if b"&#" not in raw:  # the five named entities (AWS quotes ETags as &quot;)
        text = raw.decode()
        for entity, char in _ENTITIES:  # &amp; last: "&amp;lt;" is "&lt;"
            text = text.replace(entity, char)
        return text
    try:
        return ET.fromstring(b"<x>" + raw + b"</x>").text or ""
    except ET.ParseError:
        return raw.decode()


def xml_text(body: bytes, tag: str) -> str | None:
    """The text of the first ``<tag>`` element of a small XML body, entities resolved."""
    open_tag = f"<{tag}>".encode()
    start = body.find(open_tag)
    if start < 0:
        return None
    start += len(open_tag)
    end = body.find(f"</{tag}>".encode(), start)
    if end < 0:
        return None
    return _unescape(body[start:end])


def is_error_200(body: bytes, closing_tag: bytes | None) -> bool:
    """botocore's rule: a 200 whose body is an ``<Error>`` document, or not XML at all
    (a cut answer), is a 500. A body with the expected closing tag and no ``<Error``
    is taken as it is without parsing it."""
    if not body or (closing_tag is not None and closing_tag in body and b"<Error" not in body):
        return False
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        return True
    return root.tag == "Error"


#: the last tag of a complete answer body (one without it is cut: botocore's 500)
CLOSING_TAGS = {
    "CreateMultipartUpload": b"</InitiateMultipartUploadResult>",
    "CompleteMultipartUpload": b"</CompleteMultipartUploadResult>",
}


def parse_success(operation: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """The fields of a successful answer the engine uses (as botocore names them)."""
    out: dict[str, Any] = {}
    if operation in ("UploadPart", "PutObject"):
        etag = headers.get("ETag")
        if etag is not None:
            out["ETag"] = etag
        for algorithm, field in PARAM.items():  # a checksum the store confirms
            value = headers.get(f"x-amz-checksum-{algorithm.lower()}")
            if value is not None:
                out[field] = value
    elif operation == "CreateMultipartUpload":
        upload_id = xml_text(body, "UploadId")
        if upload_id is not None:
            out["UploadId"] = upload_id
    elif operation == "CompleteMultipartUpload":
        etag = xml_text(body, "ETag")
        if etag is not None:
            out["ETag"] = etag
        elif b"<CompleteMultipartUploadResult" in body:
            out["ETag"] = ""  # the result without an ETag: answers.require decides
    return out


_PARSER = RestXMLParser()


def client_error(
    operation_model: Any,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    exception_for: Callable[[str], type[bexc.ClientError]] | None = None,
) -> bexc.ClientError:
    """The ClientError botocore raises for this answer, parsed by botocore's own S3
    parser (errors are rare; exactness matters more than speed here)."""
    response = {
        "status_code": status,
        "headers": {k.lower(): v for k, v in headers.items()},
        "body": body,
    }
    parsed = _PARSER.parse(response, operation_model.output_shape)
    meta = parsed.setdefault("ResponseMetadata", {})
    meta.setdefault("MaxAttemptsReached", True)  # the engine's client makes one attempt
    meta.setdefault("RetryAttempts", 0)
    code = str(parsed.get("Error", {}).get("Code") or "")
    cls = exception_for(code) if exception_for is not None else bexc.ClientError
    return cls(parsed, operation_model.name)


def connection_error(exc: BaseException, url: str) -> Exception:
    """The botocore exception aiobotocore raises for an aiohttp failure (same mapping),
    carrying only the message of the original (never its request headers)."""
    kwargs: dict[str, Any] = {"endpoint_url": url, "error": f"{type(exc).__name__}: {exc}"}
    cls: Any
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        # the ssl error itself (a message, no headers): retry.py sees a certificate failure
        cls = bexc.SSLError
        kwargs["error"] = exc.certificate_error
    elif isinstance(exc, aiohttp.ClientSSLError):
        cls = bexc.SSLError
    elif isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.http_exceptions.BadStatusLine,
    ):
        cls = bexc.ConnectionClosedError
    elif isinstance(exc, aiohttp.ServerTimeoutError):
        connect = str(exc).lower().startswith("connect")
        cls = bexc.ConnectTimeoutError if connect else bexc.ReadTimeoutError
    elif isinstance(exc, aiohttp.ClientConnectionError | socket.gaierror):
        cls = bexc.EndpointConnectionError
    elif isinstance(exc, TimeoutError):
        cls = bexc.ReadTimeoutError
    else:
        cls = bexc.HTTPClientError
    mapped: Exception = cls(**kwargs)
    return mapped


def is_redirect(status: int, error: Mapping[str, Any]) -> bool:
    """The answers botocore's S3 region redirector follows (another region/endpoint)."""
    code = error.get("Code")
    return (
        status in (301, 302, 307)
        or code == "PermanentRedirect"
        or (code == "AuthorizationHeaderMalformed" and "Region" in error)
        or code == "IllegalLocationConstraintException"
    )


__all__ = [
    "CLOSING_TAGS",
    "client_error",
    "connection_error",
    "is_error_200",
    "is_redirect",
    "parse_success",
    "xml_text",
]
