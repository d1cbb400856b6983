"""Failure classification, translation and the adaptive limiter: pure."""

import asyncio

import botocore.exceptions as bexc
import pytest
from botocore.parsers import ResponseParserError

from zerorename.engine import errors
from zerorename.engine.config import RetryConfig
from zerorename.engine.retry import (
    AdaptiveLimiter,
    DeadlineExceeded,
    EngineStats,
    FailureKind,
    Retrier,
    classify,
    deadline,
    translate,
)


def client_error(code: str, status: int, op: str = "UploadPart") -> bexc.ClientError:
    return bexc.ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}},
        op,
    )


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (client_error("SlowDown", 503), FailureKind.THROTTLED),
        (client_error("TooManyRequests", 429), FailureKind.THROTTLED),
        (client_error("InternalError", 500), FailureKind.TRANSIENT),
        (client_error("RequestTimeout", 400), FailureKind.TRANSIENT),
        (client_error("NoSuchBucket", 404), FailureKind.FATAL),
        (client_error("AccessDenied", 403), FailureKind.FATAL),
        (client_error("InvalidPart", 400), FailureKind.FATAL),
        (bexc.EndpointConnectionError(endpoint_url="http://x"), FailureKind.TRANSIENT),
        (bexc.ConnectionClosedError(endpoint_url="http://x"), FailureKind.TRANSIENT),
        (bexc.ReadTimeoutError(endpoint_url="http://x"), FailureKind.TRANSIENT),
        (bexc.NoCredentialsError(), FailureKind.FATAL),
        (ValueError("bug"), FailureKind.FATAL),
    ],
)
def test_classify(exc: BaseException, kind: FailureKind) -> None:
    assert classify(exc) is kind


def test_translate_names_the_problem() -> None:
    e = translate(client_error("NoSuchBucket", 404), "UploadPart", "nobucket", "k")
    assert isinstance(e, errors.BucketNotFound) and "does not exist" in str(e)
    e = translate(client_error("InvalidAccessKeyId", 403), "PutObject", "b", "k")
    assert isinstance(e, errors.AccessDenied) and "credentials" in str(e)
    e = translate(client_error("PreconditionFailed", 412), "CompleteMultipartUpload", "b", "k")
    assert isinstance(e, errors.PreconditionFailed)
    e = translate(client_error("SlowDown", 503), "UploadPart", "b", "k", exhausted=True)
    assert isinstance(e, errors.RetriesExhausted) and "concurrency" in str(e)
    e = translate(bexc.EndpointConnectionError(endpoint_url="http://x"), "PutObject", "b", "k")
    assert isinstance(e, errors.EndpointUnreachable) and "endpoint_url" in str(e)


def test_limiter_halves_once_per_window_and_recovers() -> None:
    lim = AdaptiveLimiter(16, decrease=0.5, recovery_per_slot=1.0)
    w = lim.window
    assert lim.on_throttle(w) == (16, 8)
    assert lim.on_throttle(w) is None  # same window: requests started before the drop
    assert lim.on_throttle(lim.window) == (8, 4)
    assert lim.lowest == 4
    changes = [lim.on_success() for _ in range(4)]
    assert changes[-1] == (4, 5)
    for _ in range(200):
        lim.on_success()
    assert lim.limit == 16  # never above the maximum


def test_limiter_never_drops_below_one() -> None:
    lim = AdaptiveLimiter(2)
    lim.on_throttle(lim.window)
    assert lim.limit == 1
    assert lim.on_throttle(lim.window) is None
    assert lim.limit == 1


def test_limiter_bounds_in_flight() -> None:
    async def main() -> int:
        lim = AdaptiveLimiter(3)
        peak = 0

        async def worker() -> None:
            nonlocal peak
            await lim.acquire()
            peak = max(peak, lim.in_flight)
            await asyncio.sleep(0.001)
            lim.release()

        await asyncio.gather(*(worker() for _ in range(50)))
        assert lim.in_flight == 0
        return peak

    assert asyncio.run(main()) == 3


def test_retry_config_validation() -> None:
    with pytest.raises(errors.ConfigError):
        RetryConfig(max_attempts=0)
    with pytest.raises(errors.ConfigError):
        RetryConfig(throttle_decrease=1.5)


def test_a_body_that_is_not_s3_xml_is_a_bad_answer_not_retried() -> None:
    """A captive portal's HTML that is not even XML (botocore's ResponseParserError) is
    BadAnswer naming the operation and object: fatal, one line, nothing retried."""
    exc = ResponseParserError("Unable to parse response (not well-formed), invalid XML")
    assert classify(exc) is FailureKind.FATAL
    err = translate(exc, "CreateMultipartUpload", "bkt", "k")
    assert isinstance(err, errors.BadAnswer)
    assert "CreateMultipartUpload s3://bkt/k" in str(err) and "endpoint_url" in str(err)
    assert "\n" not in str(err)


def test_an_attempt_that_never_ends_meets_its_deadline_every_time() -> None:
    """Every attempt is cut at retry.attempt_timeout (a transient DeadlineExceeded, so it
    is retried) and the call ends with RetriesExhausted code DeadlineExceeded after
    max_attempts attempts: an attempt that never ends cannot hang a call."""
    cfg = RetryConfig(max_attempts=3, base_delay=0, max_delay=0, attempt_timeout=0.01)
    attempts: list[int] = []

    async def never(attempt: int) -> None:
        attempts.append(attempt)
        await asyncio.Event().wait()  # a server that never finishes its answer

    async def events(*_: object) -> None:
        return None

    async def run() -> None:
        await Retrier(cfg, EngineStats(), events).call("GetObject", never, bucket="b", key="k")

    with pytest.raises(errors.RetriesExhausted) as err:
        asyncio.run(run())
    assert err.value.code == "DeadlineExceeded" and "s3://b/k" in str(err.value)
    assert attempts == [1, 2, 3]
    assert classify(DeadlineExceeded(1.0)) is FailureKind.TRANSIENT


def test_a_timeout_raised_inside_an_attempt_is_not_taken_for_its_deadline() -> None:
    async def inner() -> None:
        raise TimeoutError("the step's own")

    with pytest.raises(TimeoutError, match="the step's own") as err:
        asyncio.run(deadline(5.0, inner()))
    assert not isinstance(err.value, DeadlineExceeded)
