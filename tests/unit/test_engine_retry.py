"""Failure classification, translation and the adaptive limiter: pure."""

import asyncio

import botocore.exceptions as bexc
import pytest
from botocore.parsers import ResponseParserError

from zerorename.engine import errors
from zerorename.engine.config import RetryConfig
from zerorename.engine.retry import AdaptiveLimiter, FailureKind, classify, translate


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
