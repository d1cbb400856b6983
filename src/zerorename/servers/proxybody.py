"""The fault proxy's reading of message bodies and its connection resets (asyncio streams;
see :mod:`zerorename.servers.faultproxy`)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Awaitable, Callable

CHUNK = 64 * 1024


class Reset(Exception):
    """Abort the client connection with an RST now."""


class ClientGone(Exception):
    """The client closed the connection (between or during requests)."""


Sink = Callable[[bytes], Awaitable[None]]


async def discard(_: bytes) -> None:
    """A sink that drops what it is given."""
    return None


class Body:
    """Reads one message body from ``reader`` into ``sink``; counts payload bytes and raises
    :class:`Reset` once ``reset_after`` of them were read."""

    def __init__(self, reader: asyncio.StreamReader, reset_after: int | None = None) -> None:
        self.reader = reader
        self.reset_after = reset_after
        self.count = 0

    def _budget(self, want: int) -> int:
        if self.reset_after is None:
            return want
        left = self.reset_after - self.count
        if left <= 0:
            raise Reset
        return min(want, left)

    async def _exact(self, n: int, sink: Sink) -> None:
        while n > 0:
            data = await self.reader.read(self._budget(min(n, CHUNK)))
            if not data:
                raise ClientGone
            self.count += len(data)
            n -= len(data)
            await sink(data)
        if self.reset_after is not None and self.count >= self.reset_after:
            raise Reset

    async def sized(self, length: int, sink: Sink) -> None:
        if self.reset_after == 0:
            raise Reset
        await self._exact(length, sink)

    async def chunked(self, sink: Sink) -> None:
        if self.reset_after == 0:
            raise Reset
        while True:
            line = await self._line()
            await sink(line)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers end with an empty line
                    trailer = await self._line()
                    await sink(trailer)
                    if trailer == b"\r\n":
                        return
            await self._exact(size, sink)
            await sink(await self._line())

    async def until_eof(self, sink: Sink) -> None:
        while data := await self.reader.read(CHUNK):
            self.count += len(data)
            await sink(data)

    async def _line(self) -> bytes:
        try:
            return await self.reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as exc:
            raise ClientGone from exc


def rst(writer: asyncio.StreamWriter) -> None:
    """Abort ``writer``'s connection with a TCP RST (no FIN: the peer sees a reset)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


__all__ = ["CHUNK", "Body", "ClientGone", "Reset", "Sink", "discard", "rst"]
