"""Retries and throttling, in one place.

Every failure is classified as throttled, transient or fatal (:func:`classify`).
Throttled and transient failures are retried by tenacity with exponential backoff and
full jitter; fatal ones fail at once, translated into :mod:`zerorename.engine.errors`.
An :class:`AdaptiveLimiter` bounds requests in flight: it halves on throttling (once per
window, like TCP) and climbs back one slot at a time as requests succeed. botocore's
own retries are switched off (see wire/client.py) so attempts are never multiplied.
"""

from __future__ import annotations

import asyncio
import enum
import math
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import aiohttp
import botocore.exceptions as bexc
from botocore.parsers import ResponseParserError
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from zerorename.engine import errors
from zerorename.engine.config import RetryConfig
from zerorename.engine.events import (
    BytesSent,
    ConcurrencyChanged,
    Event,
    ProgressCallback,
    RetryScheduled,
    Throttled,
)

T = TypeVar("T")


class DeadlineExceeded(TimeoutError):
    """An attempt ran past ``retry.attempt_timeout`` (transient: retried like any timeout;
    once the budget is spent it becomes :class:`~zerorename.engine.errors.RetriesExhausted`
    with code ``DeadlineExceeded``)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"an attempt took longer than its deadline of {seconds:g} s")
        self.seconds = seconds


class FailureKind(enum.Enum):
    THROTTLED = "throttled"
    TRANSIENT = "transient"
    FATAL = "fatal"


THROTTLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestLimitExceeded",
        "TooManyRequests",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "BandwidthLimitExceeded",
    }
)
TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "RequestTimeoutException",
        "OperationAborted",
        "PriorRequestNotComplete",
        "IDPCommunicationError",
    }
)
AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "AllAccessDisabled",
        "AccountProblem",
    }
)


def error_code(exc: BaseException) -> tuple[str, int | None]:
    """S3 error code and HTTP status of a botocore ClientError (else a short name)."""
    if isinstance(exc, bexc.ClientError):
        err = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        status = meta.get("HTTPStatusCode")
        code = str(err.get("Code") or "")
        if not code and status is not None:
            code = str(status)
        return code, int(status) if status is not None else None
    return type(exc).__name__, None


def certificate_failure(exc: BaseException) -> BaseException | None:
    """The certificate-verification failure behind ``exc`` (an ssl or aiohttp error, or
    botocore's SSLError wrapping one, on either send path), else None."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLCertVerificationError | aiohttp.ClientConnectorCertificateError):
            return e
        if isinstance(e, bexc.SSLError):
            inner = e.kwargs.get("error")
            if isinstance(inner, BaseException):
                todo.append(inner)
        todo += [e.__cause__, e.__context__]
    return None


def classify(exc: BaseException) -> FailureKind:
    """Throttled (503 SlowDown, 429...), transient (5xx, timeouts, resets) or fatal. A
    certificate that cannot be verified is fatal: a retry meets the same certificate."""
    if certificate_failure(exc) is not None:
        return FailureKind.FATAL
    if isinstance(exc, bexc.ClientError):
        code, status = error_code(exc)
        if code in THROTTLE_CODES or status in (429, 503):
            return FailureKind.THROTTLED
        if code in TRANSIENT_CODES or (status is not None and status >= 500):
            return FailureKind.TRANSIENT
        return FailureKind.FATAL
    if isinstance(exc, (bexc.NoCredentialsError, bexc.PartialCredentialsError)):
        return FailureKind.FATAL
    if isinstance(exc, bexc.HTTPClientError | bexc.ConnectionError):  # resets, refused, timeouts
        return FailureKind.TRANSIENT
    if isinstance(exc, (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError)):
        return FailureKind.TRANSIENT
    if isinstance(exc, bexc.ResponseStreamingError | bexc.IncompleteReadError):
        return FailureKind.TRANSIENT
    return FailureKind.FATAL


def _origin(url: str) -> str:
    """scheme://host[:port] of a request URL (no path, query or user info)."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return ""
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{parts.hostname}{port}"


def translate(
    exc: BaseException, operation: str, bucket: str = "", key: str = "", *, exhausted: bool = False
) -> BaseException:
    """Turn a botocore/aiohttp failure into an engine error with a message that says what
    happened and what to do. Non-I/O exceptions are returned unchanged."""
    where = f"s3://{bucket}/{key}" if key else (f"s3://{bucket}" if bucket else "")
    ctx: dict[str, Any] = dict(operation=operation, bucket=bucket, key=key)
    if isinstance(exc, errors.EngineError):
        return exc
    if isinstance(exc, bexc.ClientError):
        code, status = error_code(exc)
        msg = exc.response.get("Error", {}).get("Message") or ""
        base = f"{operation} {where} failed: {code} ({status}) {msg}".rstrip()
        if code == "NoSuchBucket":
            return errors.BucketNotFound(
                f"{base}. Bucket {bucket!r} does not exist on this endpoint: create it or fix "
                "the bucket name/endpoint.",
                code=code,
                status=status,
                **ctx,
            )
        if code in AUTH_CODES or status == 403:
            return errors.AccessDenied(
                f"{base}. Check the credentials (AWS_ACCESS_KEY_ID / profile) and the "
                "bucket policy.",
                code=code,
                status=status,
                **ctx,
            )
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status == 412:
            return errors.PreconditionFailed(
                f"{base}. The object already exists (If-None-Match).",
                code=code,
                status=status,
                **ctx,
            )
        if code == "NoSuchUpload":
            return errors.UploadNotFound(
                f"{base}. The multipart upload no longer exists (completed or aborted elsewhere).",
                code=code,
                status=status,
                **ctx,
            )
        if code in ("NoSuchKey", "NotFound") or status == 404:
            return errors.ObjectNotFound(f"{base}.", code=code, status=status, **ctx)
        if exhausted:
            return errors.RetriesExhausted(
                f"{base}; gave up after the retry budget. The store is overloaded or failing: "
                "lower the concurrency or raise retry.max_attempts.",
                code=code,
                status=status,
                **ctx,
            )
        return errors.S3Error(base, code=code, status=status, **ctx)
    if isinstance(exc, DeadlineExceeded):
        return errors.RetriesExhausted(
            f"{operation} {where}: no attempt finished within its deadline of "
            f"{exc.seconds:g} s (retry.attempt_timeout): the store answers too slowly or "
            "drips its answer. Check the endpoint, or raise retry.attempt_timeout.",
            code="DeadlineExceeded",
            **ctx,
        )
    if isinstance(exc, ResponseParserError):
        return errors.BadAnswer(
            f"{operation} {where}: the endpoint answered with a body that is not S3's XML "
            "(a proxy, a captive portal or a wrong endpoint_url?). Check endpoint_url.",
            code="BadAnswer",
            **ctx,
        )
    cert = certificate_failure(exc)
    if cert is not None:
        reason = getattr(cert, "verify_message", "") or getattr(
            getattr(cert, "certificate_error", None), "verify_message", ""
        )
        url = str(getattr(exc, "kwargs", {}).get("endpoint_url", "") or "")
        endpoint = _origin(url) or "the endpoint"
        return errors.CertificateError(
            f"{operation} {where}: the TLS certificate of {endpoint} could not be verified"
            f"{f' ({reason})' if reason else ''}. If the endpoint uses a private CA, pass its "
            "bundle: AWS_CA_BUNDLE=/path/ca.pem, or EngineConfig(ca_bundle=...)",
            code="CertificateError",
            **ctx,
        )
    if isinstance(exc, (bexc.NoCredentialsError, bexc.PartialCredentialsError)):
        return errors.AccessDenied(
            f"{operation} {where}: no usable AWS credentials ({exc}). Set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, a profile, or pass them in EngineConfig.",
            code="NoCredentials",
            **ctx,
        )
    if isinstance(exc, (bexc.EndpointConnectionError, bexc.ConnectTimeoutError)):
        return errors.EndpointUnreachable(
            f"{operation} {where}: could not connect to the endpoint ({exc}). Check "
            "endpoint_url, the network, and that the server is running.",
            code=type(exc).__name__,
            **ctx,
        )
    if classify(exc) is not FailureKind.FATAL:
        return errors.RetriesExhausted(
            f"{operation} {where} failed after retries: {type(exc).__name__}: {exc}",
            code=type(exc).__name__,
            **ctx,
        )
    return exc


class AdaptiveLimiter:
    """A concurrency limit that adapts: multiplicative decrease on throttling (at most once
    per window: throttles of requests started before the last decrease are ignored) and
    additive increase, one slot after ``recovery_per_slot * limit`` successes."""

    def __init__(
        self, maximum: int, *, decrease: float = 0.5, recovery_per_slot: float = 1.0
    ) -> None:
        self.maximum = maximum
        self._limit = maximum
        self._decrease = decrease
        self._recovery = recovery_per_slot
        self._in_flight = 0
        self._successes = 0
        self.window = 0
        self.lowest = maximum
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def acquire(self) -> int:
        """Wait for a free slot; returns the window the request starts in."""
        while self._in_flight >= self._limit:
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(fut)
            try:
                await fut
            finally:
                if fut in self._waiters:
                    self._waiters.remove(fut)
        self._in_flight += 1
        return self.window

    def release(self) -> None:
        self._in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        free = self._limit - self._in_flight
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    def on_throttle(self, window: int) -> tuple[int, int] | None:
        """Record a throttle of a request started in ``window``; returns (old, new) when
        the limit dropped."""
        if window != self.window or self._limit <= 1:
            return None
        old = self._limit
        self._limit = max(1, math.floor(old * self._decrease))
        self.window += 1
        self._successes = 0
        self.lowest = min(self.lowest, self._limit)
        return old, self._limit

    def on_success(self) -> tuple[int, int] | None:
        """Record a success; returns (old, new) when the limit rose."""
        if self._limit >= self.maximum:
            return None
        self._successes += 1
        if self._successes >= self._recovery * self._limit:
            self._successes = 0
            old = self._limit
            self._limit += 1
            self._wake()
            return old, self._limit
        return None


@dataclass
class EngineStats:
    """Counters for one engine; read them after (or during) the work."""

    requests: int = 0
    retries: int = 0
    throttles: int = 0
    transient_errors: int = 0
    fatal_errors: int = 0
    parts_uploaded: int = 0
    bytes_uploaded: int = 0
    uploads_completed: int = 0
    uploads_deferred: int = 0
    uploads_aborted: int = 0
    concurrency_changes: int = 0
    lowest_concurrency: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)
    #: trailing checksums (a part read once over HTTPS, wire/trailer.py): None = not tried,
    #: True = the store confirms them, False = it refused one (parts go the two-pass way)
    trailer_checksums: bool | None = None
    #: bodies the store confirmed with a trailing checksum / re-sent the two-pass way
    trailer_bodies: int = 0
    trailer_fallbacks: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}


class _StopAfterElapsed(stop_base):
    """Stop once ``limit`` seconds have passed since ``started`` (a monotonic time)."""

    def __init__(self, started: float, limit: float) -> None:
        self.started = started
        self.limit = limit

    def __call__(self, retry_state: Any) -> bool:
        return time.monotonic() - self.started >= self.limit


@dataclass(slots=True)
class _Call(Generic[T]):
    """One S3 call under the retry policy: what to run, for whom, and the limiter window
    its slot was taken in (updated when the slot is taken again after a backoff)."""

    operation: str
    fn: Callable[[int], Awaitable[T]]
    bucket: str
    key: str
    limiter: AdaptiveLimiter | None
    window: int
    progress: ProgressCallback | None
    sent_bytes: int


class Retrier:
    """Runs one S3 call with the engine's retry policy, limiter and events."""

    def __init__(
        self,
        config: RetryConfig,
        stats: EngineStats,
        events: Callable[[Event, ProgressCallback | None], Awaitable[None]],
    ) -> None:
        self.config = config
        self.stats = stats
        self._events = events

    async def call(
        self,
        operation: str,
        fn: Callable[[int], Awaitable[T]],
        *,
        bucket: str = "",
        key: str = "",
        limiter: AdaptiveLimiter | None = None,
        window: int = 0,
        progress: ProgressCallback | None = None,
        sent_bytes: int = 0,
    ) -> T:
        """Call ``fn(attempt)`` until it succeeds, a fatal error, or the budget runs out.

        With a ``limiter``, the caller holds one slot on entry (acquired in ``window``);
        the slot is given back while sleeping before a retry and taken again after, so a
        lowered limit applies at once. ``sent_bytes`` > 0 emits BytesSent per attempt and
        rolls it back when the attempt fails.

        The first attempt runs without tenacity (most calls need no other, and a retry
        loop is not free to build); after a retryable failure tenacity takes over with
        that failure as its attempt 1, so backoff, the attempt budget and ``max_elapsed``
        (from the first attempt's start) are as if tenacity had run every attempt.
        """
        call = _Call(operation, fn, bucket, key, limiter, window, progress, sent_bytes)
        started = time.monotonic()
        try:
            return await self._attempt(call, 1)
        except Exception as exc:
            if classify(exc) is FailureKind.FATAL:
                raise translate(exc, operation, bucket, key, exhausted=False) from exc
            first: Exception = exc
        return await self._retry(call, first, started)

    async def _retry(self, call: _Call[T], first: Exception, started: float) -> T:
        """Attempts 2.. under tenacity, after ``first`` failed retryably."""
        cfg = self.config
        limiter, progress = call.limiter, call.progress

        async def sleep(seconds: float) -> None:
            # no backoff past max_elapsed: the call ends within it plus one attempt
            seconds = min(seconds, max(0.0, started + cfg.max_elapsed - time.monotonic()))
            if limiter is None:
                await asyncio.sleep(seconds)
                return
            limiter.release()
            try:
                await asyncio.sleep(seconds)
            finally:
                call.window = await limiter.acquire()

        async def before_sleep(rs: Any) -> None:
            exc = rs.outcome.exception()
            kind = classify(exc)
            self.stats.retries += 1
            delay = rs.next_action.sleep if rs.next_action else 0.0
            await self._events(
                RetryScheduled(
                    call.operation,
                    call.key,
                    rs.attempt_number,
                    delay,
                    kind.value,
                    f"{type(exc).__name__}: {error_code(exc)[0]}",
                ),
                progress,
            )

        def retryable(exc: BaseException) -> bool:
            return classify(exc) is not FailureKind.FATAL

        retrying = AsyncRetrying(
            stop=stop_any(
                stop_after_attempt(cfg.max_attempts), _StopAfterElapsed(started, cfg.max_elapsed)
            ),
            wait=wait_random_exponential(multiplier=cfg.base_delay, max=cfg.max_delay),
            retry=retry_if_exception(retryable),
            before_sleep=before_sleep,
            sleep=sleep,
            reraise=True,
        )
        result: T
        attempt_no = 0
        try:
            async for attempt in retrying:
                with attempt:
                    attempt_no += 1
                    if attempt_no == 1:
                        raise first  # already made: tenacity books it as attempt 1
                    result = await self._attempt(call, attempt_no)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) or not isinstance(exc, Exception):
                raise
            exhausted = classify(exc) is not FailureKind.FATAL
            if exhausted:
                exc.add_note(f"{attempt_no} attempts over {time.monotonic() - started:.1f}s")
            raise translate(
                exc, call.operation, call.bucket, call.key, exhausted=exhausted
            ) from exc
        return result

    async def _attempt(self, call: _Call[T], attempt_no: int) -> T:
        stats = self.stats
        operation, bucket, key = call.operation, call.bucket, call.key
        limiter, progress, sent_bytes = call.limiter, call.progress, call.sent_bytes
        stats.requests += 1
        stats.by_operation[operation] = stats.by_operation.get(operation, 0) + 1
        if sent_bytes:
            await self._events(BytesSent(bucket, key, sent_bytes), progress)
        try:
            result = await deadline(self.config.attempt_timeout, call.fn(attempt_no))
        except Exception as exc:
            if sent_bytes:
                await self._events(BytesSent(bucket, key, -sent_bytes, rollback=True), progress)
            kind = classify(exc)
            if kind is FailureKind.THROTTLED:
                stats.throttles += 1
                await self._events(Throttled(operation, key, error_code(exc)[0]), progress)
                if limiter is not None:
                    change = limiter.on_throttle(call.window)
                    if change:
                        stats.concurrency_changes += 1
                        stats.lowest_concurrency = limiter.lowest
                        await self._events(
                            ConcurrencyChanged(change[0], change[1], "throttled"), progress
                        )
            elif kind is FailureKind.TRANSIENT:
                stats.transient_errors += 1
            else:
                stats.fatal_errors += 1
            raise
        if limiter is not None:
            change = limiter.on_success()
            if change:
                stats.concurrency_changes += 1
                await self._events(ConcurrencyChanged(change[0], change[1], "recovered"), progress)
        return result


async def deadline(seconds: float, step: Awaitable[T], *, limit: float | None = None) -> T:
    """``await step``, cancelled after ``seconds``: :class:`DeadlineExceeded` then, naming
    ``limit`` (default ``seconds``) as the deadline; a timeout from inside the step is
    left as it is."""
    try:
        async with asyncio.timeout(seconds) as scope:
            return await step
    except TimeoutError:
        if scope.expired():
            raise DeadlineExceeded(seconds if limit is None else limit) from None
        raise
