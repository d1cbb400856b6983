"""The perf harness over HTTPS: ``--tls`` on the sink, moto and RGW, an https:// URL with
``--ca-bundle``, and every measured client verifying the certificate.

Smoke tests at tiny sizes (no figure is compared with a time or a rate): the scenarios run
over TLS, every client's run is verified, the JSON records the negotiated TLS and the
floors, and a client given the wrong CA fails instead of going on unverified.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest
from test_perf_harness import TINY, check_doc

from zerorename.perf import clients
from zerorename.perf.model import Target
from zerorename.servers.sink import SinkServer
from zerorename.servers.tls import make_tls_files

#: the commit's clients: ours and one boto3 loop (boto3-64 is boto3-15's function with 64
#: threads: tests/integration/test_perf_commit.py runs it)
COMMIT = ["--uploads", "20", "--pendingsets", "2", "--prepare-concurrency", "8"]
COMMIT += ["--clients", "zerorename,boto3-15"]
ARGS = {**TINY, "commit": COMMIT}
#: boto3's default (a trailing checksum over HTTPS) and boto3-matched (CRC32 as a trailer)
#: are refused by RGW pacific (MissingContentLength): on RGW boto3 runs when_required.
#: On moto the clients that send trailing checksums (where the servers differ); the others
#: (no checksum: boto3-when-required, obstore) verify the CA on the sink as on any server
CLIENTS = {
    "rgw": "zerorename,boto3-when-required,obstore",
    "sink": "zerorename,boto3-default,boto3-matched,boto3-when-required,obstore",
    "moto": "zerorename,boto3-default,boto3-matched",
}


def perf(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerorename.perf", *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
        check=False,
    )


def run_ok(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    out = tmp_path / "out.json"
    proc = perf([*args, "--json", str(out), "--quiet"], env)
    assert proc.returncode == 0, f"{args}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    doc: dict[str, Any] = json.loads(out.read_text())
    doc["_stdout"] = proc.stdout
    return doc


def check_tls(doc: dict[str, Any]) -> None:
    """The target was HTTPS, the probe negotiated TLS, the floors were measured and shown."""
    assert doc["target"]["tls"] is True and doc["target"]["endpoint_url"].startswith("https://")
    tls = doc["tls"]
    assert tls["version"].startswith("TLSv1.") and tls["cipher"] and tls["bits"] >= 128
    assert tls["aead"] in ("AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305"), tls
    assert tls["aead_s_per_gib"] > 0 and tls["ssl_seal_s_per_gib"] > 0
    assert f"TLS: {tls['version']} {tls['cipher']}" in doc["_stdout"]
    assert f"floor: {tls['aead']} costs" in doc["_stdout"]


#: the scenarios over TLS on the sink (every upload client; the commit's: see COMMIT); on
#: moto and RGW the upload, whose trailing checksums are where the servers differ (the
#: other scenarios' requests are the sink's, and test_perf_commit/test_perf_harness run them
#: on both servers over HTTP).
#: 'many' over TLS on the sink, every client: test_an_https_url_target_is_verified_with_
#: ca_bundle (the same HTTPS sink and checks; the CA given by --ca-bundle, not made by
#: --tls, whose hand-off to every client is the Target's, shown here with the upload)
#: (rgw: the RGW policy of tests/conftest.py: skipped when not installed, failed under CI=true)
TLS_RUNS = [
    ("sink", "upload"),
    ("sink", "commit"),
    ("moto", "upload"),
    pytest.param("rgw", "upload", marks=pytest.mark.rgw),
]


@pytest.mark.parametrize(("target", "scenario"), TLS_RUNS)
def test_scenarios_over_tls(target: str, scenario: str, tmp_path: Path) -> None:
    args = [scenario, "--target", target, "--tls", "--reps", "1", *ARGS[scenario]]
    if scenario != "commit":
        args += ["--clients", CLIENTS[target]]
    if target == "rgw":
        args += ["--rgw-store", "memstore"]
    doc = run_ok(args, tmp_path)
    check_doc(doc, scenario, reps=1)
    check_tls(doc)
    assert doc["failures"] == []
    clients = {s["client"] for s in doc["samples"]}
    wanted = set(CLIENTS[target].split(",")) if scenario != "commit" else set()
    assert clients >= wanted | {"zerorename"}
    if scenario == "upload":
        ours = [s["metrics"] for s in doc["samples"] if s["client"] == "zerorename"]
        # the engine's file parts went read-once with a trailing checksum; RGW refuses it
        # once (one fallback), then every part goes the two-pass way
        bodies = 0 if target == "rgw" else 2
        assert [(m["trailer_bodies"], m["trailer_fallbacks"]) for m in ours] == [
            (bodies, int(target == "rgw"))
        ]
        floors = [n for n in doc["notes"] if "x the " + doc["tls"]["aead"] + " floor" in n]
        assert {n.split()[0] for n in floors} >= wanted


def test_an_https_url_target_is_verified_with_ca_bundle(tmp_path: Path) -> None:
    """--ca-bundle (or AWS_CA_BUNDLE) verifies an https:// endpoint for every client; without
    it the run refuses before measuring anything, in one line naming the fix."""
    files = make_tls_files(tmp_path / "tls")
    env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "benchsecret"}
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    with SinkServer(buckets=("urlbucket",), tls=files.server) as sink:
        base = ["many", "--target", sink.endpoint_url, "--bucket", "urlbucket", "--reps", "1"]
        base += [*TINY["many"], "--clients", CLIENTS["sink"]]
        doc = run_ok([*base, "--ca-bundle", str(files.ca_bundle)], tmp_path, env)
        check_doc(doc, "many", reps=1)
        check_tls(doc)
        assert doc["target"]["name"] == "url" and doc["failures"] == []
        assert doc["target"]["ca_bundle"] == str(files.ca_bundle)

        # AWS_CA_BUNDLE becomes the run's CA bundle, handed on as --ca-bundle's was (every
        # client was shown above): obstore, which reads no AWS variable, verifies with it
        # only when the harness hands it on (the engine and boto3 would read it themselves)
        ours = [*base[: base.index("--clients")], "--clients", "obstore"]
        doc = run_ok(ours, tmp_path, {**env, "AWS_CA_BUNDLE": str(files.ca_bundle)})
        assert doc["target"]["ca_bundle"] == str(files.ca_bundle) and doc["failures"] == []
        assert {s["client"] for s in doc["samples"]} == {"obstore"}

        no_ca = {k: v for k, v in os.environ.items() if k != "AWS_CA_BUNDLE"}
        proc = subprocess.run(
            [sys.executable, "-m", "zerorename.perf", *base],
            capture_output=True,
            text=True,
            timeout=300,
            env={**no_ca, **env},
            check=False,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        err = proc.stderr.strip().splitlines()
        assert len(err) == 1 and sink.endpoint_url in err[0], err
        assert "certificate not trusted" in err[0] and "--ca-bundle" in err[0], err
        assert "[perf" not in proc.stderr  # nothing was measured


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--target", "https://127.0.0.1:9", "--bucket", "b", "--tls"], "--tls is for the"),
        (["--target", "sink", "--ca-bundle", "/etc/hostname"], "--ca-bundle is for aws"),
        (
            ["--target", "https://127.0.0.1:9", "--bucket", "b", "--ca-bundle", "/nope.pem"],
            "not a readable file",
        ),
        (
            ["--target", "http://127.0.0.1:9", "--bucket", "b", "--ca-bundle", "/etc/hostname"],
            "plain HTTP",
        ),
    ],
)
def test_tls_options_that_cannot_apply_are_refused(args: list[str], words: str) -> None:
    proc = perf(["many", *args, "--count", "1", "--reps", "1"])
    assert proc.returncode == 1 and words in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


CLIENT_FUNCS = [
    "upload_zerorename",
    "upload_boto3_default",
    "upload_boto3_matched",
    "upload_boto3_when_required",
    "upload_obstore",
    "many_zerorename",
    "many_boto3_default",
    "many_obstore",
]


@pytest.fixture(scope="module")
def tls_sink(tmp_path_factory: pytest.TempPathFactory) -> Any:
    files = make_tls_files(tmp_path_factory.mktemp("tls"))
    with SinkServer(buckets=("bench-tls",), tls=files.server) as sink:
        yield sink, files


@pytest.mark.parametrize("func", CLIENT_FUNCS)
def test_every_client_verifies_the_certificate(tls_sink: Any, func: str) -> None:
    """Each measured client, given a CA that did not sign the sink's certificate, fails (a
    client that skipped verification would upload); given the right one, it succeeds. The
    function is called in this process, as the harness's child calls it (model._child_main:
    ``fn(target, params)``): a child per call only added its interpreter and imports, 16
    of them (the harness's own children are run by test_scenarios_over_tls)."""
    sink, files = tls_sink
    other = make_tls_files(Path(files.directory) / "other")
    target = Target("sink", sink.endpoint_url, "bench-tls", access_key="k", secret_key="s")
    size = 6 * 1024 * 1024
    params = {
        "size": size if func.startswith("upload") else 1024,
        "count": 2,
        "part_size": 5 * 1024 * 1024,
        "concurrency": 2,
        "source": "memory",
        "checksum": "CRC32C",
        "matched_checksum": "CRC32",
    }
    fn = getattr(clients, func)
    wrong = Target(**{**target.to_json(), "ca_bundle": str(other.ca_bundle)})
    with pytest.raises(Exception) as failed:
        fn(wrong, dict(params))
    # the whole chain, as a child's stderr shows it: the cause may be wrapped
    chain = "".join(traceback.format_exception(failed.value))
    assert re.search(r"(?i)certificate|UnknownIssuer|invalid peer", chain), chain
    good = Target(**{**target.to_json(), "ca_bundle": str(files.ca_bundle)})
    assert fn(good, dict(params))["verified"] == 1.0
