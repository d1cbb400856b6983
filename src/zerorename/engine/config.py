"""Engine configuration: one frozen dataclass, validated before any request is sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from zerorename.engine.errors import ConfigError
from zerorename.engine.planning import MAX_PART_SIZE, MIN_PART_SIZE

MiB = 1024 * 1024

ChecksumAlgorithm = Literal["none", "CRC32", "CRC32C", "SHA256"]
AddressingStyle = Literal["auto", "path", "virtual"]


@dataclass(frozen=True)
class RetryConfig:
    """How throttled and transient failures are retried (fatal ones never are).

    Backoff is exponential with full jitter: attempt n sleeps uniform(0, min(max_delay,
    base_delay * 2**n)). ``max_elapsed`` bounds the total time one request may spend
    retrying (an unreachable endpoint fails after about this long).
    """

    max_attempts: int = 10
    base_delay: float = 0.1
    max_delay: float = 10.0
    max_elapsed: float = 120.0
    #: multiply the concurrency limit by this on a throttle (additive recovery after).
    throttle_decrease: float = 0.5
    #: successes needed to raise the limit by one slot, per slot of the current limit.
    recovery_per_slot: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ConfigError(f"retry.max_attempts must be >= 1, got {self.max_attempts}")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_elapsed <= 0:
            raise ConfigError("retry delays must be >= 0 and max_elapsed > 0")
        if not 0 < self.throttle_decrease < 1:
            raise ConfigError(
                f"retry.throttle_decrease must be in (0, 1), got {self.throttle_decrease}"
            )


@dataclass(frozen=True)
class EngineConfig:
    """Everything an :class:`UploadEngine` needs; credentials come from the AWS chain
    unless given here (they are never included in repr, logs or records)."""

    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: AddressingStyle = "auto"
    #: bytes per part for streams; known sizes get a fitting part size (>= this).
    part_size: int = 16 * MiB
    #: parts in flight for the whole engine (across all uploads).
    max_concurrency: int = 16
    #: completes/aborts in flight in complete_many/abort_many.
    batch_concurrency: int = 64
    #: HTTP connections kept; None sizes the pool to the concurrency.
    max_pool_connections: int | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    retry: RetryConfig = field(default_factory=RetryConfig)
    checksum: ChecksumAlgorithm = "CRC32C"
    #: sign request bodies with SHA-256 (costs CPU over plain HTTP; checksums cover
    #: integrity, so it is off by default).
    payload_signing: bool = False
    #: send UploadPart/Complete/Create/Abort/PutObject through a lean signed aiohttp path
    #: instead of botocore (used only when exact: SigV4, credentials, no payload signing);
    #: off = all calls through aiobotocore.
    fast_path: bool = True
    profile: str | None = None
    aws_access_key_id: str | None = field(default=None, repr=False)
    aws_secret_access_key: str | None = field(default=None, repr=False)
    aws_session_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not MIN_PART_SIZE <= self.part_size <= MAX_PART_SIZE:
            raise ConfigError(
                f"part_size must be between 5 MiB ({MIN_PART_SIZE}) and 5 GiB "
                f"({MAX_PART_SIZE}) bytes, got {self.part_size}; S3 rejects other sizes"
            )
        if self.max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.batch_concurrency < 1:
            raise ConfigError(f"batch_concurrency must be >= 1, got {self.batch_concurrency}")
        if self.max_pool_connections is not None and self.max_pool_connections < 1:
            raise ConfigError("max_pool_connections must be >= 1 (or None to size it)")
        if self.checksum not in ("none", "CRC32", "CRC32C", "SHA256"):
            raise ConfigError(
                f"checksum must be one of none, CRC32, CRC32C, SHA256; got {self.checksum!r}"
            )
        if self.addressing_style not in ("auto", "path", "virtual"):
            raise ConfigError(
                f"addressing_style must be auto, path or virtual; got {self.addressing_style!r}"
            )
        if self.connect_timeout <= 0 or self.read_timeout <= 0:
            raise ConfigError("connect_timeout and read_timeout must be > 0 seconds")
        if (self.aws_access_key_id is None) != (self.aws_secret_access_key is None):
            raise ConfigError("give both aws_access_key_id and aws_secret_access_key, or neither")

    @property
    def pool_size(self) -> int:
        """Connections in the pool: explicit, or enough for parts and batch work at once."""
        if self.max_pool_connections is not None:
            return self.max_pool_connections
        return max(self.max_concurrency, self.batch_concurrency) + 4
