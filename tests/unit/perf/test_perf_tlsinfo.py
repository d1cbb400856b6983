"""perf.tlsinfo's pure parts: the AEAD named by a cipher suite, and the floor notes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zerorename.perf.report import Stat
from zerorename.perf.tlsinfo import aead_of, floor_notes


def test_aead_of_the_suites_openssl_names() -> None:
    assert aead_of("TLS_AES_256_GCM_SHA384") == "AES-256-GCM"
    assert aead_of("TLS_AES_128_GCM_SHA256") == "AES-128-GCM"
    assert aead_of("TLS_CHACHA20_POLY1305_SHA256") == "ChaCha20-Poly1305"
    assert aead_of("ECDHE-RSA-AES256-GCM-SHA384") == "AES-256-GCM"
    assert aead_of("ECDHE-ECDSA-AES128-GCM-SHA256") == "AES-128-GCM"
    assert aead_of("ECDHE-RSA-CHACHA20-POLY1305") == "ChaCha20-Poly1305"
    assert aead_of("ECDHE-RSA-AES256-SHA384") is None  # CBC: not an AEAD measured here
    assert aead_of("") is None


@given(st.text())
def test_aead_of_any_text_is_one_of_the_known_or_none(name: str) -> None:
    assert aead_of(name) in (None, "AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305")


def test_floor_notes_divide_each_median_by_the_floors() -> None:
    info = {"aead": "AES-256-GCM", "aead_s_per_gib": 0.1, "ssl_seal_s_per_gib": 0.25}
    stats = [
        Stat("g", "zerorename", "cpu_s_per_gib", 0.5, 0.4, 0.6, 3),
        Stat("g", "zerorename", "mb_s", 900.0, 800.0, 1000.0, 3),
    ]
    assert floor_notes(info, stats) == [
        "  zerorename g: 0.500 CPU s/GiB, 5.0x the AES-256-GCM floor, 2.0x Python's ssl sealing"
    ]
    assert floor_notes({"ssl_seal_s_per_gib": 0.25}, stats[:1]) == [
        "  zerorename g: 0.500 CPU s/GiB, 2.0x Python's ssl sealing"
    ]
