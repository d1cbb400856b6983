"""The test servers' TLS setup: RGW's native HTTPS next to HTTP on one gateway, and the
launcher's refusal of a missing certificate (before it starts anything)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerorename.servers.errors import ServerStartError
from zerorename.servers.servers import RgwServer
from zerorename.servers.tls import CertPair, TlsFiles


def test_rgw_serves_http_and_https_from_one_gateway(
    rgw_server: RgwServer, tls_files: TlsFiles
) -> None:
    assert rgw_server.tls == tls_files.server
    plain, https = rgw_server.endpoint_url, rgw_server.https_endpoint_url
    assert plain.startswith("http://") and https.startswith("https://") and plain != https
    assert str(rgw_server.https_port) in https


def test_an_https_endpoint_needs_tls() -> None:
    server = RgwServer()
    with pytest.raises(ServerStartError, match="not running"):
        _ = server.https_endpoint_url


@pytest.mark.rgw  # the RGW policy of tests/conftest.py: skipped, or under CI=true failed
def test_the_launcher_refuses_a_missing_certificate(tmp_path: Path) -> None:
    missing = CertPair(tmp_path / "nope.pem", tmp_path / "nope.key")
    server = RgwServer(parent_dir=tmp_path, tls=missing, attempts=1)
    with pytest.raises(ServerStartError, match="RGW_SSL_CERT"):
        server.start()
    assert server.port is None and server.https_port is None
