"""Trailing checksums: a part read once where sendfile cannot be used (HTTPS).

With the checksum in a header a part is read twice: once to checksum it, once to send it
through the TLS transport. Sent ``aws-chunked`` with the checksum in a trailer
(``x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER``, as boto3 does by default
since 1.36), the checksum is computed over the very blocks being written. The framing is
botocore's ``AwsChunkedWrapper``'s -- ``hex-size CRLF data CRLF`` per chunk, then
``0 CRLF name:value CRLF CRLF`` -- with chunks of a fixed size, so the encoded length is
known before sending and goes in Content-Length (no HTTP chunking on top).

A store that refuses trailers (Ceph RGW pacific: 400 XAmzContentSHA256Mismatch) or does
not confirm the checksum in its answer gets the part again the two-pass way; the
:class:`FastClient <zerorename.engine.wire.client.FastClient>` remembers that per endpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp.payload

from zerorename.engine.bodies.filebody import BLOCK, WRITE, FileRange
from zerorename.engine.checksums import PARAM, Running

#: the payload hash (x-amz-content-sha256) that announces an unsigned body with a trailer
STREAMING_TRAILER = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
#: bytes of data per aws-chunked chunk (botocore's default; one ``pread`` each)
CHUNK = BLOCK
#: answers that always mean "no trailers here", whatever the endpoint did before
REFUSAL_CODES = frozenset({"XAmzContentSHA256Mismatch", "NotImplemented"})
# 4xx answers that are about the request's target or timing, never about its encoding
_NOT_REFUSALS = frozenset({404, 408, 409, 412, 429})
_CRLF = b"\r\n"


# -- decisions and framing (pure) -------------------------------------------------------
def header_name(algorithm: str) -> str:
    """The trailer's header name for a checksum algorithm (``x-amz-checksum-crc32c``)."""
    if algorithm not in PARAM:
        raise ValueError(f"no trailing checksum for algorithm {algorithm!r}")
    return f"x-amz-checksum-{algorithm.lower()}"


def chunk_head(size: int) -> bytes:
    """The line that opens a chunk of ``size`` bytes: lower-case hex and CRLF."""
    return b"%x\r\n" % size


def final_chunk(name: str, value: str) -> bytes:
    """The last (empty) chunk and the trailer: ``0 CRLF name:value CRLF CRLF``."""
    return b"0\r\n%s:%s\r\n\r\n" % (name.encode("ascii"), value.encode("ascii"))


def chunk_sizes(length: int, chunk: int = CHUNK) -> Iterator[int]:
    """The data sizes of the chunks of a ``length``-byte body (the last may be short)."""
    full, rest = divmod(length, chunk)
    for _ in range(full):
        yield chunk
    if rest:
        yield rest


def _value_length(algorithm: str) -> int:
    return 44 if algorithm == "SHA256" else 8  # base64 of 32 bytes / of 4 bytes


def encoded_length(length: int, algorithm: str, chunk: int = CHUNK) -> int:
    """Content-Length of the aws-chunked encoding of a ``length``-byte body."""
    framing = sum(len(chunk_head(n)) + n + 2 for n in chunk_sizes(length, chunk))
    return framing + 3 + len(header_name(algorithm)) + 1 + _value_length(algorithm) + 4


def request_headers(algorithm: str, length: int) -> dict[str, str]:
    """The headers (lower-case names, all signed) that announce a trailing checksum over
    a body of ``length`` decoded bytes."""
    return {
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": str(length),
        "x-amz-sdk-checksum-algorithm": algorithm,
        "x-amz-trailer": header_name(algorithm),
    }


def wanted(mode: str, scheme: str, algorithm: str, size: int) -> bool:
    """Whether a body goes out with a trailing checksum: not with ``never`` or without a
    checksum (nothing to read twice), nor for an empty body; always with ``always``;
    with ``auto`` over HTTPS only (over plain HTTP sendfile sends a file part with no
    read in this process, so its one checksum pass is the only one)."""
    if mode == "never" or algorithm == "none" or size <= 0:
        return False
    return mode == "always" or scheme == "https"


def refused(status: int, code: str, *, confirmed: bool) -> bool:
    """Whether an error answer to a trailer request says the store takes no trailers.
    :data:`REFUSAL_CODES` and 501 always do; before the endpoint has confirmed a trailer,
    so does any other 4xx but those about the target or timing (404, 408, 409, 412, 429):
    the part is then sent the two-pass way, which fails the same if the trailer was not
    the cause."""
    if code in REFUSAL_CODES or status == 501:
        return True
    return not confirmed and 400 <= status < 500 and status not in _NOT_REFUSALS


def confirms(answer: Mapping[str, Any], algorithm: str, checksum: str | None) -> bool:
    """Whether a store's answer to a trailer request confirms the checksum of the bytes
    sent (AWS and moto echo it). One that does not may not have decoded aws-chunked at
    all (it would hold the framing as data): such a store gets parts the two-pass way."""
    return checksum is not None and answer.get(PARAM[algorithm]) == checksum


# -- the body ----------------------------------------------------------------------------
class TrailerBody:
    """A part's bytes (a file range or a buffer) to send aws-chunked with a trailing
    checksum. Sized by its decoded length; :attr:`checksum` is the checksum of the bytes
    of the last complete write (None before one)."""

    __slots__ = ("algorithm", "body", "checksum", "chunk", "length")

    def __init__(
        self,
        body: FileRange | bytes | bytearray | memoryview,
        algorithm: str,
        chunk: int = CHUNK,
    ) -> None:
        header_name(algorithm)  # a known algorithm
        self.body: FileRange | memoryview
        if isinstance(body, FileRange):
            self.body, self.length = body, body.length
        else:
            view = memoryview(body).cast("B")
            self.body, self.length = view, view.nbytes
        self.algorithm = algorithm
        self.chunk = chunk
        self.checksum: str | None = None

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"TrailerBody({self.body!r}, {self.algorithm})"

    @property
    def encoded_length(self) -> int:
        return encoded_length(self.length, self.algorithm, self.chunk)

    def chunks(self) -> Iterator[bytes | memoryview]:
        """The data of each chunk, exactly :func:`chunk_sizes` long: fresh ``pread``
        blocks of a file range, slices of a buffer (no copy)."""
        body = self.body
        if isinstance(body, FileRange):
            yield from body.exact_blocks(self.chunk)
        else:
            for start in range(0, self.length, self.chunk):
                yield body[start : start + self.chunk]

    def frames(self) -> Iterator[bytes | memoryview]:
        """The encoded body as the pieces written: chunk data, and between them the
        framing (the previous chunk's CRLF and the next chunk's size line in one piece),
        the trailer last. Sets :attr:`checksum` when the last piece is produced."""
        self.checksum = None
        running = Running(self.algorithm)
        lead = b""
        for data in self.chunks():
            yield lead + chunk_head(len(data))
            running.update(data)
            yield data
            lead = _CRLF
        value = running.b64digest()
        self.checksum = value
        yield lead + final_chunk(header_name(self.algorithm), value)


class TrailerPayload(aiohttp.payload.Payload):
    """A :class:`TrailerBody` as an aiohttp request body: each chunk written as it is
    read and checksummed, in writes of :data:`WRITE <zerorename.engine.bodies.filebody.WRITE>`
    bytes (the TLS layer cuts them into records), the framing as small writes beside it.
    Writing can be repeated (a fresh pass)."""

    _autoclose = True  # nothing to close: the file belongs to the upload

    def __init__(self, body: TrailerBody) -> None:
        super().__init__(body)
        self._body = body
        self._size = body.encoded_length

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        raise TypeError("an aws-chunked part is a binary body")

    async def write(self, writer: Any) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        for n, piece in enumerate(self._body.frames()):
            if n % 2 == 0:  # framing is tiny: drained with the chunk data after it
                await writer.write(piece, drain=False)
                continue
            view = memoryview(piece)
            for start in range(0, len(view), WRITE):  # a TLS connection holds ~2 writes
                await writer.write(view[start : start + WRITE])
            # a drain returns at once while the transport is not paused: a turn of the loop
            # lets a reset close the transport before the next chunk is written (else the
            # rest of the part is written into a dead connection)
            await asyncio.sleep(0)


__all__ = [
    "CHUNK",
    "REFUSAL_CODES",
    "STREAMING_TRAILER",
    "TrailerBody",
    "TrailerPayload",
    "chunk_head",
    "chunk_sizes",
    "confirms",
    "encoded_length",
    "final_chunk",
    "header_name",
    "refused",
    "request_headers",
    "wanted",
]
