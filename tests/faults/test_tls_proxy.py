"""The fault proxy's TLS mode and the session's certificates, seen from plain stdlib clients:
who can connect, what the handshakes count, and that a reset is one inside TLS."""

from __future__ import annotations

import datetime
import errno
import http.client
import os
import select
import socket
import ssl
from collections.abc import Callable
from typing import Any

import pytest

from zerorename.servers.faultproxy import FaultProxy, FaultRule
from zerorename.servers.targets import S3Target
from zerorename.servers.tls import WRONG_HOST, TlsFiles, make_tls_files


def _https(proxy: FaultProxy, context: ssl.SSLContext) -> http.client.HTTPSConnection:
    return http.client.HTTPSConnection("127.0.0.1", proxy.port, context=context, timeout=30)


def test_the_certificates_are_what_their_names_say(tmp_path: Any) -> None:
    from cryptography import x509

    files = make_tls_files(tmp_path)
    now = datetime.datetime.now(datetime.UTC)

    def load(pair: Any) -> x509.Certificate:
        return x509.load_pem_x509_certificate(pair.cert.read_bytes())

    def names(cert: x509.Certificate) -> list[str]:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return [str(n.value) for n in san]

    ca = x509.load_pem_x509_certificate(files.ca_bundle.read_bytes())
    server, expired = load(files.server), load(files.expired)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert server.issuer == ca.subject and expired.issuer == ca.subject
    assert (
        load(files.wrong_host).issuer == ca.subject and load(files.unknown_ca).issuer != ca.subject
    )
    assert sorted(names(server)) == ["127.0.0.1", "::1", "localhost"]
    assert names(load(files.wrong_host)) == [WRONG_HOST]
    assert server.not_valid_after_utc > now > expired.not_valid_after_utc
    assert oct(files.server.key.stat().st_mode & 0o777) == "0o600"


def test_a_tls_proxy_serves_https_and_counts_handshakes(
    moto_s3: S3Target, tls_files: TlsFiles, fault_proxy: Callable[..., Any]
) -> None:
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url, tls=tls_files.server.server_context())
    assert proxy.tls and proxy.url == f"https://127.0.0.1:{proxy.port}"
    conn = _https(proxy, tls_files.client_context())
    for _ in range(2):  # two requests, one connection, one handshake
        conn.request("GET", "/")
        assert conn.getresponse().read().startswith(b"<?xml")
    conn.close()
    # a client that does not trust the CA, and one that speaks plain HTTP, get nothing
    with pytest.raises(ssl.SSLCertVerificationError):
        _https(proxy, ssl.create_default_context()).request("GET", "/")
    plain = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
    with pytest.raises((ConnectionError, http.client.HTTPException)):
        plain.request("GET", "/")
        plain.getresponse().read()
    plain.close()
    proxy.settle()
    assert proxy.stats.tls_handshakes == 1 and proxy.stats.tls_failures == 2
    assert proxy.stats.requests() == 2 and proxy.stats.connections == 3
    ((version, cipher),) = proxy.stats.tls_sessions()
    assert version in ("TLSv1.2", "TLSv1.3") and cipher
    assert proxy.stats.snapshot()["tls_handshakes"] == 1


def test_a_reset_is_an_rst_under_the_tls_session(
    moto_s3: S3Target, tls_files: TlsFiles, fault_proxy: Callable[..., Any]
) -> None:
    """The proxy cuts a PutObject body inside TLS: the client's socket gets an RST
    (ECONNRESET), not a TLS close_notify or a FIN. (TLS 1.2 on the client so that no
    post-handshake record is waiting in its buffer.)"""
    proxy: FaultProxy = fault_proxy(moto_s3.endpoint_url, tls=tls_files.server.server_context())
    proxy.add_rule(FaultRule(operation="PutObject", fault="reset", reset_after_bytes=1000))
    context = tls_files.client_context()
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    head = f"PUT /{moto_s3.bucket}/k HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as raw:
        tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
        tls.sendall(head.encode() + b"x" * 5000)
        error = 0
        for _ in range(3000):  # wait (at most ~30 s) for the proxy's answer to arrive
            select.select([tls], [], [], 0.01)
            error = tls.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                break
        tls.close()
    assert error == errno.ECONNRESET, os.strerror(error)
    assert proxy.stats.faults("PutObject", "reset") == 1
    assert proxy.stats.tls_handshakes == 1
