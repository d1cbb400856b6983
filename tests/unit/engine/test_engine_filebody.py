"""File parts read where they lie (filebody.py) and streamed checksums: no loop, no server
(local files only)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import random
import tempfile
import zlib
from pathlib import Path

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerorename.engine.bodies import filebody
from zerorename.engine.bodies.filebody import BLOCK, PartFile, _is_plain_file_object
from zerorename.engine.bodies.sources import file_parts
from zerorename.engine.checksums import compute_blocks
from zerorename.engine.errors import PlanError, SourceChanged
from zerorename.units import MiB


def reference(algorithm: str, data: bytes) -> str | None:
    """The S3 checksum header value of ``data`` by an implementation independent of the
    engine's: crc32c, zlib and hashlib, base64 of the big-endian digest."""
    if algorithm == "none":
        return None
    if algorithm == "SHA256":
        digest = hashlib.sha256(data).digest()
    else:
        crc = crc32c.crc32c(data) if algorithm == "CRC32C" else zlib.crc32(data)
        digest = crc.to_bytes(4, "big")
    return base64.b64encode(digest).decode()


def compute(algorithm: str, data: bytes) -> str | None:
    return compute_blocks(algorithm, (data,))


@pytest.mark.parametrize("algorithm", ["CRC32C", "CRC32", "SHA256", "none"])
def test_checksum_of_blocks_is_the_checksum_of_their_concatenation(algorithm: str) -> None:
    rng = random.Random(algorithm)
    data = rng.randbytes(3 * MiB + 17)
    cuts = sorted(rng.sample(range(1, len(data)), 9))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    assert compute_blocks(algorithm, pieces) == reference(algorithm, data)
    assert compute_blocks(algorithm, [memoryview(p) for p in pieces]) == reference(algorithm, data)
    assert compute_blocks(algorithm, []) == reference(algorithm, b"")


def test_known_checksum_values() -> None:
    # CRC-32C and CRC-32 check values of "123456789", base64 of the big-endian CRC
    assert compute("CRC32C", b"123456789") == "4waSgw=="
    assert compute("CRC32", b"123456789") == "y/Q5Jg=="
    # SHA-256("abc") from FIPS 180-2, base64
    assert compute("SHA256", b"abc") == "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
    with pytest.raises(ValueError, match="unknown checksum"):
        compute("MD5", b"")


def _file(tmp_path: Path, size: int) -> tuple[Path, bytes]:
    data = random.Random(size).randbytes(size)
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    return path, data


def test_a_range_is_read_in_fresh_blocks(tmp_path: Path) -> None:
    path, data = _file(tmp_path, 3 * BLOCK + 50)
    fd = os.open(path, os.O_RDONLY)
    part_file = PartFile(fd, 10, len(data) - 10)
    try:
        rng = part_file.range(BLOCK - 3, 2 * BLOCK + 7)
        want = data[10 + BLOCK - 3 : 10 + 3 * BLOCK + 4]
        blocks = list(rng.blocks())
        assert [len(b) for b in blocks] == [BLOCK, BLOCK, 7]
        assert b"".join(blocks) == want and len(rng) == len(want)
        assert len({id(b) for b in blocks}) == 3  # never one buffer refilled
        assert b"".join(rng.blocks(BLOCK + 2)) == want[BLOCK + 2 :]
        assert rng.read_all() == want
        assert rng.checksum("CRC32C") == reference("CRC32C", want)
        rng.check()
    finally:
        part_file.close()
    with pytest.raises(OSError):
        os.fstat(fd)  # we opened it, so we closed it


def test_a_file_that_shrank_is_a_source_change(tmp_path: Path) -> None:
    path, data = _file(tmp_path, 2 * BLOCK)
    with open(path, "rb") as f:
        part_file = PartFile(f.fileno(), 0, len(data), owner=f)
        rng = part_file.range(BLOCK, BLOCK)
        os.truncate(path, BLOCK + 100)
        with pytest.raises(SourceChanged, match="shrank"):
            list(rng.blocks())
        with pytest.raises(SourceChanged):
            rng.read_all()
        with pytest.raises(SourceChanged):
            rng.check()
        assert isinstance(SourceChanged("x"), PlanError)  # callers catching PlanError see it
        part_file.range(0, BLOCK).check()  # what is still there is fine


def test_the_checksum_pass_refills_one_buffer(tmp_path: Path) -> None:
    """The checksum pass reads into one reused buffer of TLS_WRITE bytes (no fresh 1 MiB
    block per read in a worker thread); what it reads is exactly the range, and a shrunk
    file is refused."""
    path, data = _file(tmp_path, 3 * BLOCK + 50)
    with open(path, "rb") as f:
        part_file = PartFile(f.fileno(), 0, len(data), owner=f)
        rng = part_file.range(BLOCK - 3, 2 * BLOCK + 7)
        want = data[BLOCK - 3 : 3 * BLOCK + 4]
        views = []
        pieces = []
        for view in rng.reused_blocks():
            views.append(view)
            pieces.append(bytes(view))
        step = filebody.TLS_WRITE  # its buffer's size: 16 parts in flight hold 16 of them
        assert [len(p) for p in pieces] == [step] * (2 * BLOCK // step) + [7]
        assert b"".join(pieces) == want
        assert len({id(v.obj) for v in views}) == 1  # one buffer, refilled in place
        assert rng.checksum("SHA256") == reference("SHA256", want)
        assert list(part_file.range(0, 0).reused_blocks()) == []
        os.truncate(path, 2 * BLOCK)
        with pytest.raises(SourceChanged, match="shrank"):
            rng.checksum("CRC32C")


@settings(max_examples=40, deadline=None)
@given(offset=st.integers(0, 2 * BLOCK + 40), length=st.integers(0, BLOCK + 60))
def test_the_checksum_pass_reads_any_range_exactly(offset: int, length: int) -> None:
    data = _DATA[: 3 * BLOCK + 100]
    length = min(length, len(data) - offset)
    fd = os.open(_data_file(data), os.O_RDONLY)
    try:
        rng = PartFile(fd, 0, len(data)).range(offset, length)
        assert b"".join(bytes(v) for v in rng.reused_blocks()) == data[offset : offset + length]
        assert rng.checksum("CRC32C") == reference("CRC32C", data[offset : offset + length])
    finally:
        os.close(fd)


_DATA = random.Random(7).randbytes(3 * BLOCK + 100)


def _data_file(data: bytes) -> Path:
    """One file of ``data`` for the property test (hypothesis runs without tmp_path)."""
    path = Path(tempfile.gettempdir()) / f"zr-filebody-{os.getpid()}.bin"
    if not path.exists() or path.stat().st_size != len(data):
        path.write_bytes(data)
    return path


def test_a_callers_file_is_left_open_after_the_uploaded_bytes(tmp_path: Path) -> None:
    path, _ = _file(tmp_path, 100)
    with open(path, "rb") as f:
        f.seek(30)
        part_file = PartFile(f.fileno(), 30, 70, owner=f)
        part_file.close(success=False)
        assert f.tell() == 30  # a failed upload does not move it
        part_file = PartFile(f.fileno(), 30, 70, owner=f)
        part_file.close(success=True)
        part_file.close(success=True)  # twice is safe
        assert f.tell() == 100 and f.read() == b""
        assert not f.closed


def test_only_plain_files_are_read_by_descriptor(tmp_path: Path) -> None:
    path, _ = _file(tmp_path, 10)
    gz = tmp_path / "data.gz"
    gz.write_bytes(gzip.compress(b"x" * 10))
    with open(path, "rb") as buffered, open(path, "rb", buffering=0) as raw:
        assert _is_plain_file_object(buffered) and _is_plain_file_object(raw)
    assert not _is_plain_file_object(buffered)  # closed
    with open(path, "r+b") as rw:
        assert _is_plain_file_object(rw)
    with open(path, "ab") as append_only:
        assert not _is_plain_file_object(append_only)  # not readable
    with gzip.open(gz, "rb") as unzipped:  # fileno() is the compressed file's
        assert not _is_plain_file_object(unzipped)
    assert not _is_plain_file_object(io.BufferedReader(io.BytesIO(b"abc")))  # type: ignore[arg-type]
    assert not _is_plain_file_object(io.BytesIO(b"abc"))


@pytest.mark.parametrize("crt", [False, True])
async def test_bodies_go_to_botocore_in_a_form_its_signer_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crt: bool
) -> None:
    """With awscrt installed botocore signs with the CRT, which takes a body only as bytes
    or a seekable file (a sliced body raised TypeError there): sliced bodies and file
    ranges are handed over whole then; without it, as they are; bytes always as they are."""
    monkeypatch.setattr(filebody, "_crt_signs", lambda: crt)
    data = os.urandom(3 * 1024 + 5)
    sliced = filebody.SlicedBody(bytearray(data), 1024)
    assert b"".join([bytes(v) async for v in sliced]) == data
    path = tmp_path / "f"
    path.write_bytes(b"xx" + data)
    file = await filebody.open_part_file(str(path), None)
    assert file is not None
    async with file:
        (rng,) = [p async for p in file_parts(file, part_size=5 * MiB)]
        got_range = await filebody.for_botocore(rng.body)
    got_sliced = await filebody.for_botocore(sliced)
    assert await filebody.for_botocore(data) is data
    if crt:
        assert bytes(got_sliced) == data and isinstance(got_sliced, memoryview)
        assert got_range == b"xx" + data
    else:
        assert got_sliced is sliced and got_range is rng.body


async def test_a_part_through_a_transport_is_read_in_small_writes(tmp_path: Path) -> None:
    """Where sendfile can't go (TLS), a part is read and written TLS_WRITE bytes at a time:
    a connection holds one such block, not a 1 MiB read, and the bytes are the range."""
    path, data = _file(tmp_path, 2 * BLOCK + 50)

    class Writer:  # what aiohttp hands a payload: only write() is used without sendfile
        def __init__(self) -> None:
            self.sizes: list[int] = []
            self.data = bytearray()

        async def write(self, chunk: bytes) -> None:
            self.sizes.append(len(chunk))
            self.data += chunk

    with open(path, "rb") as f:  # noqa: ASYNC230 (a test: a local file)
        part_file = PartFile(f.fileno(), 0, len(data), owner=f)
        payload = filebody.FilePayload(part_file.range(3, 2 * BLOCK), zero_copy=False, timeout=5)
        writer = Writer()
        await payload.write(writer)
    assert bytes(writer.data) == data[3 : 3 + 2 * BLOCK]
    assert max(writer.sizes) == filebody.TLS_WRITE
