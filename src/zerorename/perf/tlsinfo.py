"""What a run over HTTPS negotiated, and what its cipher costs on this CPU (the floor).

:func:`probe` opens one connection to the endpoint with Python's ssl and the run's CA bundle
and records the TLS version and cipher. :func:`cipher_cost` measures the cipher's AEAD on
this CPU with the ``cryptography`` package (16 KiB records, as TLS writes them), and
:func:`seal_cost` what Python's own ssl module (the OpenSSL every Python client's TLS goes
through) spends sealing the same records into TLS records: a client cannot send a GiB over
TLS for less CPU than that. Both are CPU seconds per GiB, the unit of the clients'
``cpu_s_per_gib``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from zerorename.perf.errors import TlsProbeError as TlsProbeError  # re-exported
from zerorename.perf.model import Target
from zerorename.perf.report import Stat
from zerorename.units import GiB, MiB

#: the record size TLS writes bulk data in (the protocol's maximum plaintext record)
RECORD = 16 * 1024
#: bytes sealed per measured round (and rounds: the floor is the cheapest round); 32 MiB
#: takes 15-25 ms here and gave the same floors as 128 MiB (AES-256-GCM 0.48-0.54 against
#: 0.50-0.63 CPU s/GiB, ssl 0.62 against 0.70-0.83) for a quarter of the CPU, which every
#: run over TLS pays before measuring
_ROUND_BYTES = 32 * MiB
_ROUNDS = 5


def aead_of(cipher: str) -> str | None:
    """The AEAD of an OpenSSL cipher suite name (TLS 1.3 or 1.2), or None when it is none of
    AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305."""
    name = cipher.upper().replace("_", "-")
    if "CHACHA20" in name:
        return "ChaCha20-Poly1305"
    if ("GCM" in name and "AES-128" in name) or "AES128-GCM" in name:
        return "AES-128-GCM"
    if ("GCM" in name and "AES-256" in name) or "AES256-GCM" in name:
        return "AES-256-GCM"
    return None


def probe(endpoint_url: str, ca_bundle: str | None, timeout: float = 10.0) -> dict[str, Any]:
    """One verified TLS handshake with the endpoint: ``{"version", "cipher", "bits",
    "aead", "openssl"}``. Raises :class:`TlsProbeError` naming the endpoint and the fix."""
    url = urlsplit(endpoint_url)
    host = url.hostname or ""
    port = url.port or 443
    context = ssl.create_default_context(cafile=ca_bundle)
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host) as conn,
        ):
            name, version, bits = conn.cipher() or ("", conn.version() or "", 0)
    except ssl.SSLCertVerificationError as exc:
        raise TlsProbeError(
            f"{endpoint_url}: certificate not trusted ({exc.verify_message}); pass the CA "
            "bundle that signed it with --ca-bundle FILE or AWS_CA_BUNDLE"
        ) from None
    except (OSError, ssl.SSLError) as exc:
        raise TlsProbeError(f"{endpoint_url}: TLS handshake failed: {exc}") from None
    return {
        "version": version,
        "cipher": name,
        "bits": bits,
        "aead": aead_of(name),
        "openssl": ssl.OPENSSL_VERSION,
    }


def _cheapest(fn: Callable[[int], None], total: int) -> float:
    """CPU s/GiB of ``fn(i)`` for ``total / RECORD`` records, the cheapest of the rounds."""
    n = max(1, total // RECORD)
    best = float("inf")
    for _ in range(_ROUNDS):
        t0 = time.process_time()
        for i in range(n):
            fn(i)
        best = min(best, (time.process_time() - t0) / (n * RECORD / GiB))
    return best


def cipher_cost(aead: str, total: int = _ROUND_BYTES) -> float:
    """CPU seconds per GiB the ``cryptography`` package's ``aead`` costs here, sealing
    16 KiB records (the tag included) into one reused buffer."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

    cipher: Any
    if aead == "ChaCha20-Poly1305":
        cipher = ChaCha20Poly1305(os.urandom(32))
    else:
        cipher = AESGCM(os.urandom(16 if aead == "AES-128-GCM" else 32))
    record = os.urandom(RECORD)
    out = bytearray(RECORD + 16)

    def seal(i: int) -> None:
        cipher.encrypt_into(i.to_bytes(12, "little"), record, None, out)

    return _cheapest(seal, total)


def seal_cost(total: int = _ROUND_BYTES) -> dict[str, Any]:
    """CPU seconds per GiB Python's ssl module spends turning 16 KiB writes into TLS records
    (a TLS 1.3 session over memory BIOs with a throwaway CA: no socket, no peer's work), and
    the cipher that session used."""
    from zerorename.servers.tls import make_tls_files

    with tempfile.TemporaryDirectory(prefix="zr-perf-seal-") as tmp:
        files = make_tls_files(tmp)
        server_ctx, client_ctx = files.server.server_context(), files.client_context()
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(8):
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    record = os.urandom(RECORD)

    def seal(_: int) -> None:
        client.write(record)
        c_out.read()

    cost = _cheapest(seal, total)
    return {"s_per_gib": cost, "cipher": (client.cipher() or ("",))[0]}


def measure(target: Target) -> dict[str, Any] | None:
    """The run's TLS facts for an HTTPS target (None over plain HTTP): the probe, the AEAD's
    cost in ``cryptography`` and Python's ssl sealing cost, in CPU s/GiB."""
    if not target.tls:
        return None
    url = target.endpoint_url or f"https://s3.{target.region}.amazonaws.com"
    info = probe(url, target.ca_bundle)
    if info["aead"]:
        info["aead_s_per_gib"] = cipher_cost(info["aead"])
        info["aead_source"] = "cryptography " + _cryptography_versions()
    seal = seal_cost()
    info["ssl_seal_s_per_gib"] = seal["s_per_gib"]
    info["ssl_seal_cipher"] = seal["cipher"]
    info["record_bytes"] = RECORD
    return info


def _cryptography_versions() -> str:
    import cryptography
    from cryptography.hazmat.backends.openssl.backend import backend

    return f"{cryptography.__version__} ({backend.openssl_version_text()})"


def describe(info: dict[str, Any]) -> list[str]:
    """Lines for the report: what was negotiated and the floors."""
    lines = [f"TLS: {info['version']} {info['cipher']} (a probe with the run's CA bundle)"]
    if info.get("aead_s_per_gib") is not None:
        lines.append(
            f"floor: {info['aead']} costs {info['aead_s_per_gib']:.3f} CPU s/GiB on this CPU "
            f"({info['aead_source']}, {info['record_bytes'] // 1024} KiB records)"
        )
    else:
        lines.append(f"floor: no AEAD cost measured for cipher {info['cipher']!r}")
    lines.append(
        f"Python's ssl ({info['openssl']}) seals {info['record_bytes'] // 1024} KiB writes "
        f"into TLS records for {info['ssl_seal_s_per_gib']:.3f} CPU s/GiB "
        f"({info['ssl_seal_cipher']}): no client on Python's ssl sends for less (obstore "
        "uses rustls)"
    )
    return lines


def floor_notes(info: dict[str, Any], stats: Sequence[Stat]) -> list[str]:
    """Each client's median CPU s/GiB next to the floors (x the AEAD cost, x the ssl cost)."""
    aead = info.get("aead_s_per_gib")
    seal = info.get("ssl_seal_s_per_gib")
    out = []
    for s in stats:
        if s.metric != "cpu_s_per_gib":
            continue
        parts = [f"{s.median:.3f} CPU s/GiB"]
        if aead:
            parts.append(f"{s.median / aead:.1f}x the {info['aead']} floor")
        if seal:
            parts.append(f"{s.median / seal:.1f}x Python's ssl sealing")
        label = f"{s.client} {s.group}".strip()
        out.append(f"  {label}: " + ", ".join(parts))
    return out
