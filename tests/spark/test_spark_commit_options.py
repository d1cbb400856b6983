"""The commit's writer options reach the commit from a real Spark: ``commitConcurrency``
bounds the completes in flight (seen on the wire, by a proxy in front of moto), and the
directory committer stages its files in ``stagingDir``, else in Spark's local dirs."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from zerorename.servers.faultproxy import FaultRule
from zerorename.spark_adapter.datasource import ZeroRenameDataSource, ZeroRenameWriter

pytestmark = pytest.mark.spark


def _max_in_flight(log: list[Any], op: str) -> int:
    """The most requests of ``op`` that were being served at one moment."""
    events = sorted(
        [(r.start, 1) for r in log if r.op == op] + [(r.end, -1) for r in log if r.op == op]
    )
    now = most = 0
    for _, step in events:  # an end sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most


def test_commit_concurrency_bounds_the_completes_in_flight(
    spark: Any, zr: Any, fault_proxy: Any
) -> None:
    proxy = fault_proxy(zr.target.endpoint_url)
    # every complete takes 0.3 s at the proxy: completes the commit sends together overlap
    proxy.add_rule(FaultRule(operation="CompleteMultipartUpload", fault="latency", delay=0.3))
    via = dataclasses.replace(zr, target=zr.target.with_endpoint(proxy.url))
    df = spark.range(0, 600, 1, 6).selectExpr("id", "CAST(id % 7 AS INT) AS k")
    df.write.format("zerorename").mode("append").options(**via.options(commitConcurrency=2)).save(
        via.uri()
    )
    log = proxy.timed_log()
    assert sum(r.op == "CompleteMultipartUpload" for r in log) == 6  # six files, one each
    assert _max_in_flight(log, "CompleteMultipartUpload") == 2  # default: all six at once
    assert len(zr.data_keys()) == 6 and zr.pending_uploads() == []


class StagingProbeWriter(ZeroRenameWriter):
    """Records, once a task's files are closed (staged, not yet uploaded), where its
    committer stages them and which files are there, in an object beside the output."""

    def checkpoint(self, stage: str, partition: int, attempt: int) -> None:
        if stage != "files_closed":
            return
        from zerorename.committers import Destination
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.write import engine_for

        root = self.opts.commit.commit_options().staging_dir
        files = sorted(str(p) for p in (root / f"zerorename-{self.job_id}").rglob("*.parquet"))
        note = json.dumps({"root": str(root), "files": files}).encode()
        dest = Destination.parse(self.opts.path + "-probe")
        engine = engine_for(self.opts)
        get_bridge().run(engine.put_object(dest.bucket, dest.key(f"p{partition}"), note))


class StagingProbe(ZeroRenameDataSource):
    @classmethod
    def name(cls) -> str:
        return "zerorename_stagingprobe"

    def writer_class(self) -> type[ZeroRenameWriter]:
        return StagingProbeWriter


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _probe_write(spark: Any, zr: Any, sub: str, **opts: Any) -> list[dict[str, Any]]:
    spark.dataSource.register(StagingProbe)
    df = spark.range(0, 200, 1, 2).selectExpr("id")
    df.write.format("zerorename_stagingprobe").mode("append").options(
        **zr.options(committer="directory", **opts)
    ).save(zr.uri(sub))
    assert len(zr.data_keys(sub)) == 2
    return [json.loads(zr.get(zr.prefix(sub + "-probe") + f"p{i}")) for i in range(2)]


def test_the_directory_committer_stages_in_staging_dir_else_sparks_local_dirs(
    spark: Any, zr: Any, tmp_path: Path
) -> None:
    stage = tmp_path / "stage"
    for note in _probe_write(spark, zr, "given", stagingDir=str(stage)):
        assert note["root"] == str(stage)
        assert note["files"] and all(f.startswith(f"{stage}/zerorename-") for f in note["files"])
    for note in _probe_write(spark, zr, "default"):
        # Spark's block manager directory of the executor (SPARK_LOCAL_DIRS in the worker)
        assert Path(note["root"]).name.startswith("blockmgr-"), note
        assert note["files"] and all(f.startswith(note["root"]) for f in note["files"])
