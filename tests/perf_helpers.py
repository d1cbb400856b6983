"""Helpers shared by the perf harness's tests: the harness's view of a test server.
(tests/ is on sys.path: pytest puts the conftest's directory there.)"""

from __future__ import annotations

from zerorename.perf.model import Target
from zerorename.testing.targets import S3Target


def perf_target(s3: S3Target) -> Target:
    """The perf harness's Target for a test server (same endpoint, credentials, CA)."""
    return Target(
        name=s3.name,
        endpoint_url=s3.endpoint_url,
        bucket=s3.bucket,
        region=s3.region,
        addressing_style=s3.addressing_style,
        access_key=s3.access_key,
        secret_key=s3.secret_key,
        prefix=s3.prefix.rstrip("/"),
        ca_bundle=s3.ca_bundle,
    )
