"""Trailing checksums (engine/wire/trailer.py), with botocore as the oracle: the aws-chunked
framing is what botocore's AwsChunkedWrapper produces for the same bytes, and an
UploadPart sent with a trailer carries the headers and the signature botocore sends (its
request captured with a ``before-send`` handler: no server). Also the pure decisions:
when a trailer is wanted, which answers are refusals."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import botocore.session
import crc32c
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum, Sha256Checksum
from hypothesis import given, settings
from hypothesis import strategies as st

from zerorename.engine.bodies.filebody import WRITE, PartFile
from zerorename.engine.checksums import PARAM, compute
from zerorename.engine.errors import BadAnswer
from zerorename.engine.wire.answers import require_checksum
from zerorename.engine.wire.fastpath import (
    UNSIGNED_PAYLOAD,
    build_request,
    op_spec,
    signed_headers,
    target_for,
)
from zerorename.engine.wire.trailer import (
    CHUNK,
    STREAMING_TRAILER,
    TrailerBody,
    TrailerPayload,
    confirms,
    encoded_length,
    final_chunk,
    header_name,
    refused,
    wanted,
)

AK, SK = "AKIDEXAMPLETRAILER01", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class _Crc32cChecksum:
    """botocore's checksum interface over the crc32c package (botocore's own CRC32C
    class needs awscrt, which is not installed here)."""

    def __init__(self) -> None:
        self._crc = 0

    def update(self, chunk: bytes) -> None:
        self._crc = crc32c.crc32c(chunk, self._crc)

    def b64digest(self) -> str:
        return base64.b64encode(self._crc.to_bytes(4, "big")).decode()


ORACLE_CLS: dict[str, Any] = {
    "CRC32": Crc32Checksum,
    "CRC32C": _Crc32cChecksum,
    "SHA256": Sha256Checksum,
}


def oracle(data: bytes, algorithm: str, chunk: int = CHUNK) -> bytes:
    """botocore's aws-chunked encoding of ``data`` with a trailing checksum."""
    wrapper = AwsChunkedWrapper(
        io.BytesIO(data),
        checksum_cls=ORACLE_CLS[algorithm],
        checksum_name=header_name(algorithm),
        chunk_size=chunk,
    )
    out: bytes = wrapper.read()
    return out


def ours(body: TrailerBody) -> bytes:
    return b"".join(bytes(piece) for piece in body.frames())


# ------------------------------------------------------------------ framing


@pytest.mark.parametrize("algorithm", ["CRC32C", "CRC32", "SHA256"])
@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 12345])
def test_framing_is_botocores(algorithm: str, size: int) -> None:
    data = os.urandom(size)
    body = TrailerBody(data, algorithm)
    assert body.checksum is None  # nothing sent yet
    encoded = ours(body)
    assert encoded == oracle(data, algorithm)
    assert len(encoded) == body.encoded_length == encoded_length(size, algorithm)
    assert body.checksum == compute(algorithm, data)
    assert len(body) == size


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=3000),
    chunk=st.integers(min_value=1, max_value=1100),
    algorithm=st.sampled_from(["CRC32C", "CRC32", "SHA256"]),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_any_bytes_any_chunk_size_frame_like_botocore(
    data: bytes, chunk: int, algorithm: str, kind: type
) -> None:
    body = TrailerBody(kind(data), algorithm, chunk)
    encoded = ours(body)
    assert encoded == oracle(data, algorithm, chunk)
    assert len(encoded) == body.encoded_length
    assert body.checksum == compute(algorithm, data)


def test_a_file_range_frames_like_its_bytes(tmp_path: Path) -> None:
    """A file range is read as exact chunks (fresh preads) and frames like its bytes."""
    data = os.urandom(2 * CHUNK + 777)
    path = tmp_path / "f.bin"
    path.write_bytes(b"head" + data + b"tail")
    fd = os.open(path, os.O_RDONLY)
    try:
        file = PartFile(fd, 4, len(data))
        body = TrailerBody(file.range(0, len(data)), "CRC32C")
        assert ours(body) == oracle(data, "CRC32C")
        assert body.checksum == compute("CRC32C", data)
        blocks = list(file.range(0, len(data)).exact_blocks(1000))
        assert b"".join(blocks) == data
        assert {len(b) for b in blocks[:-1]} == {1000} and len(blocks[-1]) == len(data) % 1000
    finally:
        os.close(fd)


class _Writer:
    """What aiohttp's StreamWriter offers a payload: ``write(chunk, drain=...)``."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.writes: list[tuple[int, bool, bool]] = []  # (length, drained, a view)

    async def write(self, chunk: Any, *, drain: bool = True) -> None:
        self.pieces.append(bytes(chunk))
        self.writes.append((len(chunk), drain, isinstance(chunk, memoryview)))


async def test_the_payload_writes_chunks_in_bounded_writes_and_can_write_again() -> None:
    """Each chunk's data goes out as views of it (no copy) of at most WRITE bytes, each
    drained (a TLS connection holds about two writes: 1 MiB writes held ~3 MiB each), the
    framing as small undrained writes beside it; a second write is a fresh, equal pass."""
    data = os.urandom(3 * CHUNK + 5)
    body = TrailerBody(data, "CRC32C")
    payload = TrailerPayload(body)
    assert payload.size == body.encoded_length
    assert CHUNK % WRITE == 0
    for _ in range(2):
        writer = _Writer()
        await payload.write(writer)
        assert b"".join(writer.pieces) == oracle(data, "CRC32C")
        framing = [n for n, drained, _ in writer.writes if not drained]
        assert len(framing) == 5 and max(framing) < 64  # 4 chunk heads, the trailer
        data_writes = [(n, view) for n, drained, view in writer.writes if drained]
        assert data_writes == [(WRITE, True)] * (3 * CHUNK // WRITE) + [(5, True)]
        assert body.checksum == compute("CRC32C", data)


def test_unknown_algorithms_are_refused() -> None:
    with pytest.raises(ValueError, match="MD5"):
        TrailerBody(b"x", "MD5")
    with pytest.raises(ValueError, match="none"):
        header_name("none")


# ------------------------------------------------------------------ the request


def _botocore_trailer_request(data: bytes, algorithm: str) -> Any:
    """The UploadPart request botocore sends over HTTPS with a trailing checksum."""
    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url="https://127.0.0.1:9443",
        region_name="us-east-1",
        aws_access_key_id=AK,
        aws_secret_access_key=SK,
        config=Config(
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_supported",
            retries={"total_max_attempts": 1, "mode": "standard"},
        ),
    )
    sent: list[Any] = []

    class _Raw:
        def stream(self, **kwargs: Any) -> Any:
            yield b""

    def before_send(request: Any, **kwargs: Any) -> AWSResponse:
        sent.append(request)
        return AWSResponse(request.url, 200, {"ETag": '"e"'}, _Raw())

    client.meta.events.register("before-send.s3", before_send)
    client.upload_part(
        Bucket="bkt",
        Key="dir/a part.bin",
        UploadId="up/1+2",
        PartNumber=3,
        Body=data,
        ChecksumAlgorithm=algorithm,
    )
    client.close()
    return sent[0]


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA256"])  # botocore's CRC32C needs awscrt
def test_an_upload_part_with_a_trailer_is_botocores(algorithm: str) -> None:
    """Same trailer headers, same signature (same signed headers), same encoded body."""
    data = os.urandom(CHUNK + 1000)
    theirs = _botocore_trailer_request(data, algorithm)
    their_headers = {k.lower(): v.decode() for k, v in theirs.headers.items()}
    target = target_for("https://127.0.0.1:9443/bkt/zr-probe", "us-east-1")
    assert target is not None
    model = botocore.session.get_session().get_service_model("s3")
    spec = op_spec(model.operation_model("UploadPart"))
    params = {"Bucket": "bkt", "Key": "dir/a part.bin", "UploadId": "up/1+2", "PartNumber": 3}
    body = TrailerBody(data, algorithm)
    request = build_request(spec, target, {**params, "Body": body, "ContentLength": len(data)})
    assert request is not None
    assert request.payload_hash == STREAMING_TRAILER
    assert request.length == body.encoded_length
    sent = signed_headers(target, request, AK, SK, None, their_headers["x-amz-date"])
    for name in (
        "content-encoding",
        "x-amz-trailer",
        "x-amz-decoded-content-length",
        "x-amz-sdk-checksum-algorithm",
        "x-amz-content-sha256",
        "authorization",
    ):
        assert {k.lower(): v for k, v in sent.items()}[name] == their_headers[name], name
    assert sent["Content-Length"] == str(len(ours(body)))
    assert ours(body) == theirs.body.read()


def test_a_trailer_body_with_a_checksum_value_or_a_wrong_length_goes_to_botocore() -> None:
    target = target_for("https://127.0.0.1:9443/bkt/zr-probe", "us-east-1")
    assert target is not None
    model = botocore.session.get_session().get_service_model("s3")
    spec = op_spec(model.operation_model("UploadPart"))
    body = TrailerBody(b"abc", "CRC32C")
    base = {"Bucket": "bkt", "Key": "k", "UploadId": "u", "PartNumber": 1, "Body": body}
    assert build_request(spec, target, {**base, PARAM["CRC32C"]: "AAAAAA=="}) is None
    assert build_request(spec, target, {**base, "ContentLength": 4}) is None
    plain = build_request(spec, target, {**base, "Body": b"abc", "ContentLength": 3})
    assert plain is not None and plain.payload_hash == UNSIGNED_PAYLOAD
    assert "content-encoding" not in plain.headers


# ------------------------------------------------------------------ decisions


@pytest.mark.parametrize(
    ("mode", "scheme", "algorithm", "size", "expected"),
    [
        ("auto", "https", "CRC32C", 1, True),
        ("auto", "http", "CRC32C", 1, False),  # plain HTTP keeps sendfile
        ("always", "http", "CRC32C", 1, True),
        ("never", "https", "CRC32C", 1, False),
        ("auto", "https", "none", 1, False),  # no checksum: nothing read twice
        ("always", "https", "SHA256", 1, True),
        ("always", "https", "CRC32C", 0, False),  # an empty body
    ],
)
def test_when_a_trailer_is_wanted(
    mode: str, scheme: str, algorithm: str, size: int, expected: bool
) -> None:
    assert wanted(mode, scheme, algorithm, size) is expected


@pytest.mark.parametrize(
    ("status", "code", "confirmed", "expected"),
    [
        (400, "XAmzContentSHA256Mismatch", False, True),  # Ceph RGW pacific
        (400, "XAmzContentSHA256Mismatch", True, True),
        (501, "NotImplemented", True, True),
        (501, "", False, True),
        (400, "InvalidRequest", False, True),  # unknown store: decided by the re-send
        (403, "SignatureDoesNotMatch", False, True),
        (400, "InvalidRequest", True, False),  # the endpoint took trailers before
        (403, "AccessDenied", True, False),
        (404, "NoSuchUpload", False, False),  # about the target, not the encoding
        (412, "PreconditionFailed", False, False),
        (429, "SlowDown", False, False),
        (500, "InternalError", False, False),
        (503, "SlowDown", False, False),
    ],
)
def test_which_answers_refuse_trailers(
    status: int, code: str, confirmed: bool, expected: bool
) -> None:
    assert refused(status, code, confirmed=confirmed) is expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"ETag": '"e"', "ChecksumCRC32C": "AAAAAA=="}, True),
        ({"ETag": '"e"'}, False),  # no echo: not known to have decoded aws-chunked
        ({"ETag": '"e"', "ChecksumCRC32C": "BBBBBB=="}, False),
        ({"ETag": '"e"', "ChecksumCRC32": "AAAAAA=="}, False),  # another algorithm's
    ],
)
def test_what_confirms_a_trailing_checksum(answer: dict[str, str], expected: bool) -> None:
    assert confirms(answer, "CRC32C", "AAAAAA==") is expected
    assert confirms(answer, "CRC32C", None) is False  # nothing was sent whole


def test_an_answer_confirming_another_checksum_is_bad_answer() -> None:
    """Either send path: a checksum the store confirms must be the one computed over the
    bytes sent; none confirmed is no contradiction (RGW pacific ignores checksums)."""
    where = {"endpoint": "https://s3.example", "bucket": "bkt", "key": "k"}
    require_checksum({"ETag": '"e"'}, "UploadPart", "ChecksumCRC32C", "AAAAAA==", **where)
    require_checksum(
        {"ChecksumCRC32C": "AAAAAA=="}, "UploadPart", "ChecksumCRC32C", "AAAAAA==", **where
    )
    with pytest.raises(BadAnswer, match=r"https://s3\.example confirmed checksum 'BBBBBB=='"):
        require_checksum(
            {"ChecksumCRC32C": "BBBBBB=="}, "UploadPart", "ChecksumCRC32C", "AAAAAA==", **where
        )


@pytest.mark.parametrize(
    ("algorithm", "check"),
    [("CRC32C", 0xE3069283), ("CRC32", 0xCBF43926)],  # the standard check values
)
def test_checksums_of_the_check_string(algorithm: str, check: int) -> None:
    expected = base64.b64encode(check.to_bytes(4, "big")).decode()
    assert compute(algorithm, b"123456789") == expected
    body = TrailerBody(b"123456789", algorithm, chunk=4)
    assert final_chunk(header_name(algorithm), expected) in ours(body)
    assert body.checksum == expected
