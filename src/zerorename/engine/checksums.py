"""Per-part checksums as S3 expects them: base64 of the big-endian CRC, or of SHA-256."""

from __future__ import annotations

import base64
import hashlib
import zlib

import crc32c as _crc32c

#: the request parameter that carries each algorithm's value.
PARAM = {"CRC32": "ChecksumCRC32", "CRC32C": "ChecksumCRC32C", "SHA256": "ChecksumSHA256"}


def compute(algorithm: str, data: bytes | bytearray | memoryview) -> str | None:
    """Checksum of ``data`` for ``algorithm`` (None for 'none')."""
    if algorithm == "none":
        return None
    if algorithm == "CRC32C":
        raw = (_crc32c.crc32c(data) & 0xFFFFFFFF).to_bytes(4, "big")
    elif algorithm == "CRC32":
        raw = (zlib.crc32(data) & 0xFFFFFFFF).to_bytes(4, "big")
    elif algorithm == "SHA256":
        raw = hashlib.sha256(data).digest()
    else:
        raise ValueError(f"unknown checksum algorithm {algorithm!r}")
    return base64.b64encode(raw).decode("ascii")
