"""A class-data-sharing archive of Spark's classes for the run's later JVMs.

A Spark driver JVM that lives for seconds spends much of its CPU loading and verifying
the same ~10,000 classes from Spark's jars; a JVM started with a dynamic CDS archive of
them maps them instead (a local session's write and read: 24 -> 11-16 CPU-s measured
here). The first Spark test of a run starts this script in the background: it runs a
small session whose JVM writes the archive when it exits (-XX:ArchiveClassesAtExit), and
moves it to its place only once whole. Every JVM the tests start through spark-submit (or
as the standalone cluster's daemons) names that place in SPARK_SUBMIT_OPTS /
SPARK_DAEMON_JAVA_OPTS (:func:`jvm_options`): a JVM started before the archive exists, or
one whose class path differs from the archive's, runs as it would without it (its CDS
warnings are switched off). What Spark computes does not change.

Why dynamic, not a static archive (``java -Xshare:dump -XX:SharedClassListFile=...``) built
at the run's start from a class list (measured 2026-11-27, JDK 17.0.15, pyspark 4.3.0, the
class list of this script's session: 17,877 lines, 1 MB): JDK 17 dumps a static archive with
its compilers off (``-Xshare:dump`` sets UseCompiler=false), so it loads and verifies every
class in the interpreter: 110-113 CPU-s and 422-744 s of wall on the loaded machine (without
the list's 1,110 lambda lines: 110 CPU-s), more than this whole build (106 CPU-s of tree, its
JVM 97) and far too late for the session JVMs; a short spark-submit JVM runs no faster on it
(its CPU, 3 runs each, interleaved: none 31-36 s, static 17 s, dynamic 16-17 s). A static
archive also replaces the JDK's own: a JVM whose class path differs loses CDS for the JDK's
classes too (+0.3 CPU-s for ``java -version``), where a dynamic one falls back to the JDK's.

    python jvm_archive.py ARCHIVE      (run by :func:`start_archive`, not by hand)

The run's Spark home (:func:`spark_home_without_zip`): pyspark's own directory as the JVMs
see it, but for ``python/lib``. Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on
the PYTHONPATH of every Python process it starts (its daemons, their workers, a
spark-submit'ed script's driver); a pip-installed pyspark ships that zip, and Python
compiles every module it imports from a zip afresh (no bytecode is cached for it): each
pyspark daemon spent 1.9-2.5 CPU-s starting, 0.6 s from the installed package, whose
sources are the zip's (compared file by file). What Spark runs does not change.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

#: the JVMs the tests start (every Spark driver through spark-submit: the run's sessions, the
#: perf/demo/Connect children; the standalone cluster's master and workers) compile with C1
#: only and collect with the serial GC: a JVM that lives for seconds to minutes spends half its
#: CPU in C2 compiles and GC threads (tests/spark/test_spark_write.py: the driver's CPU 69 s ->
#: 35 s). What Spark computes does not change; a value already set by the caller is kept.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

ARCHIVE = "spark-classes.jsa"
#: silence the JVM's CDS warnings (an archive built from another class path: not used)
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


#: the entries of pyspark's directory a Spark home needs (its scripts, jars and data);
#: ``python`` (the zips) is left out
SPARK_HOME_ENTRIES = ("bin", "sbin", "jars", "conf", "data", "examples", "licenses", "RELEASE")


def spark_home_without_zip(run_dir: str) -> str | None:
    """Make ``run_dir/spark-home``: links to the installed pyspark's scripts and jars, no
    ``python/lib`` (so Spark's Python processes import pyspark from the installed package,
    with its bytecode cache); return it, or None without a pyspark."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    pyspark_dir = os.path.dirname(spec.origin)
    home = os.path.join(run_dir, "spark-home")
    os.makedirs(home, exist_ok=True)
    for name in SPARK_HOME_ENTRIES:
        target = os.path.join(pyspark_dir, name)
        if os.path.exists(target) and not os.path.lexists(os.path.join(home, name)):
            os.symlink(target, os.path.join(home, name))
    return home


def jvm_options(base: str, run_dir: str) -> str:
    """``base`` plus the run's archive (used once it exists)."""
    return f"{base} -XX:SharedArchiveFile={os.path.join(run_dir, ARCHIVE)} {QUIET}"


def start_archive(run_dir: str, base: str) -> None:
    """Start the archive's build once per run (the first caller wins, by an exclusive
    create of its pid file); it runs beside the tests."""
    pid_file = os.path.join(run_dir, ARCHIVE + ".pid")
    try:
        fd = os.open(pid_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    env = dict(os.environ)
    # its Python workers run this interpreter (it has pyspark; the run's Spark home has no
    # pyspark.zip that would lend pyspark to another)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    tmp = os.path.join(run_dir, ARCHIVE + ".tmp")
    env["SPARK_SUBMIT_OPTS"] = f"{base} -XX:ArchiveClassesAtExit={tmp} {QUIET}"
    with open(os.path.join(run_dir, ARCHIVE + ".log"), "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, __file__, os.path.join(run_dir, ARCHIVE)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    os.write(fd, str(proc.pid).encode())
    os.close(fd)


def stop_archive(run_dir: str) -> None:
    """At the run's end: stop a build still running (a short run), with its JVM."""
    try:
        pid = int(Path(run_dir, ARCHIVE + ".pid").read_text() or "0")
    except (OSError, ValueError):
        return
    if pid:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def _build(archive: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceWriter, WriterCommitMessage

    class Nowhere(DataSource):
        @classmethod
        def name(cls) -> str:
            return "zr_archive_nowhere"

        def writer(self, schema: object, overwrite: bool) -> DataSourceWriter:
            return Discard()

    class Discard(DataSourceWriter):
        def write(self, iterator: object) -> WriterCommitMessage:
            return WriterCommitMessage()

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    out = archive + ".parquet"
    df = spark.range(0, 1000, 1, 2).selectExpr("id", "CAST(id % 3 AS STRING) AS day")
    df.write.mode("overwrite").partitionBy("day").parquet(out)
    spark.read.parquet(out).groupBy("day").count().collect()
    spark.dataSource.register(Nowhere)
    df.write.format("zr_archive_nowhere").mode("append").save()
    gateway = spark.sparkContext._gateway
    spark.stop()
    jvm = getattr(gateway, "proc", None)
    gateway.shutdown()
    if jvm is not None:  # the JVM writes the archive as it exits
        jvm.stdin.close()
        jvm.wait(timeout=300)
    tmp = archive + ".tmp"
    if os.path.getsize(tmp) > 0:
        os.replace(tmp, archive)
    Path(archive + ".pid").write_text("")  # done: nothing for stop_archive to stop


if __name__ == "__main__":
    _build(sys.argv[1])
