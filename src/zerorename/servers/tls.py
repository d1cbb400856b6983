"""Throwaway TLS material for tests: a CA and server certificates made with ``cryptography``.

:func:`make_tls_files` writes, into one directory, a CA (``ca.pem``: the bundle clients are
given through ``AWS_CA_BUNDLE`` or ``EngineConfig.ca_bundle``) and certificates it signed: one
valid for 127.0.0.1, ::1 and localhost, one that expired yesterday, one for another host
name only; plus one signed by a second CA that no bundle holds (an unknown CA).
:func:`session_tls` makes one such set per process (in a temp dir removed at exit), so every
server of a test session shares one CA; with :data:`TLS_DIR_ENV` set (a test run with several
processes, e.g. pytest-xdist workers) every process uses the one set in that directory, made
by the first process that asks (under a file lock), so a server one process started verifies
with the CA of every other.
"""

from __future__ import annotations

import atexit
import datetime
import fcntl
import ipaddress
import os
import shutil
import ssl
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zerorename.servers.errors import TestingError

#: the host names and addresses the valid server certificate covers.
SERVER_NAMES = ("localhost",)
SERVER_ADDRESSES = ("127.0.0.1", "::1")
#: the only name the wrong-host certificate covers.
WRONG_HOST = "wrong-host.invalid"

#: a directory shared by every process of one test run: session_tls() makes and reads its set there
TLS_DIR_ENV = "ZR_TEST_TLS_DIR"

_lock = threading.Lock()
_session: TlsFiles | None = None


@dataclass(frozen=True)
class CertPair:
    """A server certificate (PEM, the chain up to the CA) and its private key (PEM)."""

    cert: Path
    key: Path

    def server_context(self) -> ssl.SSLContext:
        """A server-side SSLContext presenting this certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, self.key)
        return context


@dataclass(frozen=True)
class TlsFiles:
    """Paths of one set of test TLS material (see the module docstring)."""

    directory: Path
    ca_bundle: Path
    server: CertPair
    expired: CertPair
    wrong_host: CertPair
    unknown_ca: CertPair

    def client_context(self) -> ssl.SSLContext:
        """A verifying client SSLContext that trusts only this CA."""
        return ssl.create_default_context(cafile=str(self.ca_bundle))


def _key() -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key: Any, path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(common_name: str) -> Any:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "zerorename tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _ca(common_name: str, now: datetime.datetime) -> tuple[Any, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _key()
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: Any,
    ca_cert: Any,
    *,
    names: tuple[str, ...],
    addresses: tuple[str, ...],
    not_before: datetime.datetime,
    not_after: datetime.datetime,
    directory: Path,
    stem: str,
) -> CertPair:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID

    key = _key()
    alt: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0] if names else addresses[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pair = CertPair(directory / f"{stem}.pem", directory / f"{stem}.key")
    pem = serialization.Encoding.PEM
    pair.cert.write_bytes(cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    _write_key(key, pair.key)
    return pair


def make_tls_files(directory: str | Path) -> TlsFiles:
    """Create a fresh CA and its server certificates in ``directory`` (see the module
    docstring); returns their paths."""
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError as exc:  # pragma: no cover - a dev dependency
        raise TestingError(
            "the TLS test material needs the 'cryptography' package: pip install cryptography"
        ) from exc
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = _ca("zerorename test CA", now)
    other_key, other_cert = _ca("zerorename unknown CA", now)
    ca_bundle = out / "ca.pem"
    ca_bundle.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_key(ca_key, out / "ca.key")
    day = datetime.timedelta(days=1)

    def leaf(
        stem: str,
        *,
        names: tuple[str, ...] = SERVER_NAMES,
        expired: bool = False,
        addresses: tuple[str, ...] = SERVER_ADDRESSES,
        unknown: bool = False,
    ) -> CertPair:
        before, after = (now - 10 * day, now - day) if expired else (now - day, now + 7 * day)
        key, cert = (other_key, other_cert) if unknown else (ca_key, ca_cert)
        return _leaf(
            key,
            cert,
            names=names,
            addresses=addresses,
            not_before=before,
            not_after=after,
            directory=out,
            stem=stem,
        )

    return TlsFiles(
        directory=out,
        ca_bundle=ca_bundle,
        server=leaf("server"),
        expired=leaf("expired", expired=True),
        wrong_host=leaf("wrong-host", names=(WRONG_HOST,), addresses=()),
        unknown_ca=leaf("unknown-ca", unknown=True),
    )


def tls_files_in(directory: str | Path) -> TlsFiles:
    """The paths :func:`make_tls_files` writes in ``directory`` (the files are not read)."""
    out = Path(directory)

    def pair(stem: str) -> CertPair:
        return CertPair(out / f"{stem}.pem", out / f"{stem}.key")

    return TlsFiles(
        directory=out,
        ca_bundle=out / "ca.pem",
        server=pair("server"),
        expired=pair("expired"),
        wrong_host=pair("wrong-host"),
        unknown_ca=pair("unknown-ca"),
    )


def shared_tls_files(directory: str | Path) -> TlsFiles:
    """The set in ``directory``, made there by the first of several processes that asks (an
    exclusive file lock orders them; a ``complete`` marker is written last)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    with (out / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "complete").exists():
            make_tls_files(out)
            (out / "complete").write_text("")
    return tls_files_in(out)


def session_tls() -> TlsFiles:
    """The TLS material of this test run: the shared set in ``$ZR_TEST_TLS_DIR`` when that is
    set, else one made on first use in a temp dir of this process, removed at exit."""
    global _session
    with _lock:
        if _session is None:
            shared = os.environ.get(TLS_DIR_ENV)
            if shared:
                _session = shared_tls_files(shared)
            else:
                directory = Path(tempfile.mkdtemp(prefix="zr-tls-"))
                atexit.register(_remove, directory, os.getpid())
                _session = make_tls_files(directory)
        return _session


def _remove(directory: Path, owner: int) -> None:
    if os.getpid() == owner:  # not in a forked child: the parent still uses the files
        shutil.rmtree(directory, ignore_errors=True)
