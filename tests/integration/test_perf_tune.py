"""``--latency-ms`` for ``perf upload``/``perf sweep`` and ``perf tune`` on the sink, at a
tiny size (smoke tests of what runs and what is reported: no figure is compared with a time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_perf_harness import check_doc

from perf_helpers import perf
from zerorename.perf.model import Target
from zerorename.perf.opentarget import TargetError
from zerorename.perf.scenarios import sweep as sweep_scenario
from zerorename.perf.scenarios import upload as upload_scenario

#: an upload of 6 MiB in 5 MiB parts: create, 2 parts, complete, then head and delete
UPLOAD_REQUESTS = 6.0


def test_upload_latency_ms_sends_every_request_through_the_proxy(tmp_path: Path) -> None:
    args = ["upload", "--target", "sink", "--reps", "1", "--size", "6MiB"]
    args += ["--part-size", "5MiB", "--concurrency", "2", "--clients", "zerorename"]
    doc = perf([*args, "--latency-ms", "5"], tmp_path)
    (sample,) = doc["samples"]
    assert sample["params"]["latency_ms"] == 5.0
    assert sample["metrics"]["verified"] == 1.0
    assert sample["metrics"]["requests"] == UPLOAD_REQUESTS
    assert "--latency-ms 5: every request went through the fault proxy" in doc["_stdout"]
    # without --latency-ms no proxy and no request count: every sample of
    # test_perf_harness.py's runs on the sink is checked for that


def test_sweep_latency_ms_every_setting_through_the_proxy(tmp_path: Path) -> None:
    """The sweep on the sink: every setting of pools x concurrencies x part sizes ran once
    (verified), through the proxy; its notes and its own plot."""
    png = tmp_path / "sweep.png"
    args = ["sweep", "--target", "sink", "--reps", "1", "--size", "6MiB", "--pools", "2,4"]
    args += ["--concurrencies", "1,2", "--part-sizes", "5MiB", "--latency-ms", "5"]
    doc = perf([*args, "--plot", str(png)], tmp_path)
    check_doc(doc, "sweep", reps=1)
    assert {s["group"] for s in doc["samples"]} == {
        f"pool={p} conc={c} part=5MiB" for p in (2, 4) for c in (1, 2)
    }
    assert len(doc["samples"]) == 4
    for s in doc["samples"]:
        assert s["metrics"]["requests"] == UPLOAD_REQUESTS and s["params"]["latency_ms"] == 5.0
    assert any(n.startswith("recommended: max_concurrency=") for n in doc["notes"])
    assert "recommended: " in doc["_stdout"]
    assert "stops growing at concurrency" in doc["_stdout"]
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("module", [upload_scenario, sweep_scenario])
def test_latency_ms_needs_an_http_target(module: Any) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(["--latency-ms", "20", "--size", "1KiB"])
    https = Target(name="url", endpoint_url="https://s3.example.com", bucket="b")
    with pytest.raises(TargetError, match=r"http:// endpoints only, not https://s3\.example"):
        module.plan(args, https)
    with pytest.raises(TargetError, match="not AWS"):
        module.plan(args, Target(name="aws", endpoint_url=None, bucket="b"))
    for bad in ("0", "-5", "x", "nan"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--latency-ms", bad])


def test_tune_refuses_an_https_target_before_probing() -> None:
    import argparse

    from zerorename.perf.scenarios.tune import scenario as tune_scenario

    parser = argparse.ArgumentParser()
    tune_scenario.add_arguments(parser)
    args = parser.parse_args(["--latency-ms", "20"])
    args.run_timeout = 60.0
    https = Target(name="url", endpoint_url="https://s3.example.com", bucket="b")
    with pytest.raises(TargetError, match="http:// endpoints only"):
        tune_scenario.plan(args, https)


def test_the_proxys_cpu_counts_against_the_ceiling_of_the_runs() -> None:
    """With --latency-ms the proxy shares every measured process's interpreter."""
    from zerorename.perf.scenarios.tune import scenario as tune_scenario

    got = {"rtt_s": 0.02, "part_bytes": 8.0 * 2**20, "part_s": 0.04, "cpu_s_per_gib": 0.5}
    alone = tune_scenario._probe_of(got)
    shared = tune_scenario._probe_of({**got, "proxy_cpu_s_per_gib": 0.5})
    assert alone.cpu_s_per_gib == 0.5 and shared.cpu_s_per_gib == 1.0


def test_tune_on_the_sink_probes_proposes_measures_and_advises_per_latency_and_plots(
    tmp_path: Path,
) -> None:
    """One invocation probes, brackets and advises per latency, and plots them; each
    latency's advice checked in full (one tuning of 0 and 5 ms proves what a tuning of
    5 ms alone did, plus the list)."""
    from zerorename.engine import EngineConfig
    from zerorename.units import MiB

    advice, png = tmp_path / "advice.json", tmp_path / "tune.png"
    args = ["tune", "--target", "sink", "--reps", "1", "--size", "16MiB", "--latency-ms", "0,5"]
    args += ["--executor-cores", "3", "--advice", str(advice), "--plot", str(png)]
    doc = perf(args, tmp_path)
    per = json.loads(advice.read_text())["per_latency"]
    assert [p["latency_ms"] for p in per] == [0.0, 5.0]
    by_latency: dict[float, int] = {}
    for s in doc["samples"]:
        by_latency[s["params"]["latency_ms"]] = by_latency.get(s["params"]["latency_ms"], 0) + 1
        assert s["metrics"]["requests"] >= 3 and s["group"].startswith("lat=")
    assert set(by_latency) == {0.0, 5.0}  # no run outside the grids
    out = doc["_stdout"]
    for p in per:
        # every setting of the (bracketed) grid ran once at its latency, through the proxy
        assert by_latency[p["latency_ms"]] == len(p["grid"]) >= 2
        assert p["probe"]["rtt_s"] > 0
        assert p["probe"]["bound"].split(" ")[0] in ("client", "server")
        assert p["probe"]["burst_concurrency"] >= 1 and p["probe"]["client_ceiling_mb_s"] > 0
        assert 0 < p["pick_over_best"] <= 1
        added = {(c, q) for c, q in p["bracket"]["added"]}
        assert added <= {(g["concurrency"], g["part_size"]) for g in p["grid"]}
        proposed = [p["proposal"]["concurrency"], p["proposal"]["part_size"]]
        assert proposed in [[g["concurrency"], g["part_size"]] for g in p["grid"]]
        for s in doc["samples"]:
            if s["params"]["latency_ms"] == p["latency_ms"]:
                assert s["metrics"]["verified"] == 1.0  # and requests >= 3: PUT(s), HEAD, DELETE
                assert s["params"]["proposed"] == proposed
        rec = p["recommendation"]
        assert [rec["concurrency"], rec["part_size"]] in p["indistinguishable"]
        assert p["sureness"].startswith("not sure: one run per setting")
        cfg = eval(rec["engine_config"], {"EngineConfig": EngineConfig, "MiB": MiB})
        assert (cfg.part_size, cfg.max_concurrency) == (rec["part_size"], rec["concurrency"])
        assert cfg.max_pool_connections == rec["concurrency"] + rec["commit_completes_in_flight"]
        assert rec["per_executor"]["python_workers"] == 3
        assert rec["memory_bytes_per_process"] == (rec["concurrency"] + 2) * rec["part_size"]
        assert f'.option("poolSize", "{rec["spark_options"]["poolSize"]}")' in out
    for line in ("model: RTT ", "measured knee: concurrency ", "how sure: not sure", "Python:  "):
        assert line in out
    assert "-- latency 0 ms --" in out and "-- latency 5 ms --" in out
    assert "--latency-ms 0,5: every request of each latency's runs went through" in out
    assert out.count("measured knee: ") == 2 and out.count("bound: ") == 2
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
