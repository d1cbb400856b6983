"""Hadoop accepts the records of a real Spark write (issue 13): the ``.pending`` and
``.pendingset`` records every task leaves (captured by the tasks themselves, before the
job commit deletes them) and the ``_SUCCESS``, for the magic, directory and partitioned
committers, parsed and validated by Hadoop's own classes (``s3a-oracle``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from s3a_oracle.oracle import Oracle, s3a_oracle  # noqa: F401 (the fixture)
from zerorename.committers.codec.pending import SuccessData, read_pendingset
from zerorename.spark_adapter.datasource import ZeroRenameDataSource, ZeroRenameWriter

pytestmark = pytest.mark.spark

#: which records a task captures at which stage: a magic attempt's .pending records
#: are gone after its task commit, its .pendingset exists only from then on
CAPTURE = {"files_closed": ".pending", "committed": ".pendingset"}


async def _records(engine: Any, bucket: str, prefix: str, suffix: str) -> dict[str, bytes]:
    out = {}
    async for o in engine.list_objects(bucket, prefix):
        if o.key.endswith(suffix):
            out[o.key] = await engine.get_object(bucket, o.key)
    return out


class CapturingWriter(ZeroRenameWriter):
    """Copies the job's records from the store into a local directory at each stage."""

    capture_dir: str

    def checkpoint(self, stage: str, partition: int, attempt: int) -> None:
        suffix = CAPTURE.get(stage)
        if suffix is None:
            return
        from zerorename.committers import Destination
        from zerorename.committers.paths import JobLayout
        from zerorename.spark_adapter.bridge import get_bridge
        from zerorename.spark_adapter.write import engine_for

        dest = Destination.parse(self.opts.path)
        layout = JobLayout(dest, self.job_id)
        # this partition's own .pending records (a task running at the same time has its
        # own until its task commit; task ids are <partition>_<task attempt id>); every
        # committed task's .pendingset
        mine = f"{layout.tasks_dir}{partition:05d}_"
        where = mine if suffix == ".pending" else layout.root
        found = get_bridge().run(_records(engine_for(self.opts), dest.bucket, where, suffix))
        out = Path(self.capture_dir)
        for i, (key, data) in enumerate(sorted(found.items())):
            name = key.rsplit("/", 1)[-1] if suffix == ".pendingset" else f"p{partition}-{i}"
            (out / f"{name}{suffix}").write_bytes(data)


class CapturingDataSource(ZeroRenameDataSource):
    @classmethod
    def name(cls) -> str:
        return "zerorename_s3a_capture"

    def writer(self, schema: Any, overwrite: bool) -> ZeroRenameWriter:
        capture_dir = self.options.pop("capturedir")
        w = super().writer(schema, overwrite)
        capturing = CapturingWriter(w.opts, w.job_id)
        capturing.capture_dir = capture_dir
        return capturing


cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.mark.parametrize("committer", ["magic", "directory", "partitioned"])
def test_spark_write_records_pass_hadoop(
    spark: Any,
    zr: Any,
    committer: str,
    tmp_path: Path,
    s3a_oracle: Oracle,  # noqa: F811
) -> None:
    spark.dataSource.register(CapturingDataSource)
    captured = tmp_path / "records"
    captured.mkdir()
    df = spark.range(0, 300, 1, 3).selectExpr("id", "CAST(id % 2 AS INT) AS k")
    opts = zr.options(committer=committer, capturedir=str(captured), partitionBy="k")
    df.write.format("zerorename_s3a_capture").mode("append").options(**opts).save(zr.uri())

    data = zr.data_keys()
    assert len(data) == 6  # 3 tasks x 2 partitions
    sets = sorted(captured.glob("*.pendingset"))
    pending = sorted(captured.glob("*.pending"))
    assert len(sets) == 3
    assert len(pending) == (6 if committer == "magic" else 0)
    for kind, files in (("pendingset", sets), ("pending", pending)):
        if files:
            bad = [v.text for v in s3a_oracle.check(kind, *files) if not v.valid]
            assert not bad, f"Hadoop refused the {committer} committer's {kind}: {bad}"
    keys = set()
    for p in sets:
        header, recs = read_pendingset(p.read_bytes(), str(p))
        assert header.extra.get("committer") in (committer, "staging")
        keys |= {r.upload.key for r in recs}
    assert keys == {zr.prefix() + k for k in data}

    success = tmp_path / "_SUCCESS"
    success.write_bytes(zr.get(zr.prefix() + "_SUCCESS"))
    verdict = s3a_oracle.check("success", success)[0]
    assert verdict.valid, verdict.text
    s = SuccessData.from_json(success.read_bytes())
    assert sorted(s.filenames) == sorted("/" + zr.prefix() + k for k in data)
    assert s.metrics["rows"] == 300 and "duration_ms" in s.metrics
