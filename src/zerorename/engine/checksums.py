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


class Running:
    """A checksum computed block by block as the bytes go by (a trailing checksum is the
    checksum of exactly the blocks sent: one pass)."""

    __slots__ = ("_crc", "_sha", "_update", "algorithm")

    def __init__(self, algorithm: str) -> None:
        if algorithm not in PARAM:
            raise ValueError(f"unknown checksum algorithm {algorithm!r}")
        self.algorithm = algorithm
        self._crc = 0
        self._update = _crc32c.crc32c if algorithm == "CRC32C" else zlib.crc32
        self._sha = hashlib.sha256() if algorithm == "SHA256" else None

    def update(self, block: Data) -> None:
        if self._sha is not None:
            self._sha.update(block)
        else:
            self._crc = self._update(block, self._crc)

    def b64digest(self) -> str:
        """The value as S3 sends it: base64 of the big-endian CRC, or of the SHA-256."""
        raw = self._sha.digest() if self._sha is not None else self._crc.to_bytes(4, "big")
        return base64.b64encode(raw).decode("ascii")


def compute(algorithm: str, data: Data) -> str | None:
    """Checksum of ``data`` for ``algorithm`` (None for 'none')."""
    return compute_blocks(algorithm, (data,))


def compute_blocks(algorithm: str, blocks: Iterable[Data]) -> str | None:
    """Checksum of the concatenation of ``blocks`` for ``algorithm`` (None for 'none')."""
    if algorithm == "none":
        return None
    running = Running(algorithm)
    for block in blocks:
        running.update(block)
    return running.b64digest()
