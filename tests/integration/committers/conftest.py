"""Fixtures of the committer integration tests."""

from __future__ import annotations

import pytest

from zerorename.servers.targets import S3Target


@pytest.fixture
def aws_env(s3: S3Target, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The target's credentials in the environment (as a CLI user has them); returns the
    CLI options that reach its endpoint."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key or "")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key or "")
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3.region)
    return ["--endpoint-url", str(s3.endpoint_url), "--addressing-style", "path"]
