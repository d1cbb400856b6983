"""Issue 10 at the engine boundary, pure parts: records validated field by field, hostile
record text, config types and ranges, answers without the fields S3 always sends, and
certificate failures classified as not worth a retry. No loop, no server."""

from __future__ import annotations

import contextlib
import json
import math
import ssl
from typing import Any

import aiohttp
import botocore.exceptions as bexc
import pytest
from aiohttp.client_reqrep import ConnectionKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zerorename.engine.config import EngineConfig, RetryConfig
from zerorename.engine.errors import BadAnswer, CertificateError, ConfigError, RecordError
from zerorename.engine.results import PartInfo, PendingUpload
from zerorename.engine.retry import FailureKind, certificate_failure, classify, translate
from zerorename.engine.wire.answers import endpoint_of, require
from zerorename.engine.wire.fastanswers import connection_error
from zerorename.engine.wire.fastpath import (
    HOT_OPERATIONS,
    OpSpec,
    SigV4Signer,
    Target,
    build_request,
)


def good() -> dict[str, Any]:
    return {
        "version": 1,
        "bucket": "zr-bucket.1",
        "key": "dir with space/ü+%#?=.parquet",
        "upload_id": "u-1",
        "parts": [
            {"number": 1, "etag": '"e1"', "size": 5, "checksum": "AAAA"},
            {"number": 3, "etag": '"e3"', "size": 0},
        ],
        "length": 5,
        "created": 1700000000.5,
        "checksum_algorithm": "CRC32C",
    }


def test_the_good_record_parses_and_round_trips() -> None:
    rec = PendingUpload.from_dict(good())
    assert PendingUpload.from_json(rec.to_json()) == rec
    assert PendingUpload.from_json(rec.to_json().encode()) == rec


def _set(path: str, value: Any) -> Any:
    def mutate(d: dict[str, Any]) -> None:
        *head, last = path.split(".")
        target: Any = d
        for name in head:
            target = target[int(name)] if name.isdigit() else target[name]
        target[int(last) if last.isdigit() else last] = value

    return mutate


def _drop(name: str) -> Any:
    return lambda d: d.pop(name)


BAD_RECORDS = {
    "empty key": _set("key", ""),
    "null key": _set("key", None),
    "key over 1024 bytes": _set("key", "é" * 513),
    "key with a lone surrogate": _set("key", "a\ud800"),
    "null bucket": _set("bucket", None),
    "bucket 'None'": _set("bucket", "None"),
    "bucket too short": _set("bucket", "b"),
    "bucket too long": _set("bucket", "b" * 64),
    "bucket with a slash": _set("bucket", "b/c"),
    "bucket an IP": _set("bucket", "10.0.0.1"),
    "bucket upper case": _set("bucket", "Bucket"),
    "bucket a number": _set("bucket", 123),
    "empty upload id": _set("upload_id", ""),
    "numeric upload id": _set("upload_id", 7),
    "missing upload id": _drop("upload_id"),
    "missing created": _drop("created"),
    "length negative": _set("length", -1),
    "length a bool": _set("length", True),
    "length a string": _set("length", "5"),
    "length a float": _set("length", 5.0),
    "created a string": _set("created", "1700000000"),
    "created a bool": _set("created", True),
    "created NaN": _set("created", math.nan),
    "created infinite": _set("created", math.inf),
    "created a huge int": _set("created", 10**400),
    "version a bool": _set("version", True),
    "version 1.0": _set("version", 1.0),
    "version 2": _set("version", 2),
    "parts not a list": _set("parts", "ab"),
    "parts an object": _set("parts", {"number": 1}),
    "no parts": _set("parts", []),
    "part not an object": _set("parts.0", [1, "e", 5]),
    "part number 0": _set("parts.0.number", 0),
    "part number 10001": _set("parts.1.number", 10001),
    "part number a bool": _set("parts.0.number", True),
    "part numbers not ascending": _set("parts.1.number", 1),
    "part etag empty": _set("parts.0.etag", ""),
    "part etag a number": _set("parts.0.etag", 5),
    "part size negative": _set("parts.1.size", -1),
    "part size a float": _set("parts.0.size", 5.0),
    "part checksum a number": _set("parts.0.checksum", 5),
    "sizes disagree with length": _set("length", 6),
    "unknown checksum algorithm": _set("checksum_algorithm", "MD5"),
}


@pytest.mark.parametrize("mutate", BAD_RECORDS.values(), ids=BAD_RECORDS.keys())
def test_a_bad_field_is_a_record_error(mutate: Any) -> None:
    d = good()
    mutate(d)
    with pytest.raises(RecordError):
        PendingUpload.from_dict(d)
    with pytest.raises(RecordError):  # the same through JSON text, where JSON can hold it
        try:
            text = json.dumps(d, allow_nan=True)
        except (ValueError, OverflowError):
            raise RecordError("not JSON") from None
        PendingUpload.from_json(text)


def test_constructors_validate_too() -> None:
    part = PartInfo(1, '"e"', 3)
    with pytest.raises(RecordError, match="non-empty"):
        PendingUpload("zr-bucket", "", "u", (part,), 3)
    with pytest.raises(RecordError, match="bucket"):
        PendingUpload(None, "k", "u", (part,), 3)  # type: ignore[arg-type]
    with pytest.raises(RecordError, match="upload id"):
        PendingUpload("zr-bucket", "k", "", (part,), 3)
    with pytest.raises(RecordError, match="part number"):
        PartInfo(0, '"e"', 3)
    with pytest.raises(RecordError, match="ETag"):
        PartInfo(1, "", 3)
    with pytest.raises(RecordError, match="finite"):
        PendingUpload("zr-bucket", "k", "u", (part,), 3, created=math.nan)
    # an int time is taken as the float it is
    assert PendingUpload("zr-bucket", "k", "u", (part,), 3, created=5).created == 5.0


HOSTILE_TEXT = {
    "not UTF-8": b'{"version": 1, "key": "\xff\xfe"}',
    "deeply nested": "[" * 200_000 + "]" * 200_000,
    "deeply nested objects": '{"a":' * 100_000 + "1" + "}" * 100_000,
    "Infinity": json.dumps(good()).replace("1700000000.5", "Infinity"),
    "NaN": json.dumps(good()).replace("1700000000.5", "NaN"),
    "-Infinity": json.dumps(good()).replace("1700000000.5", "-Infinity"),
    "1e400": json.dumps(good()).replace("1700000000.5", "1e400"),
    "huge int created": json.dumps(good()).replace("1700000000.5", "9" * 400),
    "int too long to convert": json.dumps(good()).replace('"length": 5', '"length": ' + "9" * 5000),
    "truncated": json.dumps(good())[:-3],
    "a list": "[1, 2]",
    "null": "null",
    "empty": "",
}


@pytest.mark.parametrize("text", HOSTILE_TEXT.values(), ids=HOSTILE_TEXT.keys())
def test_hostile_record_text_is_a_record_error(text: str | bytes) -> None:
    with pytest.raises(RecordError):
        PendingUpload.from_json(text)


# -- property: any JSON parses to a valid record or raises RecordError, nothing else ------
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
SCALAR = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
FIELDS = ("version", "bucket", "key", "upload_id", "parts", "length", "created")


@st.composite
def near_records(draw: st.DrawFn) -> dict[str, Any]:
    """A valid record, then (usually) one field or one part field replaced by any value."""
    numbers = sorted(draw(st.sets(st.integers(1, 10_000), min_size=1, max_size=3)))
    parts = [
        {
            "number": n,
            "etag": draw(st.text(min_size=1, max_size=4)),
            "size": draw(st.integers(0, 9)),
        }
        for n in numbers
    ]
    d: dict[str, Any] = {
        "version": 1,
        "bucket": draw(st.sampled_from(["zr-b", "abc", "a.b-c", "x" * 63])),
        "key": draw(st.text(min_size=1, max_size=12)),
        "upload_id": draw(st.text(min_size=1, max_size=6)),
        "parts": parts,
        "length": sum(p["size"] for p in parts),
        "created": draw(st.floats(allow_nan=False, allow_infinity=False) | st.integers()),
        "checksum_algorithm": draw(st.sampled_from([None, "CRC32", "CRC32C", "SHA256"])),
    }
    where = draw(st.sampled_from([None, "part", *FIELDS, "checksum_algorithm"]))
    if where == "part":
        part = draw(st.sampled_from(parts))
        part[draw(st.sampled_from(["number", "etag", "size", "checksum"]))] = draw(SCALAR)
    elif where is not None:
        d[where] = draw(SCALAR | JSON)
    return d


def _parses_or_refuses(d: Any) -> None:
    try:
        rec = PendingUpload.from_dict(d)
    except RecordError:
        return
    again = PendingUpload.from_json(rec.to_json())
    assert again == rec and again.to_dict() == rec.to_dict()
    assert rec.key and rec.upload_id and rec.parts and math.isfinite(rec.created)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(JSON | near_records())
def test_any_json_value_parses_or_is_a_record_error(d: Any) -> None:
    _parses_or_refuses(d)
    try:
        text = json.dumps(d)
    except (ValueError, OverflowError):
        return
    with contextlib.suppress(RecordError):
        PendingUpload.from_json(text)


@settings(max_examples=300)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_any_bytes_or_text_parse_or_are_a_record_error(data: bytes | str) -> None:
    try:
        rec = PendingUpload.from_json(data)
    except RecordError:
        return
    assert PendingUpload.from_json(rec.to_json()) == rec


# -- the lowest request builder refuses an object operation without a key -----------------
def _spec(name: str) -> OpSpec:
    return OpSpec(name, "DELETE", "", {}, None, {"UploadId": "uploadId"}, None)


@pytest.mark.parametrize("key", ["", None, 5])
@pytest.mark.parametrize("operation", sorted(HOT_OPERATIONS))
def test_the_fast_path_never_builds_a_bucket_url(operation: str, key: Any) -> None:
    target = Target("http://h:1", "/zr-b/", "h:1", SigV4Signer("us-east-1"))
    params: dict[str, Any] = {"Bucket": "zr-b", "UploadId": "u"}
    if key is not None:
        params["Key"] = key
    with pytest.raises(ConfigError, match="refused"):
        build_request(_spec(operation), target, params)


# -- EngineConfig -------------------------------------------------------------------------
BAD_CONFIGS: dict[str, tuple[dict[str, Any], str]] = {
    "float part size": ({"part_size": 8.0 * 2**20}, "part_size"),
    "bool part size": ({"part_size": True}, "part_size"),
    "retry None": ({"retry": None}, "retry"),
    "NaN read timeout": ({"read_timeout": math.nan}, "read_timeout"),
    "inf connect timeout": ({"connect_timeout": math.inf}, "connect_timeout"),
    "zero read timeout": ({"read_timeout": 0}, "read_timeout"),
    "string timeout": ({"read_timeout": "5"}, "read_timeout"),
    "float concurrency": ({"max_concurrency": 2.0}, "max_concurrency"),
    "bool batch concurrency": ({"batch_concurrency": True}, "batch_concurrency"),
    "zero pool": ({"max_pool_connections": 0}, "max_pool_connections"),
    "fast_path a string": ({"fast_path": "no"}, "fast_path"),
    "not a URL": ({"endpoint_url": "notaurl"}, "endpoint_url"),
    "ftp URL": ({"endpoint_url": "ftp://h:21"}, "endpoint_url"),
    "bad port": ({"endpoint_url": "http://h:99999"}, "endpoint_url"),
    "port not a number": ({"endpoint_url": "http://h:port"}, "endpoint_url"),
    "no host": ({"endpoint_url": "http://:9000"}, "endpoint_url"),
    "query": ({"endpoint_url": "http://h:9000/?x=1"}, "endpoint_url"),
    "space": ({"endpoint_url": "http://h 1:9000"}, "endpoint_url"),
    "bad region": ({"region": "us east 1"}, "region"),
    "region with underscore": ({"region": "us_east_1"}, "region"),
    "empty profile": ({"profile": ""}, "profile"),
    "empty secret": ({"aws_access_key_id": "AK", "aws_secret_access_key": ""}, "secret"),
}


@pytest.mark.parametrize(("kwargs", "field"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_bad_config_fields_are_config_errors_naming_the_field(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        EngineConfig(**kwargs)


BAD_RETRY: dict[str, dict[str, Any]] = {
    "float attempts": {"max_attempts": 2.0},
    "zero attempts": {"max_attempts": 0},
    "NaN base delay": {"base_delay": math.nan},
    "negative max delay": {"max_delay": -1},
    "inf elapsed": {"max_elapsed": math.inf},
    "zero attempt deadline": {"attempt_timeout": 0},
    "inf attempt deadline": {"attempt_timeout": math.inf},
    "NaN decrease": {"throttle_decrease": math.nan},
    "zero recovery": {"recovery_per_slot": 0},
    "NaN recovery": {"recovery_per_slot": math.nan},
}


@pytest.mark.parametrize("kwargs", BAD_RETRY.values(), ids=BAD_RETRY.keys())
def test_bad_retry_fields_are_config_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"retry\."):
        RetryConfig(**kwargs)


def test_credentials_in_the_endpoint_url_are_refused_and_never_echoed() -> None:
    with pytest.raises(ConfigError, match="credentials") as info:
        EngineConfig(endpoint_url="https://AKIDLEAK:s3cr3tLEAK@store.example:9000/")
    assert "AKIDLEAK" not in str(info.value) and "s3cr3tLEAK" not in str(info.value)


def test_good_configs_pass() -> None:
    EngineConfig(endpoint_url="http://127.0.0.1:9000", region="us-east-1")
    EngineConfig(endpoint_url="https://[::1]:443/base", region="eu-west-3", read_timeout=1)
    EngineConfig(ca_bundle="/etc/ssl/ca.pem", retry=RetryConfig(max_elapsed=1))


# -- answers without the fields S3 always sends -------------------------------------------
@pytest.mark.parametrize(
    ("operation", "resp"),
    [
        ("PutObject", {}),
        ("UploadPart", {"ETag": ""}),
        ("UploadPart", {"ETag": '""'}),
        ("CreateMultipartUpload", {"ResponseMetadata": {}}),
        ("CreateMultipartUpload", {"UploadId": None}),
        ("CompleteMultipartUpload", {"ResponseMetadata": {}}),
        ("CompleteMultipartUpload", {"ETag": None}),
        ("PutObject", None),
    ],
)
def test_a_success_without_the_field_is_a_bad_answer(operation: str, resp: Any) -> None:
    with pytest.raises(BadAnswer, match="http://h:9000") as info:
        require(resp, operation, endpoint="http://h:9000", bucket="zr-b", key="k")
    assert info.value.operation == operation and classify(info.value) is FailureKind.FATAL


def test_a_success_with_the_field_is_its_value() -> None:
    assert require({"ETag": '"e"'}, "PutObject", endpoint="e", bucket="b", key="k") == '"e"'
    assert require({"UploadId": "u"}, "CreateMultipartUpload", endpoint="", bucket="", key="")
    # Ceph RGW completes with <ETag></ETag>: the result is there, its ETag empty
    done = {"Bucket": "b", "Key": "k", "ETag": ""}
    assert require(done, "CompleteMultipartUpload", endpoint="", bucket="b", key="k") == ""
    assert (
        require({"Location": "x"}, "CompleteMultipartUpload", endpoint="", bucket="", key="") == ""
    )


def test_the_endpoint_in_messages_is_scheme_and_host_only() -> None:
    class Meta:
        endpoint_url = "https://user:pw@store.example:9443/base?x=1"

    class Client:
        meta = Meta()

    assert endpoint_of(Client()) == "https://store.example:9443"


# -- certificate failures are not retried ------------------------------------------------
def _cert_error() -> ssl.SSLCertVerificationError:
    err = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] self-signed")
    err.verify_message = "self-signed certificate"
    return err


def _aiohttp_cert_error() -> aiohttp.ClientConnectorCertificateError:
    key = ConnectionKey("store.example", 443, True, True, None, None, None, None)
    return aiohttp.ClientConnectorCertificateError(key, _cert_error())


@pytest.mark.parametrize(
    "make",
    [
        _cert_error,
        _aiohttp_cert_error,
        # the botocore path: aiobotocore wraps the aiohttp error
        lambda: bexc.SSLError(
            endpoint_url="https://store.example/b/k?uploadId=u", error=_aiohttp_cert_error()
        ),
        # the fast path's mapping of the aiohttp error
        lambda: connection_error(_aiohttp_cert_error(), "https://store.example/b/k?uploadId=u"),
    ],
    ids=["ssl", "aiohttp", "botocore", "fastpath"],
)
def test_certificate_failures_are_fatal_and_say_how_to_pass_a_ca(make: Any) -> None:
    exc = make()
    assert certificate_failure(exc) is not None
    assert classify(exc) is FailureKind.FATAL
    err = translate(exc, "PutObject", "zr-b", "k")
    assert isinstance(err, CertificateError)
    assert "AWS_CA_BUNDLE" in str(err) and "ca_bundle" in str(err)
    assert "uploadId" not in str(err)


def test_other_tls_and_connection_errors_stay_transient() -> None:
    other = bexc.SSLError(endpoint_url="https://h/", error=ssl.SSLError(1, "record overflow"))
    assert certificate_failure(other) is None
    assert classify(other) is FailureKind.TRANSIENT
    reset = bexc.EndpointConnectionError(endpoint_url="https://h/")
    assert classify(reset) is FailureKind.TRANSIENT
