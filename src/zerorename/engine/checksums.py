"""Per-part checksums as S3 expects them: base64 of the big-endian CRC, or of SHA-256."""

from __future__ import annotations

import base64
import hashlib
import zlib
from collections.abc import Iterable

import crc32c as _crc32c

#: the request parameter that carries each algorithm's value.
PARAM = {"CRC32": "ChecksumCRC32", "CRC32C": "ChecksumCRC32C", "SHA256": "ChecksumSHA256"}

Data = bytes | bytearray | memoryview


def compute(algorithm: str, data: Data) -> str | None:
    """Checksum of ``data`` for ``algorithm`` (None for 'none')."""
    return compute_blocks(algorithm, (data,))


def compute_blocks(algorithm: str, blocks: Iterable[Data]) -> str | None:
    """Checksum of the concatenation of ``blocks`` for ``algorithm`` (None for 'none')."""
    if algorithm == "none":
        return None
    if algorithm in ("CRC32C", "CRC32"):
        update = _crc32c.crc32c if algorithm == "CRC32C" else zlib.crc32
        crc = 0
        for block in blocks:
            crc = update(block, crc)
        raw = (crc & 0xFFFFFFFF).to_bytes(4, "big")
    elif algorithm == "SHA256":
        digest = hashlib.sha256()
        for block in blocks:
            digest.update(block)
        raw = digest.digest()
    else:
        raise ValueError(f"unknown checksum algorithm {algorithm!r}")
    return base64.b64encode(raw).decode("ascii")
