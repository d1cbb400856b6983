"""Typed progress events and the callback type that receives them.

Callbacks may be plain functions or coroutine functions; the engine awaits the latter.
Exceptions raised by a callback are logged and never break an upload.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("zerorename.engine")


@dataclass(frozen=True)
class BytesSent:
    """``delta`` bytes handed to the network for ``key``; negative when an attempt
    failed and its bytes are rolled back before the retry."""

    bucket: str
    key: str
    delta: int
    rollback: bool = False


@dataclass(frozen=True)
class PartDone:
    bucket: str
    key: str
    number: int
    size: int


@dataclass(frozen=True)
class UploadCompleted:
    bucket: str
    key: str
    length: int
    parts: int


@dataclass(frozen=True)
class UploadDeferred:
    bucket: str
    key: str
    upload_id: str
    length: int
    parts: int


@dataclass(frozen=True)
class UploadAborted:
    bucket: str
    key: str
    upload_id: str
    reason: str


@dataclass(frozen=True)
class RetryScheduled:
    operation: str
    key: str
    attempt: int
    delay: float
    kind: str
    error: str


@dataclass(frozen=True)
class Throttled:
    operation: str
    key: str
    code: str


@dataclass(frozen=True)
class ConcurrencyChanged:
    old: int
    new: int
    reason: str


Event = (
    BytesSent
    | PartDone
    | UploadCompleted
    | UploadDeferred
    | UploadAborted
    | RetryScheduled
    | Throttled
    | ConcurrencyChanged
)

ProgressCallback = Callable[[Event], Awaitable[None] | None]


async def emit(callback: ProgressCallback | None, event: Event) -> None:
    """Deliver ``event`` to ``callback`` (sync or async); never raises."""
    if callback is None:
        return
    try:
        result = callback(event)
        if inspect.isawaitable(result):
            await result
    except Exception:  # a broken progress bar must not break an upload
        log.exception("progress callback raised on %s", type(event).__name__)
