"""Spark fixtures: one local Spark session for the whole run, S3 targets it can reach.

Executors (Python workers forked by Spark) get credentials the way production does,
from the standard AWS chain: a shared credentials file written here, set through
AWS_SHARED_CREDENTIALS_FILE before the JVM starts, with one profile per server
(``zr-moto``, ``zr-rgw``) selected by the ``profile`` option.

HTTPS endpoints with a private CA: the executors' Python workers (the data source's writers
and its commit) find the CA through AWS_CA_BUNDLE in their environment, set with the Spark
option ``spark.executorEnv.AWS_CA_BUNDLE`` (pyspark hands ``spark.executorEnv.*`` to every
Python worker it starts); the bundle is the session's test CA plus the default CA bundle,
so public endpoints still verify.
"""

from __future__ import annotations

import io
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import jvm_archive
from needs import need_module

pyspark = need_module("pyspark", "pip install -e '.[spark]'")
need_module("pyarrow", "pip install -e '.[spark]'")

from zerorename.servers.targets import S3Target  # noqa: E402
from zerorename.servers.tls import session_tls  # noqa: E402

SPARK_MASTER = "local[2,3]"  # 2 task slots; a task may fail 3 times (retry tests)

_creds_lock = threading.Lock()
_CREDS_FILE: Path | None = None


def _add_profile(name: str, target: S3Target) -> str:
    """Write (or update) profile ``zr-<name>`` for the target's keys; return its name."""
    assert _CREDS_FILE is not None, "the spark fixture sets up the credentials file"
    profile = f"zr-{name}"
    with _creds_lock:
        text = _CREDS_FILE.read_text() if _CREDS_FILE.exists() else ""
        if f"[{profile}]" not in text:
            text += (
                f"[{profile}]\naws_access_key_id = {target.access_key or 'none'}\n"
                f"aws_secret_access_key = {target.secret_key or 'none'}\n\n"
            )
            tmp = _CREDS_FILE.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.chmod(0o600)
            tmp.replace(_CREDS_FILE)
    return profile


#: per-test timeout of a test that uses the run's Spark session or the standalone cluster:
#: the first such test in a worker also starts the session (or the cluster's three JVMs),
#: which on a loaded machine took most of the default 300 s; a fixture that times out in
#: setup fails every later test of the session, so the margin is wide
SESSION_TEST_TIMEOUT = 900


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if ("spark" in names or "cluster" in names) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SESSION_TEST_TIMEOUT))


@pytest.fixture(scope="session", autouse=True)
def jvm_class_archive() -> None:
    """The first Spark test of the run starts the build of the JVMs' class archive
    (tests/jvm_archive.py); later JVMs start faster once it is there."""
    run_dir = os.environ.get("ZR_TEST_RUN_DIR")
    if run_dir and "SharedArchiveFile" in os.environ.get("SPARK_SUBMIT_OPTS", ""):
        jvm_archive.start_archive(run_dir, jvm_archive.TEST_JVM_OPTIONS)


@pytest.fixture(scope="session")
def spark_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Environment the Spark JVM and its Python workers inherit (set before start)."""
    global _CREDS_FILE
    aws_dir = tmp_path_factory.mktemp("aws")
    _CREDS_FILE = aws_dir / "credentials"
    _CREDS_FILE.write_text("")
    (aws_dir / "config").write_text("")
    env = {
        "ZR_SPARK_CA_BUNDLE": str(_ca_bundle(aws_dir)),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "AWS_SHARED_CREDENTIALS_FILE": str(_CREDS_FILE),
        "AWS_CONFIG_FILE": str(aws_dir / "config"),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _ca_bundle(directory: Path) -> Path:
    """The session's test CA followed by the default bundle (botocore's), in one PEM."""
    from botocore.httpsession import get_cert_path

    bundle = directory / "ca-bundle.pem"
    default = Path(get_cert_path(True)).read_text()
    bundle.write_text(session_tls().ca_bundle.read_text() + "\n" + default)
    return bundle


@pytest.fixture(scope="session")
def spark(spark_env: dict[str, str]) -> Iterator[Any]:
    """The shared local SparkSession (zerorename registered)."""
    from pyspark.sql import SparkSession

    from zerorename.spark_adapter import register

    session = (
        SparkSession.builder.master(SPARK_MASTER)
        .appName("zerorename-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.python.worker.reuse", "true")
        # task workers start warm (README); spark-submit tests (demo) keep pyspark's daemon
        .config("spark.python.daemon.module", "zerorename.spark_adapter.daemon")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.executorEnv.AWS_CA_BUNDLE", spark_env["ZR_SPARK_CA_BUNDLE"])
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def cluster(spark_env: dict[str, str]) -> Iterator[Any]:
    """A standalone cluster (master and two workers, on 127.0.0.1 and 127.0.0.2) for the
    speculation tests' drivers: one for the run (three JVMs to start)."""
    from standalone import StandaloneCluster

    with StandaloneCluster(worker_hosts=("127.0.0.1", "127.0.0.2")) as c:
        yield c


@dataclass
class SparkTarget:
    """An S3 target as the Spark writer sees it: URIs and options (no credentials)."""

    target: S3Target
    profile: str

    def uri(self, sub: str = "out") -> str:
        return f"s3://{self.target.bucket}/{self.target.prefix}{sub}"

    def prefix(self, sub: str = "out") -> str:
        return f"{self.target.prefix}{sub}/"

    def options(self, **extra: Any) -> dict[str, str]:
        opts = {
            "endpoint": self.target.endpoint_url or "",
            "region": self.target.region,
            "profile": self.profile,
            "addressingStyle": self.target.addressing_style,
        }
        opts.update({k: str(v) for k, v in extra.items()})
        return opts

    def reader_options(self) -> dict[str, str | None]:
        """The keyword arguments of the adapter's readers (read_success, committed_files,
        read_stream_log) that reach this target."""
        o = self.options()
        return {
            "endpoint": o["endpoint"],
            "region": o["region"],
            "profile": o["profile"] or None,  # "": the standard chain
            "addressing_style": o["addressingStyle"],
        }

    def arrow_fs(self) -> Any:
        """A pyarrow S3 filesystem on this target (for pyarrow's dataset reader)."""
        from pyarrow.fs import S3FileSystem

        t = self.target
        return S3FileSystem(
            access_key=t.access_key,
            secret_key=t.secret_key,
            endpoint_override=t.endpoint_url,
            region=t.region,
            scheme="https" if t.tls else "http",
            force_virtual_addressing=False,
        )

    def client(self) -> Any:
        return self.target.boto3_client()

    def list_keys(self, sub: str = "out") -> list[str]:
        """Every object key under ``sub/`` (relative to it), sorted."""
        client = self.client()
        pre = self.prefix(sub)
        out: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=self.target.bucket, Prefix=pre
        ):
            out += [o["Key"][len(pre) :] for o in page.get("Contents", [])]
        return sorted(out)

    def data_keys(self, sub: str = "out") -> list[str]:
        """Data files only: no _SUCCESS, no records in __magic* directories."""
        return [
            k
            for k in self.list_keys(sub)
            if k != "_SUCCESS" and not any(c.startswith("__magic") for c in k.split("/"))
        ]

    def pending_uploads(self, sub: str | None = None) -> list[tuple[str, str]]:
        """(key, upload id) of every multipart upload still pending in the bucket
        (under ``sub/`` when given)."""
        client = self.client()
        kwargs: dict[str, Any] = {"Bucket": self.target.bucket}
        if sub is not None:
            kwargs["Prefix"] = self.prefix(sub)
        resp = client.list_multipart_uploads(**kwargs)
        return sorted((u["Key"], u["UploadId"]) for u in resp.get("Uploads", []))

    def get(self, key: str) -> bytes:
        return bytes(self.client().get_object(Bucket=self.target.bucket, Key=key)["Body"].read())

    def read_parquet(self, sub: str = "out") -> Any:
        """All Parquet files under ``sub/`` as one pyarrow Table, with Hive partition
        columns (as strings) restored from the paths."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        from zerorename.spark_adapter.files.partitioning import unescape_path_name

        tables = []
        for rel in self.data_keys(sub):
            if not rel.endswith(".parquet"):
                continue
            table = pq.read_table(io.BytesIO(self.get(self.prefix(sub) + rel)))
            for comp in rel.split("/")[:-1]:
                k, _, v = comp.partition("=")
                value = unescape_path_name(v)
                col = pa.array([value] * table.num_rows, pa.string())
                table = table.append_column(unescape_path_name(k), col)
            tables.append(table)
        if not tables:
            return None
        return pa.concat_tables(tables, promote_options="default")


@pytest.fixture
def zr(moto_s3: S3Target, spark: Any) -> SparkTarget:
    """A moto target for Spark writes."""
    return SparkTarget(moto_s3, _add_profile("moto", moto_s3))


@pytest.fixture
def zr_own(moto_s3: S3Target) -> tuple[SparkTarget, dict[str, str]]:
    """A moto target for a test that starts Spark in a process of its own (never the run's
    session, so it runs on any xdist worker), and that process's environment: the
    target's keys in the standard AWS variables, this interpreter for Spark's workers."""
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": moto_s3.access_key or "",
        "AWS_SECRET_ACCESS_KEY": moto_s3.secret_key or "",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SHARED_CREDENTIALS_FILE"):
        env.pop(name, None)
    return SparkTarget(moto_s3, ""), env


@pytest.fixture
def zr_any(s3: S3Target, spark: Any) -> SparkTarget:
    """A target on each server in turn (moto, RGW, external)."""
    if s3.access_key is None:
        return SparkTarget(s3, "")  # external: the default chain
    return SparkTarget(s3, _add_profile(s3.name, s3))
