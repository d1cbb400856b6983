"""The one place an aiobotocore S3 client is configured."""

from __future__ import annotations

from typing import Any

from aiobotocore.config import AioConfig
from aiobotocore.session import AioSession, get_session

from zerorename.engine.config import EngineConfig


def make_session(config: EngineConfig) -> AioSession:
    if config.profile:
        return AioSession(profile=config.profile)
    return get_session()


def client_kwargs(config: EngineConfig) -> dict[str, Any]:
    """Arguments for ``session.create_client('s3', ...)``.

    botocore's retries are off (total_max_attempts=1): the engine retries itself, so
    attempts are never multiplied. Checksums are computed by the engine, so botocore
    adds none of its own; payload signing is off unless asked for (see EngineConfig).
    """
    s3: dict[str, Any] = {"addressing_style": config.addressing_style}
    s3["payload_signing_enabled"] = config.payload_signing
    aio_config = AioConfig(
        max_pool_connections=config.pool_size,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        retries={"total_max_attempts": 1, "mode": "standard"},
        s3=s3,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        tcp_keepalive=True,
        parameter_validation=False,
    )
    kwargs: dict[str, Any] = {"config": aio_config}
    if config.endpoint_url:
        kwargs["endpoint_url"] = config.endpoint_url
    if config.region:
        kwargs["region_name"] = config.region
    if config.aws_access_key_id:
        kwargs["aws_access_key_id"] = config.aws_access_key_id
        kwargs["aws_secret_access_key"] = config.aws_secret_access_key
        if config.aws_session_token:
            kwargs["aws_session_token"] = config.aws_session_token
    return kwargs
