"""``zerorename perf spark``'s random-order options and its files/write/peak summary against
Spark's own writer (pure: no Spark, no server)."""

from __future__ import annotations

import argparse

from zerorename.perf.model import Sample, Target
from zerorename.perf.scenarios.spark import add_arguments, notes, plan


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def test_plan_carries_order_and_max_open_files_to_every_client() -> None:
    args = _args("--sizes-mb", "15", "--clients", "magic,spark", "--order", "random")
    runs = plan(args, Target(name="moto", endpoint_url=None, bucket="b"))
    assert [r.client for r in runs] == ["magic", "spark"]
    assert all(r.params["order"] == "random" and r.params["max_open_files"] == 16 for r in runs)
    assert _args().order == "sorted" and "spark" not in _args().clients


def test_layout_notes_compare_files_write_time_and_peak_with_sparks_writer() -> None:
    figures = {
        "magic": (1000, 20.0, 180.0),
        "directory": (1000, 18.0, 170.0),
        "spark": (1000, 8.0, 900.0),
    }
    samples = [
        Sample(
            "spark",
            c,
            {"client": c, "size_mb": 15},
            {"files": f, "write_s": w, "peak_rss_mb": p, "verified": 1.0},
        )
        for c, (f, w, p) in figures.items()
    ]
    args = _args("--partitions", "2", "--days", "500", "--order", "random")
    text = "\n".join(notes(samples, args))
    assert "files, write seconds and peak task RSS (random order)" in text
    assert (
        "magic     15 MB: 1000 files, write 20.00 s, peak RSS 180 MB "
        "(bound 2 tasks x 500 values = 1000)" in text
    )
    assert "magic / Spark's own writer at 15 MB: files 1000 / 1000, write time x2.50" in text
    assert "directory / Spark's own writer at 15 MB: files 1000 / 1000, write time x2.25" in text
    assert "job commit" not in text  # no commit_s in these samples
