"""Hadoop S3A's own record classes as a test oracle (see ``s3a-oracle`` and NOTICE here).

``s3a_oracle`` (session fixture) compiles the Java sources once per run (xdist workers
share the classes) and returns an :class:`Oracle` running them in one JVM for the
session (``s3a-oracle``'s commands, sent one a line): ``check(kind, *files)`` parses each
file with Hadoop's ``JsonSerialization`` and runs its ``validate()``; ``gen(dir)`` writes a
``.pending``, a ``.pendingset`` and a ``_SUCCESS`` as Hadoop's serializers do. The
fixture skips only where ``javac`` or ``java`` is missing; pyspark (whose Hadoop client
jars the classes compile against) is a dev dependency, so its absence is an error.
Import the fixture into a test module: ``from s3a_oracle.oracle import s3a_oracle``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
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


#: the jars (in pyspark's ``jars``) the classes compile and run against, as the script's
JARS = (
    "hadoop-client-api",
    "hadoop-client-runtime",
    "commons-lang3",
    "slf4j-api",
    "jakarta.annotation-api",
    "jsr305",
)


def classpath(classes: Path) -> str:
    """``classes`` and the jars of the pyspark this interpreter would import (not imported
    here: its location is enough)."""
    spec = importlib.util.find_spec("pyspark")
    assert spec is not None and spec.origin is not None, "pyspark is a dev dependency"
    jars = Path(spec.origin).parent / "jars"
    found = []
    for name in JARS:
        got = sorted(jars.glob(f"{name}-*.jar"))
        assert got, f"no {name}-*.jar in {jars}"
        found.append(str(got[0]))
    return os.pathsep.join([str(classes), *found])


def sources() -> list[Path]:
    return sorted(p for d in ("src", "src2") for p in (HERE / d).rglob("*.java"))


def compiled(cache: Path) -> Path:
    """The classes, compiled once into ``cache`` (a directory named by the sources' hash;
    other processes of the run, xdist workers, wait for the first one's compile)."""
    digest = hashlib.sha256()
    for src in sources():
        digest.update(str(src.relative_to(HERE)).encode() + b"\0" + src.read_bytes())
    classes = cache / f"s3a-oracle-classes-{digest.hexdigest()[:16]}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "s3a-oracle.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (classes / "harness" / "Check.class").is_file():
            tmp = Path(tempfile.mkdtemp(dir=cache, prefix="s3a-oracle-compiling-"))
            out = subprocess.run(
                ["javac", "-nowarn", "-d", str(tmp), "-cp", classpath(tmp), *map(str, sources())],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if out.returncode != 0:
                shutil.rmtree(tmp, ignore_errors=True)
                raise RuntimeError(f"javac of the s3a oracle failed: {out.stderr[-2000:]}")
            shutil.rmtree(classes, ignore_errors=True)
            tmp.rename(classes)
    return classes


class Oracle:
    """The compiled oracle in ONE JVM (``harness.Check serve``) that runs every command of
    the session: each check parses and validates its files as a fresh ``s3a-oracle`` run
    does (Hadoop's serializers hold no state between files), without a JVM start each."""

    def __init__(self, classes: Path, log: Path) -> None:
        self.classes = classes
        self.log = log
        self._stderr = open(log, "wb")  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            [
                "java",
                "-XX:+UseSerialGC",
                "-Dfile.encoding=UTF-8",
                "-Dstdout.encoding=UTF-8",
                "-cp",
                classpath(classes),
                "harness.Check",
                "serve",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            errors="replace",
        )

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()

    def _failed(self, args: tuple[str, ...], why: str) -> RuntimeError:
        err = self.log.read_text(errors="replace")
        lines = [ln for ln in err.splitlines() if not ln.startswith("SLF4J")]
        said = "\n".join(lines)[-2000:]
        return RuntimeError(
            f"s3a-oracle {' '.join(args)} failed: {why}" + (f"\n{said}" if said else "")
        )

    def _run(self, *args: str) -> str:
        """One command's output (what ``s3a-oracle ARGS`` prints)."""
        assert all("\t" not in a and "\n" not in a for a in args), args
        stdin, stdout = self._proc.stdin, self._proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write("\t".join(args) + "\n")
            stdin.flush()
        except BrokenPipeError:
            raise self._failed(args, f"the JVM exited ({self._proc.poll()})") from None
        out = []
        failed = None
        while (line := stdout.readline()) != "== end\n":
            if not line:
                raise self._failed(args, f"the JVM exited ({self._proc.wait()})")
            if line.startswith("== failed: "):
                failed = line[len("== failed: ") :].strip()  # "== end" follows
            else:
                out.append(line)
        if failed is not None:
            raise self._failed(args, failed)
        return "".join(out)

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
    # compiled once per run: into the run's directory that xdist workers share (the
    # parent of each worker's base temp), else this session's base temp
    base = tmp_path_factory.getbasetemp()
    cache = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    classes = compiled(cache)
    oracle = Oracle(classes, tmp_path_factory.mktemp("s3a-oracle") / "jvm.log")
    try:
        oracle.gen(tmp_path_factory.mktemp("s3a-oracle-warmup"))  # proves it runs
        yield oracle
    finally:
        oracle.close()
