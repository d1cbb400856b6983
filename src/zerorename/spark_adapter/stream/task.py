"""A stream task attempt's writer: what a task of a micro-batch runs (see
:mod:`zerorename.spark_adapter.stream.writer`). Apart from the stream writer's module so that the
process that only builds and pickles that writer loads no committer, engine or bridge."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerorename.spark_adapter.stream.sink import ensure_job, stream_committer
from zerorename.spark_adapter.write import TaskWriter

if TYPE_CHECKING:
    import pyarrow as pa

    from zerorename.spark_adapter.files.router import BatchRouter


class StreamTaskWriter(TaskWriter):
    """A task attempt of one micro-batch: sets the batch's job up on its first rows."""

    query_id = ""
    batch_id = 0

    def _start(self, schema: pa.Schema) -> BatchRouter:
        committer = stream_committer(self.opts)
        self._bridge.run(ensure_job(committer, self.job_id, self.query_id, self.batch_id))
        return super()._start(schema)


__all__ = ["StreamTaskWriter"]
