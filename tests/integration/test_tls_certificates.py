"""Certificate failures are final and clear (issue 11 item 3): a TLS front (the fault proxy in
TLS mode, before moto) presents a certificate signed by an unknown CA, an expired one, or one
for another host name, while the client trusts the session CA. Each is one CertificateError
that names the endpoint and says how to pass a CA bundle, after one handshake (counted by the
proxy, never timed), on both send paths; no request reaches the store."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import pytest

from engine_helpers import object_keys, pending_keys
from zerorename.engine import EngineConfig, RetryConfig, UploadEngine
from zerorename.engine.errors import CertificateError
from zerorename.engine.wire.client import FastClient
from zerorename.servers.faultproxy import FaultProxy
from zerorename.servers.targets import S3Target
from zerorename.servers.tls import TlsFiles
from zerorename.units import MiB

PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fastpath", "botocore"])
#: certificate -> what OpenSSL's verify message says about it (a pattern)
BAD = {
    "unknown_ca": "self-signed certificate in certificate chain|unable to get local issuer",
    "expired": "certificate has expired",
    "wrong_host": "(IP address|Hostname) mismatch",
}


def _front(
    fault_proxy: Callable[..., Any], moto_s3: S3Target, tls_files: TlsFiles, which: str
) -> FaultProxy:
    pair = getattr(tls_files, which)
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url, tls=pair.server_context())
    return proxy


def _config(target: S3Target, fast: bool) -> EngineConfig:
    # a retry budget that would retry a transient failure several times
    retry = RetryConfig(max_attempts=5, base_delay=0.05, max_elapsed=120)
    return target.engine_config(fast_path=fast, retry=retry, part_size=5 * MiB)


@PATHS
@pytest.mark.parametrize("which", list(BAD))
async def test_a_bad_certificate_fails_at_once_with_one_clear_error(
    moto_s3: S3Target,
    tls_files: TlsFiles,
    fault_proxy: Callable[..., Any],
    which: str,
    fast: bool,
) -> None:
    proxy = _front(fault_proxy, moto_s3, tls_files, which)
    assert proxy.url.startswith("https://")
    target = dataclasses.replace(
        moto_s3.with_endpoint(proxy.url), ca_bundle=str(tls_files.ca_bundle)
    )
    async with UploadEngine(_config(target, fast)) as engine:
        assert isinstance(engine._client, FastClient) == fast
        with pytest.raises(CertificateError) as info:
            await engine.put_object(target.bucket, target.key("k"), b"x")
        assert engine.stats.requests == 1 and engine.stats.retries == 0
        proxy.settle()  # the proxy's side of the failed handshake has ended
        handshakes = proxy.stats.tls_failures
        # a multipart upload fails the same way, at its first request
        with pytest.raises(CertificateError):
            await engine.upload(target.bucket, target.key("big"), b"y" * (6 * MiB))
        assert engine.stats.retries == 0
    proxy.settle()
    assert handshakes == 1  # one handshake, not retried
    assert proxy.stats.tls_failures == 2 and proxy.stats.tls_handshakes == 0
    assert proxy.stats.requests() == 0  # nothing reached the store
    message = str(info.value)
    assert proxy.url in message, message
    assert "AWS_CA_BUNDLE" in message and "ca_bundle" in message
    assert re.search(BAD[which], message), message
    assert "\n" not in message and moto_s3.secret_key not in message  # type: ignore[operator]
    assert object_keys(moto_s3) == [] and pending_keys(moto_s3) == []


@PATHS
async def test_the_same_front_with_a_good_certificate_works(
    moto_s3: S3Target, tls_files: TlsFiles, fault_proxy: Callable[..., Any], fast: bool
) -> None:
    """The control for the test above: only the certificate differs."""
    proxy = _front(fault_proxy, moto_s3, tls_files, "server")
    target = dataclasses.replace(
        moto_s3.with_endpoint(proxy.url), ca_bundle=str(tls_files.ca_bundle)
    )
    async with UploadEngine(_config(target, fast)) as engine:
        await engine.put_object(target.bucket, target.key("k"), b"x")
        await engine.upload(target.bucket, target.key("big"), b"y" * (6 * MiB))
        assert engine.stats.retries == 0
    assert proxy.stats.tls_failures == 0 and proxy.stats.tls_handshakes >= 1
    assert object_keys(moto_s3) == [moto_s3.key("big"), moto_s3.key("k")]


@PATHS
async def test_without_the_ca_bundle_the_session_ca_is_unknown(
    s3_tls: S3Target, fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client not given the CA bundle (no option, no AWS_CA_BUNDLE) refuses the test
    servers' certificate (RGW's native TLS included): verification is on by default."""
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    target = dataclasses.replace(s3_tls, ca_bundle=None)
    async with UploadEngine(_config(target, fast)) as engine:
        with pytest.raises(CertificateError) as info:
            await engine.put_object(target.bucket, target.key("k"), b"x")
        assert engine.stats.requests == 1 and engine.stats.retries == 0
    assert str(s3_tls.endpoint_url) in str(info.value)


def test_no_engine_option_turns_verification_off() -> None:
    """The only TLS option is a CA bundle: no field named like verify/insecure/ssl exists,
    and ca_bundle refuses anything but a non-empty path string (False, '', 0)."""
    from zerorename.engine.errors import ConfigError

    names = {f.name for f in dataclasses.fields(EngineConfig)}
    tls_like = {
        n for n in names if any(w in n for w in ("verify", "insecure", "ssl", "tls", "cert"))
    }
    assert tls_like == set(), tls_like
    assert "ca_bundle" in names
    for bad in (False, "", 0):
        with pytest.raises(ConfigError, match="ca_bundle"):
            EngineConfig(ca_bundle=bad)  # type: ignore[arg-type]


def test_no_cli_or_spark_option_turns_verification_off() -> None:
    """Neither the `zerorename` command (any subcommand) nor the Spark writer has an option
    named like a switch that turns verification off (``--tls`` choosing HTTPS and
    ``--ca-bundle`` naming a CA are fine)."""
    import argparse

    from zerorename import cli
    from zerorename.spark_adapter.options import OPTION_DOCS

    words = (
        "verify",
        "insecure",
        "unverified",
        "no-ssl",
        "nossl",
        "no-tls",
        "no-cert",
        "skip-ssl",
        "skip-tls",
        "skip-cert",
        "skip-verif",
    )

    def options(parser: argparse.ArgumentParser) -> set[str]:
        found: set[str] = set()
        for action in parser._actions:
            found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    found |= options(sub)
        return found

    flags = options(cli.build_parser())
    assert "--endpoint-url" in flags  # the walk reaches the subcommands
    assert {f for f in flags if any(w in f.lower() for w in words)} == set()
    assert {k for k in OPTION_DOCS if any(w in k.lower() for w in words)} == set()
