"""Engine configuration: one frozen dataclass, validated before any request is sent."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, get_args
from urllib.parse import urlsplit

from zerorename.engine.errors import EngineConfigError
from zerorename.engine.planning import MAX_PART_SIZE, MIN_PART_SIZE, finite_number, is_int
from zerorename.logsafe import redact_url
from zerorename.units import MiB

ChecksumAlgorithm = Literal["none", "CRC32", "CRC32C", "SHA256"]
AddressingStyle = Literal["auto", "path", "virtual"]
TrailerChecksum = Literal["auto", "always", "never"]
_TRAILER_MODES = frozenset({"auto", "always", "never"})
_CHECKSUMS = frozenset({"none", "CRC32", "CRC32C", "SHA256"})
#: the addressing styles, in the order help texts list them: the one list of them
ADDRESSING_STYLES: tuple[AddressingStyle, ...] = get_args(AddressingStyle)
_STYLES = frozenset(ADDRESSING_STYLES)
#: the part size every entry point defaults to (engine, CLI, Spark options)
DEFAULT_PART_SIZE = 16 * MiB
# botocore's rule for region names (validate_region_name)
_REGION_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-]{0,61}[a-zA-Z0-9])?")


def _require_int(name: str, value: object, low: int, high: int | None = None) -> None:
    if not is_int(value) or value < low or (high is not None and value > high):  # type: ignore[operator]
        bound = f">= {low}" if high is None else f"between {low} and {high}"
        raise EngineConfigError(f"{name} must be an integer {bound}, got {value!r}")


def _require_number(name: str, value: object, *, positive: bool) -> None:
    number = finite_number(value)
    if number is None or number < 0 or (positive and number == 0):
        bound = "> 0" if positive else ">= 0"
        raise EngineConfigError(f"{name} must be a finite number {bound} (seconds), got {value!r}")


def _redacted(url: str) -> str:
    """``url`` for messages: user info, query and fragment masked (logsafe.redact_url)."""
    return repr(redact_url(url))


def endpoint_problem(url: object) -> str | None:
    """What is wrong with an endpoint URL (None: nothing): it must be http(s)://host[:port]
    [/path], with no credentials, query or fragment. Messages never echo user info."""
    if not isinstance(url, str):
        return f"endpoint_url must be a string, got {type(url).__name__}"
    shown = _redacted(url)
    if not url.isascii() or not url.isprintable() or " " in url:
        return f"endpoint_url {shown} holds spaces or control or non-ASCII characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError for a bad or out-of-range port
    except ValueError:
        return f"endpoint_url {shown} has a bad port: give http(s)://host[:1-65535]"
    if parts.scheme not in ("http", "https"):
        return f"endpoint_url {shown} is not an http:// or https:// URL"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return (
            f"endpoint_url {shown} holds credentials: remove them from the URL and give them "
            "as AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a profile, or EngineConfig fields"
        )
    if not parts.hostname:
        return f"endpoint_url {shown} has no host"
    if port == 0:
        return f"endpoint_url {shown} has port 0: give a port in 1..65535"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return f"endpoint_url {shown} has a query or fragment: give http(s)://host[:port]"
    return None


def region_problem(region: object) -> str | None:
    """What is wrong with a region name (None: nothing): botocore's own rule."""
    if not isinstance(region, str) or not _REGION_RE.fullmatch(region):
        return f"region {region!r} is not a region name (letters, digits and '-', e.g. us-east-1)"
    return None


@dataclass(frozen=True)
class RetryConfig:
    """How throttled and transient failures are retried (fatal ones never are).

    Backoff is exponential with full jitter: attempt n sleeps uniform(0, min(max_delay,
    base_delay * 2**n)). ``max_elapsed`` bounds the total time one request may spend
    retrying (an unreachable endpoint fails after about this long).

    Deadlines: every attempt of every request (its body sent and its answer read whole)
    ends within ``attempt_timeout`` or fails as a transient ``DeadlineExceeded`` (a server
    that drips its answer a byte at a time never resets the socket's ``read_timeout``).
    No attempt starts once ``max_elapsed`` has passed, and no backoff sleeps past it, so
    one call ends within ``max_elapsed + attempt_timeout``. A streamed read
    (``iter_object``) counts against ``attempt_timeout`` only the time spent waiting for
    the store in one GET, not the time its consumer takes between chunks.
    """

    max_attempts: int = 10
    base_delay: float = 0.1
    max_delay: float = 10.0
    max_elapsed: float = 120.0
    #: seconds one attempt may take from its start to the end of its answer (a part's
    #: upload included: raise it for big parts on slow links).
    attempt_timeout: float = 300.0
    #: multiply the concurrency limit by this on a throttle (additive recovery after).
    throttle_decrease: float = 0.5
    #: successes needed to raise the limit by one slot, per slot of the current limit.
    recovery_per_slot: float = 1.0

    def __post_init__(self) -> None:
        _require_int("retry.max_attempts", self.max_attempts, 1)
        _require_number("retry.base_delay", self.base_delay, positive=False)
        _require_number("retry.max_delay", self.max_delay, positive=False)
        _require_number("retry.max_elapsed", self.max_elapsed, positive=True)
        _require_number("retry.attempt_timeout", self.attempt_timeout, positive=True)
        decrease = finite_number(self.throttle_decrease)
        if decrease is None or not 0 < decrease < 1:
            raise EngineConfigError(
                f"retry.throttle_decrease must be in (0, 1), got {self.throttle_decrease!r}"
            )
        recovery = finite_number(self.recovery_per_slot)
        if recovery is None or recovery <= 0:
            raise EngineConfigError(
                f"retry.recovery_per_slot must be a finite number > 0, got "
                f"{self.recovery_per_slot!r}"
            )


@dataclass(frozen=True)
class EngineConfig:
    """Everything an :class:`UploadEngine` needs; credentials come from the AWS chain
    unless given here (they are never included in repr, logs or records)."""

    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: AddressingStyle = "auto"
    #: bytes per part for streams; known sizes get a fitting part size (>= this).
    part_size: int = DEFAULT_PART_SIZE
    #: parts in flight for the whole engine (across all uploads).
    max_concurrency: int = 16
    #: completes/aborts in flight in complete_many/abort_many.
    batch_concurrency: int = 64
    #: HTTP connections kept; None sizes the pool to the concurrency.
    max_pool_connections: int | None = None
    #: socket timeouts: to connect, and between two reads of one answer. Neither bounds
    #: a whole request (a server dripping bytes meets both): ``retry.attempt_timeout``
    #: does, and a call ends within ``retry.max_elapsed + retry.attempt_timeout``.
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    retry: RetryConfig = field(default_factory=RetryConfig)
    checksum: ChecksumAlgorithm = "CRC32C"
    #: send file and stream parts ``aws-chunked`` with the checksum in a trailer, computed
    #: over the very blocks being sent (one read per byte; the fast path only). Default
    #: "auto": over HTTPS only (plain HTTP keeps sendfile); "always" (also plain HTTP:
    #: tests) or "never" (checksum pass, then send pass). A store that refuses trailers
    #: is detected on its first refusal and gets parts the two-pass way from then on
    #: (EngineStats.trailer_checksums says which).
    trailer_checksum: TrailerChecksum = "auto"
    #: sign request bodies with SHA-256 (costs CPU over plain HTTP; checksums cover
    #: integrity, so it is off by default).
    payload_signing: bool = False
    #: send UploadPart/Complete/Create/Abort/PutObject through a lean signed aiohttp path
    #: instead of botocore (used only when exact: SigV4, credentials, no payload signing);
    #: off = all calls through aiobotocore.
    fast_path: bool = True
    profile: str | None = None
    #: CA bundle (PEM file) to verify the endpoint's TLS certificate with (else
    #: AWS_CA_BUNDLE / the AWS config's ca_bundle / the default bundle).
    ca_bundle: str | None = None
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Every field checked for type and range (a float part size, a NaN timeout, a
        None retry policy are refused here, not found out by a request)."""
        if not is_int(self.part_size) or not MIN_PART_SIZE <= self.part_size <= MAX_PART_SIZE:
            raise EngineConfigError(
                f"part_size must be an integer between 5 MiB ({MIN_PART_SIZE}) and 5 GiB "
                f"({MAX_PART_SIZE}) bytes, got {self.part_size!r}; S3 rejects other sizes"
            )
        _require_int("max_concurrency", self.max_concurrency, 1)
        _require_int("batch_concurrency", self.batch_concurrency, 1)
        if self.max_pool_connections is not None:
            _require_int("max_pool_connections (or None to size it)", self.max_pool_connections, 1)
        _require_number("connect_timeout", self.connect_timeout, positive=True)
        _require_number("read_timeout", self.read_timeout, positive=True)
        if not isinstance(self.retry, RetryConfig):
            raise EngineConfigError(f"retry must be a RetryConfig, got {type(self.retry).__name__}")
        if not isinstance(self.checksum, str) or self.checksum not in _CHECKSUMS:
            raise EngineConfigError(
                f"checksum must be one of none, CRC32, CRC32C, SHA256; got {self.checksum!r}"
            )
        if (
            not isinstance(self.trailer_checksum, str)
            or self.trailer_checksum not in _TRAILER_MODES
        ):
            raise EngineConfigError(
                f"trailer_checksum must be auto, always or never; got {self.trailer_checksum!r}"
            )
        if not isinstance(self.addressing_style, str) or self.addressing_style not in _STYLES:
            raise EngineConfigError(
                f"addressing_style must be auto, path or virtual; got {self.addressing_style!r}"
            )
        for name in ("payload_signing", "fast_path"):
            if not isinstance(getattr(self, name), bool):
                raise EngineConfigError(
                    f"{name} must be True or False, got {getattr(self, name)!r}"
                )
        if self.endpoint_url is not None:
            problem = endpoint_problem(self.endpoint_url)
            if problem is not None:
                raise EngineConfigError(problem)
        if self.region is not None:
            problem = region_problem(self.region)
            if problem is not None:
                raise EngineConfigError(problem)
        for name in ("profile", "ca_bundle"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise EngineConfigError(f"{name} must be a non-empty string or None")
        secrets = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
        for name in secrets:  # the values are never shown
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise EngineConfigError(f"{name} must be a non-empty string or None")
        if (self.aws_access_key_id is None) != (self.aws_secret_access_key is None):
            raise EngineConfigError(
                "give both aws_access_key_id and aws_secret_access_key, or neither"
            )

    @property
    def pool_size(self) -> int:
        """Connections in the pool: explicit, or enough for parts and batch work at once."""
        if self.max_pool_connections is not None:
            return self.max_pool_connections
        return max(self.max_concurrency, self.batch_concurrency) + 4
