"""A stream batch's driver that dies in its commit, for the tests of what the operator's
``zerorename jobs`` does with such a job. The commit stores the sink's records itself
(its intent with the journal, the batch with ``succeeded``); the driver's engine (the
real one, on a real server) "dies" at its writes of the query's log, as a process would
between those requests."""

from __future__ import annotations

from typing import Any

from zerorename.committers import Committer, MagicCommitter
from zerorename.committers.commit.result import CommitRecords
from zerorename.spark_adapter.stream.log import StreamLog
from zerorename.spark_adapter.stream.sink import STREAM_COMMIT, StreamSink


class DriverDied(Exception):
    """The driver's process ends here (raised at its write of the stream log)."""


class DyingEngine:
    """The engine ``engine`` (every call passed on) of a driver that dies at the log
    ``key``: right after its first write (the intent) with ``when="intent"``, else at
    its second (the batch recorded), before it is sent."""

    def __init__(self, engine: Any, key: str, when: str) -> None:
        self._engine, self._key, self._when = engine, key, when
        self._writes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    async def put_object(self, bucket: str, key: str, data: bytes, **kwargs: Any) -> Any:
        if key != self._key:
            return await self._engine.put_object(bucket, key, data, **kwargs)
        self._writes += 1
        if self._writes > 1:
            raise DriverDied("after every complete")
        answer = await self._engine.put_object(bucket, key, data, **kwargs)
        if self._when == "intent":
            raise DriverDied("after the intent")
        return answer


def dying_committer(sink: StreamSink, when: str) -> Committer:
    """The sink's committer on a :class:`DyingEngine` of its engine."""
    engine = DyingEngine(sink.committer.engine, sink.key, when)
    return MagicCommitter(engine, sink.dest.uri, conflict="append", options=STREAM_COMMIT)


def batch_records(sink: StreamSink, intent: StreamLog) -> CommitRecords:
    """What the sink's commit of the intent's batch sends in its rounds (the batch's
    record never gets out: the driver dies first)."""
    return CommitRecords(
        with_journal=(sink.log_record(intent),),
        with_succeeded=(sink.log_record(intent.without_intent()),),
    )
