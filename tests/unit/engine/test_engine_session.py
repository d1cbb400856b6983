"""Sessions share the process's botocore data loader, never credentials: an engine opened
after the environment changed signs with the new keys."""

from __future__ import annotations

import pytest

from zerorename.engine.config import EngineConfig
from zerorename.engine.wire.client import make_session


def test_sessions_share_the_loader_but_read_credentials_afresh(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first-secret")
    one = make_session(EngineConfig())
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "second-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "second-secret")
    two = make_session(EngineConfig())
    assert one is not two
    assert one.get_component("data_loader") is two.get_component("data_loader")
    # the S3 model is parsed once: the second session gets the very same object
    model = one.get_component("data_loader").load_service_model("s3", "service-2")
    assert two.get_component("data_loader").load_service_model("s3", "service-2") is model


async def test_credentials_are_not_shared_between_sessions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "first-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "first-secret")
    first = await make_session(EngineConfig()).get_credentials()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "second-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "second-secret")
    second = await make_session(EngineConfig()).get_credentials()
    assert first is not None and second is not None
    assert (first.access_key, second.access_key) == ("first-key", "second-key")
