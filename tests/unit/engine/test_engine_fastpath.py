"""The fast path's pure parts, with botocore itself as the oracle: the same signature as
botocore's SigV4Auth, the same URL/headers/body as botocore's serializer, the same
ClientError shapes as botocore's parser (no event loop, no server: botocore's answers are
canned with a ``before-send`` handler)."""

from __future__ import annotations

import functools
import socket
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import botocore.exceptions as bexc
import botocore.session
import pytest
from botocore.auth import S3SigV4Auth, _host_from_url
from botocore.awsrequest import AWSRequest, AWSResponse
from botocore.config import Config
from botocore.credentials import Credentials

from zerorename.engine.wire.fastanswers import (
    client_error,
    connection_error,
    is_error_200,
    is_redirect,
    parse_success,
    xml_text,
)
from zerorename.engine.wire.fastpath import (
    PROBE_KEY,
    SigV4Signer,
    Target,
    build_request,
    complete_body,
    host_header,
    op_spec,
    quote_key,
    signed_headers,
    target_for,
)

AK, SK = "AKIDEXAMPLEFASTPATH1", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEJr//////////wEaDOeX+/token=="
TRICKY_KEYS = [
    "plain/key.bin",
    "with space/file name.bin",
    "unicode/ünïcödé-日本語.bin",
    "plus+sign/a+b.bin",
    "percent/100%25%.bin",
    "hash#and?query=yes.bin",
    "equals=k/v=1&amp=2.bin",
    "tilde~/~x",
    "slashes//double/",
    "/leading-slash",
    "star*(paren)'quote'!,;:@$",
]
OPERATIONS = {
    "UploadPart": "upload_part",
    "PutObject": "put_object",
    "CreateMultipartUpload": "create_multipart_upload",
    "CompleteMultipartUpload": "complete_multipart_upload",
    "AbortMultipartUpload": "abort_multipart_upload",
}


@functools.cache
def make_client(
    endpoint: str | None = "http://127.0.0.1:9000",
    style: str = "path",
    region: str = "us-east-1",
    token: str | None = None,
) -> Any:
    """A botocore client configured like the engine's (see engine/client.py)."""
    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=AK,
        aws_secret_access_key=SK,
        aws_session_token=token,
        config=Config(
            s3={"addressing_style": style, "payload_signing_enabled": False},
            retries={"total_max_attempts": 1, "mode": "standard"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            parameter_validation=False,
        ),
    )


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body


def botocore_call(
    client: Any,
    operation: str,
    params: dict[str, Any],
    status: int = 200,
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> tuple[Any, Any]:
    """(the request botocore sent, its result or ClientError) with the answer canned."""
    sent: list[Any] = []

    def before_send(request: Any, **kwargs: Any) -> AWSResponse:
        sent.append(request)
        return AWSResponse(request.url, status, headers or {}, _Raw(body))

    client.meta.events.register("before-send.s3", before_send)
    try:
        result = getattr(client, OPERATIONS[operation])(**params)
    except bexc.ClientError as exc:
        result = exc
    finally:
        client.meta.events.unregister("before-send.s3", before_send)
    return sent[0], result


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode()


def model(client: Any, operation: str) -> Any:
    return client.meta.service_model.operation_model(operation)


def target_of(client: Any, bucket: str = "bkt") -> Target:
    """The target the fast path learns: from the URL botocore builds for the probe key."""
    request, _ = botocore_call(client, "PutObject", {"Bucket": bucket, "Key": PROBE_KEY})
    target = target_for(request.url, client.meta.region_name)
    assert target is not None
    return target


# ------------------------------------------------------------------ signing


@pytest.mark.parametrize("token", [None, TOKEN])
@pytest.mark.parametrize("key", TRICKY_KEYS)
def test_signature_is_botocores(key: str, token: str | None) -> None:
    """SigV4 over tricky keys, a query, checksum/metadata/If-None-Match headers and a
    session token: the Authorization botocore's S3SigV4Auth computes for the same request."""
    client = make_client(region="eu-west-1")
    target = target_of(client)
    for operation, params in [
        (
            "UploadPart",
            {"UploadId": "2~a/b+c=d", "PartNumber": 7, "Body": b"x", "ChecksumCRC32C": "AAAAAA=="},
        ),
        (
            "CreateMultipartUpload",
            {"ContentType": "text/plain", "Metadata": {"Who": "me  too"}, "ACL": "private"},
        ),
        ("CompleteMultipartUpload", {"UploadId": "u", "IfNoneMatch": "*"}),
    ]:
        params = {"Bucket": "bkt", "Key": key, **params}
        if operation == "CompleteMultipartUpload":
            params["MultipartUpload"] = {"Parts": [{"PartNumber": 1, "ETag": '"e"'}]}
        request = build_request(op_spec(model(client, operation)), target, params)
        assert request is not None
        url = target.origin + request.path + ("?" + request.wire_query if request.query else "")
        theirs = AWSRequest(method=request.method, url=url, headers=dict(request.headers))
        theirs.context["client_config"] = Config(s3={"payload_signing_enabled": False})
        S3SigV4Auth(Credentials(AK, SK, token), "s3", "eu-west-1").add_auth(theirs)
        date_time = theirs.headers["X-Amz-Date"]
        ours = signed_headers(target, request, AK, SK, token, date_time)
        assert ours["Authorization"] == theirs.headers["Authorization"]
        assert ours["X-Amz-Content-SHA256"] == theirs.headers["X-Amz-Content-SHA256"]
        assert ours.get("X-Amz-Security-Token") == theirs.headers.get("X-Amz-Security-Token")
        assert ours["Host"] == _host_from_url(url)


def test_signing_key_is_cached_per_date_and_secret_and_never_shown() -> None:
    signer = SigV4Signer("us-east-1")
    key = signer.signing_key(SK, "20260101")
    assert signer.signing_key(SK, "20260101") is key
    assert signer.signing_key(SK, "20260102") != key
    assert signer.signing_key("other", "20260101") != key
    assert SK not in repr(signer) and "us-east-1" in repr(signer)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000/b/k",
        "http://LocalHost:80/k",
        "https://Bucket.s3.eu-west-1.amazonaws.com/k",
        "https://s3.amazonaws.com:443/b/k",
        "https://s3.example.com:8443/b",
        "http://[::1]:9000/b/k",
        "http://[::1]/b",
    ],
)
def test_host_header_is_botocores(url: str) -> None:
    assert host_header(url) == _host_from_url(url)


def test_key_and_value_encoding() -> None:
    assert quote_key("a b/c+d%e#f?g=h&i~j") == "a%20b/c%2Bd%25e%23f%3Fg%3Dh%26i~j"
    assert quote_key("ü") == "%C3%BC"
    assert quote_key("plain/Key-1_2.3~4") == "plain/Key-1_2.3~4"


# ------------------------------------------------------------------ requests


REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("UploadPart", {"UploadId": "2~x/y+z=", "PartNumber": 3, "Body": b"abc", "ContentLength": 3}),
    (
        "UploadPart",
        {"UploadId": "u", "PartNumber": 1, "Body": memoryview(b"abcd"), "ChecksumCRC32": "x=="},
    ),
    ("PutObject", {"Body": b"hello", "ChecksumCRC32C": "mnG7TA==", "ContentLength": 5}),
    ("PutObject", {"Body": b"{}", "IfNoneMatch": "*", "ContentType": "application/json"}),
    ("PutObject", {"Body": b""}),
    (
        "CreateMultipartUpload",
        {
            "ChecksumAlgorithm": "CRC32C",
            "ContentType": "text/csv",
            "Metadata": {"a": "1", "Job-Id": "x y"},
            "CacheControl": "no-cache",
            "StorageClass": "STANDARD",
            "BucketKeyEnabled": True,
            "Tagging": "k=v&k2=v2",
        },
    ),
    ("CreateMultipartUpload", {}),
    ("AbortMultipartUpload", {"UploadId": "abc/def+=="}),
    (
        "CompleteMultipartUpload",
        {
            "UploadId": "u1",
            "IfNoneMatch": "*",
            "MultipartUpload": {
                "Parts": [
                    {"PartNumber": 1, "ETag": '"a&b<c>"', "ChecksumCRC32C": "AAAAAA=="},
                    {"PartNumber": 2, "ETag": '"d"'},
                ]
            },
        },
    ),
]
# what botocore adds that the fast path does not send (or sends itself, differently spelt)
_BOTOCORE_ONLY = {
    "user-agent",
    "x-amz-date",
    "x-amz-content-sha256",
    "authorization",
    "amz-sdk-invocation-id",
    "amz-sdk-request",
    "content-length",
    "x-amz-security-token",
    # botocore asks for 100-continue when it turned a bytes body into a file; the engine's
    # bodies (bytearray, sliced views) never got it from botocore either
    "expect",
    # botocore's CRT signer (awscrt installed) signs the host header and leaves it in the
    # request; the fast path signs it too, and aiohttp sends it
    "host",
}


@pytest.mark.parametrize(
    "endpoint,style,region",
    [
        ("http://127.0.0.1:9000", "path", "us-east-1"),
        ("http://localhost:9000", "virtual", "eu-west-1"),
        ("https://s3.example.com", "auto", "eu-west-1"),
        (None, "auto", "us-west-2"),
        (None, "path", "eu-west-1"),
        (None, "auto", "us-east-1"),
    ],
)
@pytest.mark.parametrize("key", TRICKY_KEYS[:8])
def test_requests_are_botocores(endpoint: str | None, style: str, region: str, key: str) -> None:
    """URL (addressing style, key and query encoding), headers and body: what botocore's
    serializer and endpoint rules produce for the same parameters."""
    client = make_client(endpoint, style, region)
    for bucket in ("zr-bucket", "zr.dotted.bucket"):
        target = target_of(client, bucket)
        for operation, extra in REQUESTS:
            params = {"Bucket": bucket, "Key": key, **extra}
            theirs, _ = botocore_call(client, operation, params)
            ours = build_request(op_spec(model(client, operation)), target, params)
            assert ours is not None, (operation, params)
            url = urlsplit(theirs.url)
            assert target.origin == f"{url.scheme}://{url.netloc}"
            assert ours.path == url.path
            assert sorted(ours.wire_query.split("&")) == sorted(url.query.split("&"))
            assert ours.method == theirs.method
            sent = {k.lower(): _text(v) for k, v in theirs.headers.items()}
            assert ours.headers == {k: v for k, v in sent.items() if k not in _BOTOCORE_ONLY}
            if "content-length" in sent:
                assert str(ours.length) == sent["content-length"]
            if operation == "CompleteMultipartUpload":
                assert ours.body == theirs.body
            elif operation in ("UploadPart", "PutObject"):
                assert bytes(ours.body) == bytes(extra["Body"])


@pytest.mark.parametrize(
    "operation,params",
    [
        ("PutObject", {"Body": b"x", "ChecksumAlgorithm": "CRC32"}),  # botocore computes it
        ("PutObject", {"Body": b"x", "SSECustomerKey": "k" * 32}),  # botocore encodes it
        ("PutObject", {"Body": b"x", "Expires": "2030-01-01"}),  # a timestamp
        ("PutObject", {"Body": b"x", "Metadata": {"k": "ünïcode"}}),  # botocore refuses
        ("PutObject", {"Body": b"x", "Metadata": {"a": "1", "A": "2"}}),
        ("PutObject", {"Body": b"x", "ContentLength": 2}),  # not the body's length
        ("PutObject", {"Body": open}),  # not a body the fast path knows
        ("PutObject", {"Body": memoryview(b"abcdef")[::2]}),  # not contiguous
        ("PutObject", {"Body": b"x", "NoSuchParameter": 1}),
        ("CreateMultipartUpload", {"ContentType": "a\nb"}),
        ("UploadPart", {"UploadId": "u", "PartNumber": True, "Body": b""}),
        ("CompleteMultipartUpload", {"UploadId": "u", "MultipartUpload": {"Parts": []}}),
        (
            "CompleteMultipartUpload",
            {"UploadId": "u", "MultipartUpload": {"Parts": [{"PartNumber": 1, "X": "y"}]}},
        ),
    ],
)
def test_what_only_botocore_can_send_is_left_to_it(operation: str, params: dict[str, Any]) -> None:
    client = make_client()
    target = target_of(client)
    spec = op_spec(model(client, operation))
    assert build_request(spec, target, {"Bucket": "bkt", "Key": "k", **params}) is None


def test_target_for_refuses_anything_but_a_plain_base() -> None:
    assert target_for("http://h:1/b/" + PROBE_KEY, None) is None
    assert target_for("http://h:1/b/" + PROBE_KEY + "?x=1", "r") is None
    assert target_for("ftp://h/b/" + PROBE_KEY, "r") is None
    assert target_for("http://u:p@h/b/" + PROBE_KEY, "r") is None
    assert target_for("http://h/b/other", "r") is None
    t = target_for("http://b.localhost:9000/" + PROBE_KEY, "eu-west-1")
    assert t is not None
    assert (t.origin, t.path_prefix, t.host, t.signer.region) == (
        "http://b.localhost:9000",
        "/",
        "b.localhost:9000",
        "eu-west-1",
    )


def test_complete_body_escapes_like_elementtree() -> None:
    body = complete_body({"Parts": [{"ETag": '"x&<>"', "PartNumber": 2}]})
    assert body == (
        b'<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part>'
        b'<ETag>"x&amp;&lt;&gt;"</ETag><PartNumber>2</PartNumber></Part>'
        b"</CompleteMultipartUpload>"
    )


# ------------------------------------------------------------------ responses

_ERROR = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
    b"<Message>{message}</Message><Key>k</Key><RequestId>r1</RequestId>"
    b"<HostId>h1</HostId></Error>"
)
ANSWERS = [  # (operation, status, body): errors as real servers send them
    ("CompleteMultipartUpload", 404, _ERROR.replace(b"{code}", b"NoSuchUpload")),
    ("CompleteMultipartUpload", 400, _ERROR.replace(b"{code}", b"InvalidPart")),
    ("UploadPart", 404, _ERROR.replace(b"{code}", b"NoSuchBucket")),
    ("PutObject", 412, _ERROR.replace(b"{code}", b"PreconditionFailed")),
    ("CompleteMultipartUpload", 412, _ERROR.replace(b"{code}", b"PreconditionFailed")),
    ("UploadPart", 503, _ERROR.replace(b"{code}", b"SlowDown")),
    ("UploadPart", 403, _ERROR.replace(b"{code}", b"SignatureDoesNotMatch")),
    ("AbortMultipartUpload", 404, _ERROR.replace(b"{code}", b"NoSuchUpload")),
    ("CreateMultipartUpload", 500, _ERROR.replace(b"{code}", b"InternalError")),
    ("UploadPart", 503, b""),
    ("AbortMultipartUpload", 404, b""),
    ("PutObject", 502, b"<html><body>Bad Gateway</body></html>"),
    ("UploadPart", 400, b"not xml at all"),
    ("CompleteMultipartUpload", 200, _ERROR.replace(b"{code}", b"InternalError")),
    ("CompleteMultipartUpload", 200, b"<?xml version='1.0'?>\n<CompleteMultipartUploadRes"),
    ("CreateMultipartUpload", 200, b"<Error><Code>SlowDown</Code><Message>m</Message></Error>"),
    ("UploadPart", 200, b"garbage"),
]


@pytest.mark.parametrize("operation,status,body", ANSWERS)
def test_errors_are_botocores(operation: str, status: int, body: bytes) -> None:
    """Type and ``response`` of the ClientError: what botocore raises for the same answer
    (the 200-with-<Error> and cut 200 answers included: botocore makes them 500s)."""
    client = make_client()
    body = body.replace(b"{message}", b"It went &amp; wrong")
    headers = {"x-amz-request-id": "r1", "x-amz-id-2": "h1", "Content-Type": "application/xml"}
    params: dict[str, Any] = {"Bucket": "bkt", "Key": "k"}
    if operation in ("UploadPart", "CompleteMultipartUpload", "AbortMultipartUpload"):
        params["UploadId"] = "u"
    if operation == "UploadPart":
        params["PartNumber"] = 1
    if operation == "CompleteMultipartUpload":
        params["MultipartUpload"] = {"Parts": [{"PartNumber": 1, "ETag": "e"}]}
    _, theirs = botocore_call(client, operation, params, status, headers, body)
    assert isinstance(theirs, bexc.ClientError)
    if status < 300:
        assert is_error_200(body, _closing(operation))
        status = 500
    ours = client_error(
        model(client, operation), status, headers, body, client.exceptions.from_code
    )
    assert type(ours) is type(theirs)
    assert ours.response == theirs.response
    assert str(ours) == str(theirs)
    assert ours.operation_name == theirs.operation_name
    assert not is_redirect(status, ours.response["Error"])


def test_redirects_are_the_ones_botocore_follows() -> None:
    """Answers botocore's S3 region redirector acts on: the fast path hands those calls
    (and the bucket from then on) to botocore."""
    assert is_redirect(301, {"Code": "PermanentRedirect"})
    assert is_redirect(307, {"Code": "TemporaryRedirect"})
    assert is_redirect(400, {"Code": "AuthorizationHeaderMalformed", "Region": "eu-west-1"})
    assert is_redirect(400, {"Code": "IllegalLocationConstraintException"})
    assert not is_redirect(400, {"Code": "AuthorizationHeaderMalformed"})
    assert not is_redirect(404, {"Code": "NoSuchBucket"})


def _closing(operation: str) -> bytes | None:
    return {
        "CreateMultipartUpload": b"</InitiateMultipartUploadResult>",
        "CompleteMultipartUpload": b"</CompleteMultipartUploadResult>",
    }.get(operation)


SUCCESSES = [
    ("UploadPart", {"ETag": '"p1"'}, b""),
    ("PutObject", {"ETag": '"o1"', "x-amz-checksum-crc32c": "AAAAAA=="}, b""),
    ("AbortMultipartUpload", {}, b""),
    (
        "CreateMultipartUpload",
        {},
        b'<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult xmlns='
        b'"http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>bkt</Bucket><Key>k</Key>'
        b"<UploadId>2~a&amp;b/c+=</UploadId></InitiateMultipartUploadResult>",
    ),
    (
        "CompleteMultipartUpload",
        {},
        b'<?xml version="1.0" encoding="UTF-8"?>\n\n   \n<CompleteMultipartUploadResult xmlns='
        b'"http://s3.amazonaws.com/doc/2006-03-01/"><Location>http://x/bkt/k</Location>'
        b"<Bucket>bkt</Bucket><Key>k</Key><ETag>&quot;3858f62230ac3c915f300c664312c11f-9"
        b"&quot;</ETag></CompleteMultipartUploadResult>",
    ),
    (
        "CompleteMultipartUpload",
        {},
        b'<CompleteMultipartUploadResult><ETag>"a-1"</ETag></CompleteMultipartUploadResult>',
    ),
    (  # Ceph RGW (pacific) answers an empty ETag
        "CompleteMultipartUpload",
        {},
        b'<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult xmlns="http://s3'
        b'.amazonaws.com/doc/2006-03-01/"><Location>http://h/b/k</Location><Bucket>b</Bucket>'
        b"<Key>k</Key><ETag></ETag></CompleteMultipartUploadResult>",
    ),
]


@pytest.mark.parametrize("operation,headers,body", SUCCESSES)
def test_success_fields_are_botocores(operation: str, headers: dict[str, str], body: bytes) -> None:
    client = make_client()
    params: dict[str, Any] = {"Bucket": "bkt", "Key": "k", "UploadId": "u"}
    if operation == "UploadPart":
        params["PartNumber"] = 1
    if operation == "PutObject":
        del params["UploadId"]
    if operation == "CreateMultipartUpload":
        del params["UploadId"]
    if operation == "CompleteMultipartUpload":
        params["MultipartUpload"] = {"Parts": [{"PartNumber": 1, "ETag": "e"}]}
    _, theirs = botocore_call(client, operation, params, 200, headers, body)
    assert not isinstance(theirs, Exception)
    assert not is_error_200(body, _closing(operation))
    ours = parse_success(operation, headers, body)
    assert ours == {k: theirs[k] for k in ours}
    for field in ("ETag", "UploadId"):
        assert (field in ours) == (field in theirs)


@pytest.mark.parametrize(
    "raw",
    [b"plain", b"&quot;a-1&quot;", b"a&amp;lt;b", b"&lt;&gt;&apos;&amp;", b"x&#34;y&#x41;", b""],
)
def test_xml_text_resolves_entities_like_elementtree(raw: bytes) -> None:
    body = b"<R><Other>&amp;</Other><ETag>" + raw + b"</ETag><ETag>second</ETag></R>"
    assert xml_text(body, "ETag") == (ET.fromstring(b"<x>" + raw + b"</x>").text or "")
    assert xml_text(body, "UploadId") is None
    assert xml_text(b"<ETag>cut", "ETag") is None


@pytest.mark.parametrize(
    "exc,expected",
    [
        (aiohttp.ServerDisconnectedError(), bexc.ConnectionClosedError),
        (aiohttp.ClientPayloadError("cut"), bexc.ConnectionClosedError),
        (aiohttp.SocketTimeoutError("Timeout on reading data from socket"), bexc.ReadTimeoutError),
        (aiohttp.ConnectionTimeoutError("Connection timeout to host"), bexc.ConnectTimeoutError),
        (aiohttp.ClientOSError(104, "Connection reset by peer"), bexc.EndpointConnectionError),
        (socket.gaierror(-2, "Name or service not known"), bexc.EndpointConnectionError),
        (TimeoutError(), bexc.ReadTimeoutError),
        (ConnectionResetError(104, "reset"), bexc.HTTPClientError),
    ],
)
def test_connection_errors_map_like_aiobotocore(exc: BaseException, expected: type) -> None:
    mapped = connection_error(exc, "http://h/b/k?uploadId=u")
    assert type(mapped) is expected
    assert mapped.__context__ is None and mapped.__cause__ is None


def test_tasks_failing_together_surface_as_one_engine_error() -> None:
    """Parts throttled past the budget in the same instant fail together: the caller gets
    the first error (noting the others), not an ExceptionGroup; a group holding a
    KeyboardInterrupt stays a group."""
    from zerorename.aio import first_error

    first, second = ValueError("first"), ValueError("second")
    group = ExceptionGroup("parts", [ExceptionGroup("inner", [first]), second])
    assert first_error(group) is first
    assert first_error(group) is first
    assert first.__notes__ == ["(1 more task(s) failed at the same time)"]
    alone = ValueError("alone")
    assert first_error(ExceptionGroup("one", [alone])) is alone
    assert not hasattr(alone, "__notes__")
    interrupted = BaseExceptionGroup("x", [KeyboardInterrupt(), ValueError()])
    assert first_error(interrupted) is interrupted
