"""Hadoop S3A's own record classes as a test oracle (see ``s3a-oracle`` and NOTICE here).

``s3a_oracle`` (session fixture) compiles the Java sources once per session into a
temporary directory and returns an :class:`Oracle`: ``check(kind, *files)`` parses each
file with Hadoop's ``JsonSerialization`` and runs its ``validate()``; ``gen(dir)`` writes a
``.pending``, a ``.pendingset`` and a ``_SUCCESS`` as Hadoop's serializers do. The
fixture skips only where ``javac`` or ``java`` is missing; pyspark (whose Hadoop client
jars the classes compile against) is a dev dependency, so its absence is an error.
Import the fixture into a test module: ``from s3a_oracle.oracle import s3a_oracle``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "s3a-oracle"
KINDS = ("pending", "pendingset", "success", "manifest-success")


@dataclass(frozen=True)
class Verdict:
    """What Hadoop said of one file: ``valid``, and its line (the record or the reason)."""

    kind: str
    path: str
    valid: bool
    text: str


class Oracle:
    """Runs the compiled oracle (one JVM per call)."""

    def __init__(self, classes: Path) -> None:
        self.classes = classes

    def _run(self, *args: str) -> str:
        env = {**os.environ, "S3A_ORACLE_CLASSES": str(self.classes), "PY": sys.executable}
        out = subprocess.run(
            ["bash", str(SCRIPT), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"s3a-oracle {' '.join(args)} failed: {out.stderr[-2000:]}")
        return out.stdout

    def check(self, kind: str, *files: Path | str) -> list[Verdict]:
        """Hadoop's verdict on each file (in order)."""
        assert kind in KINDS and files
        verdicts: list[Verdict] = []
        current: tuple[str, str] | None = None
        for line in self._run(kind, *map(str, files)).splitlines():
            if line.startswith("== "):
                got_kind, _, path = line[3:].partition(" ")
                current = (got_kind, path)
            elif line.startswith(("  VALID: ", "  REJECTED: ")) and current is not None:
                valid = line.startswith("  VALID: ")
                verdicts.append(Verdict(current[0], current[1], valid, line[2:]))
                current = None
        assert len(verdicts) == len(files), verdicts
        return verdicts

    def gen(self, outdir: Path) -> dict[str, Path]:
        """Hadoop-written records in ``outdir``: ``pending``, ``pendingset``, ``success``."""
        self._run("gen", str(outdir))
        return {
            "pending": outdir / "part-00000.pending",
            "pendingset": outdir / "task_202601010000_0000_m_000000.pendingset",
            "success": outdir / "_SUCCESS",
        }


def java_missing() -> str | None:
    """Why the oracle cannot run here (None: it can)."""
    missing = [tool for tool in ("javac", "java") if shutil.which(tool) is None]
    if missing:
        return (
            f"{' and '.join(missing)} not found: the S3A oracle needs a JDK (17); "
            f"apt-get install -y openjdk-17-jdk-headless"
        )
    return None


@pytest.fixture(scope="session")
def s3a_oracle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Oracle]:
    """The oracle, compiled once per session (skips only without javac/java)."""
    reason = java_missing()
    if reason is not None:
        pytest.skip(reason)
    oracle = Oracle(tmp_path_factory.mktemp("s3a-oracle-classes"))
    oracle.gen(tmp_path_factory.mktemp("s3a-oracle-warmup"))  # compiles, and proves it runs
    yield oracle
