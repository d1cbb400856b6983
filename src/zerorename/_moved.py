"""The old paths of moved modules, in one table (issue 21): ``import zerorename.<old>`` and
``from zerorename.<old> import X`` give the moved module itself (the same object, under
its new ``__name__``), and the old path becomes an attribute of its parent package as an
import always makes it. A moved package's submodules follow it.

An import hook (:class:`MovedFinder`, first on ``sys.meta_path``, installed by the package's
``__init__``) answers for the old paths alone; it imports nothing until an old path is
imported. ``python -m <old path>`` runs the moved module. Code of the package imports the
new paths (tests/test_architecture.py checks it); pickles name them too, since a class or
function is pickled by its ``__module__``.

To add a row: ``"zerorename.<old>": "zerorename.<new>",`` in :data:`MOVED` (no old path may
exist as a file).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType

#: old dotted path -> where that module lives now
MOVED: dict[str, str] = {
    # the `zerorename` command: cli/
    "zerorename.clijson": "zerorename.cli.json",
    "zerorename.cliopts": "zerorename.cli.options",
    "zerorename.cliprogress": "zerorename.cli.progress",
    "zerorename.clirun": "zerorename.cli.runner",
    "zerorename.commands": "zerorename.cli.commands",
    "zerorename.dirupload": "zerorename.cli.dirupload",
    "zerorename.committers.cli": "zerorename.cli.jobs",
    "zerorename.committers.cliargs": "zerorename.cli.jobargs",
    "zerorename.committers.cmdclaim": "zerorename.cli.claims",
    "zerorename.spark_adapter.demo": "zerorename.cli.demo",
    # the engine: engine/bodies/, engine/wire/, engine/ops/
    "zerorename.engine.records": "zerorename.engine.results",
    "zerorename.engine.store": "zerorename.engine.ops.objects",
    "zerorename.engine.completion": "zerorename.engine.ops.completion",
    "zerorename.engine.client": "zerorename.engine.wire.client",
    "zerorename.engine.fastpath": "zerorename.engine.wire.fastpath",
    "zerorename.engine.fastanswers": "zerorename.engine.wire.fastanswers",
    "zerorename.engine.answers": "zerorename.engine.wire.answers",
    "zerorename.engine.trailer": "zerorename.engine.wire.trailer",
    "zerorename.engine.sources": "zerorename.engine.bodies.sources",
    "zerorename.engine.filebody": "zerorename.engine.bodies.filebody",
    "zerorename.engine.writers": "zerorename.engine.bodies.writers",
    "zerorename.engine.runner": "zerorename.portal",
    # the job commit: committers/commit/
    "zerorename.committers.commitlock": "zerorename.committers.commit.lock",
    "zerorename.committers.jobcommit": "zerorename.committers.commit.run",
    "zerorename.committers.jobcomplete": "zerorename.committers.commit.complete",
    "zerorename.committers.jobpolicy": "zerorename.committers.commit.policy",
    "zerorename.committers.jobresult": "zerorename.committers.commit.result",
    "zerorename.committers.jobscan": "zerorename.committers.commit.scan",
    "zerorename.committers.jobstorage": "zerorename.committers.commit.storage",
    "zerorename.committers.journal": "zerorename.committers.commit.journal",
    "zerorename.committers.spool": "zerorename.committers.commit.spool",
    "zerorename.committers.window": "zerorename.committers.commit.window",
    # the record codecs: committers/codec/
    "zerorename.committers.jsonstream": "zerorename.committers.codec.jsonstream",
    "zerorename.committers.records": "zerorename.committers.codec.pending",
    "zerorename.committers.s3aformat": "zerorename.committers.codec.hadoop",
    "zerorename.committers.successdata": "zerorename.committers.codec.success",
    "zerorename.committers.validate": "zerorename.committers.codec.validate",
    # Hadoop S3A interop: committers/s3a/
    "zerorename.committers.s3aabort": "zerorename.committers.s3a.abort",
    "zerorename.committers.s3ajobs": "zerorename.committers.s3a.jobs",
    "zerorename.committers.s3alayout": "zerorename.committers.s3a.layout",
    "zerorename.committers.s3aread": "zerorename.committers.s3a.read",
    # perf's scenarios: perf/scenarios/
    "zerorename.perf.commit_latency": "zerorename.perf.scenarios.commit.latency",
    "zerorename.perf.commit_scenario": "zerorename.perf.scenarios.commit.scenario",
    "zerorename.perf.commit_verify": "zerorename.perf.scenarios.commit.verify",
    "zerorename.perf.floor_commit": "zerorename.perf.scenarios.commit.floor",
    "zerorename.perf.many_scenario": "zerorename.perf.scenarios.many",
    "zerorename.perf.rename_baseline": "zerorename.perf.scenarios.rename_baseline",
    "zerorename.perf.spark_scenario": "zerorename.perf.scenarios.spark",
    "zerorename.perf.stream_check": "zerorename.perf.scenarios.stream.check",
    "zerorename.perf.stream_measure": "zerorename.perf.scenarios.stream.measure",
    "zerorename.perf.stream_scenario": "zerorename.perf.scenarios.stream.scenario",
    "zerorename.perf.sweep_scenario": "zerorename.perf.scenarios.sweep",
    "zerorename.perf.tune_scenario": "zerorename.perf.scenarios.tune.scenario",
    "zerorename.perf.tunegrid": "zerorename.perf.scenarios.tune.grid",
    "zerorename.perf.tunemodel": "zerorename.perf.scenarios.tune.model",
    "zerorename.perf.upload_latency": "zerorename.perf.scenarios.upload_latency",
    "zerorename.perf.upload_scenario": "zerorename.perf.scenarios.upload",
    # perf's own parts
    "zerorename.perf.targets": "zerorename.perf.opentarget",
    # the Spark adapter: the files a task writes (files/), streaming (stream/), the task side
    "zerorename.spark_adapter.csvformat": "zerorename.spark_adapter.files.csvformat",
    "zerorename.spark_adapter.formats": "zerorename.spark_adapter.files.formats",
    "zerorename.spark_adapter.javatext": "zerorename.spark_adapter.files.javatext",
    "zerorename.spark_adapter.jsonformat": "zerorename.spark_adapter.files.jsonformat",
    "zerorename.spark_adapter.partitioning": "zerorename.spark_adapter.files.partitioning",
    "zerorename.spark_adapter.router": "zerorename.spark_adapter.files.router",
    "zerorename.spark_adapter.spill": "zerorename.spark_adapter.files.spill",
    "zerorename.spark_adapter.streaming": "zerorename.spark_adapter.stream.writer",
    "zerorename.spark_adapter.streamjobs": "zerorename.spark_adapter.stream.jobs",
    "zerorename.spark_adapter.streamlog": "zerorename.spark_adapter.stream.log",
    "zerorename.spark_adapter.streamread": "zerorename.spark_adapter.stream.read",
    "zerorename.spark_adapter.streamsink": "zerorename.spark_adapter.stream.sink",
    "zerorename.spark_adapter.streamtask": "zerorename.spark_adapter.stream.task",
    "zerorename.spark_adapter.jobs": "zerorename.spark_adapter.write",
    # the S3 servers, a product feature: testing/ -> servers/
    "zerorename.testing.errors": "zerorename.servers.errors",
    "zerorename.testing.faultproxy": "zerorename.servers.faultproxy",
    "zerorename.testing.faultrules": "zerorename.servers.faultrules",
    "zerorename.testing.proxybody": "zerorename.servers.proxybody",
    "zerorename.testing.requestlog": "zerorename.servers.requestlog",
    "zerorename.testing.servers": "zerorename.servers.servers",
    "zerorename.testing.service": "zerorename.servers.service",
    "zerorename.testing.sink": "zerorename.servers.sink",
    "zerorename.testing.targets": "zerorename.servers.targets",
    "zerorename.testing.tls": "zerorename.servers.tls",
    "zerorename.testing.wsgiserver": "zerorename.servers.wsgiserver",
}


def moved_to(name: str) -> str | None:
    """Where the module ``name`` lives now when ``name`` is an old path (its row, or a
    submodule of a moved package's row), else None."""
    if name in MOVED:
        return MOVED[name]
    if not name.startswith("zerorename."):
        return None  # (every import asks this hook first)
    head, _, tail = name.rpartition(".")
    while head.count("."):  # "zerorename" itself never moved
        if head in MOVED:
            return f"{MOVED[head]}.{tail}"
        head, _, last = head.rpartition(".")
        tail = f"{last}.{tail}"
    return None


class MovedFinder:
    """The import hook of the old paths (a finder and loader of ``sys.meta_path``): it finds
    an old path alone, and loads it by importing the new one and putting that module in
    ``sys.modules`` under the old name, which the import system then returns as is."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = moved_to(fullname)
        if new is None:
            return None
        from importlib.util import find_spec

        found = find_spec(new)  # the moved module's parents are imported, not itself
        if found is None:
            return None
        return ModuleSpec(
            fullname,
            self,  # type: ignore[arg-type]  # a loader by its methods (importlib.abc is slow to import)
            origin=found.origin,
            is_package=found.submodule_search_locations is not None,
        )

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # a placeholder module, replaced by exec_module

    def exec_module(self, module: ModuleType) -> None:
        from importlib import import_module

        name = module.__spec__.name if module.__spec__ else module.__name__
        new = moved_to(name)
        if new is None:
            raise ImportError(f"{name} is no old path of a moved module", name=name)
        sys.modules[name] = import_module(new)

    def get_code(self, fullname: str) -> CodeType | None:
        """The moved module's code, for ``python -m <old path>`` (runpy runs the code)."""
        from importlib.util import find_spec

        new = moved_to(fullname)
        found = find_spec(new) if new else None
        get_code = getattr(found.loader, "get_code", None) if found else None
        if found is None or get_code is None:
            raise ImportError(f"no code for {fullname}", name=fullname)
        code: CodeType | None = get_code(found.name)
        return code


def install() -> None:
    """Put the hook first on ``sys.meta_path`` (once): an old path is answered before any
    file of that name could be. Also after a reload of this module (a new class)."""
    if not any(
        type(f).__module__ == __name__ and type(f).__qualname__ == "MovedFinder"
        for f in sys.meta_path
    ):
        sys.meta_path.insert(0, MovedFinder())
