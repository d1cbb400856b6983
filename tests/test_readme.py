"""The README's examples run as written, against a real moto server over HTTP.

Blocks fenced as ```python run in-process (in order), ```bash cli-example run line by line
in bash, ```python spark-example run together in a fresh Python with a local Spark.
The endpoint reaches them the way it reaches users: through AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from zerorename.servers.servers import MotoServer

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


def blocks(info: str) -> list[str]:
    return [body for tag, body in FENCE.findall(README.read_text()) if tag.strip() == info]


@pytest.fixture(scope="module")
def readme_env() -> Iterator[dict[str, str]]:
    with MotoServer() as server:
        env = {
            "AWS_ENDPOINT_URL": server.endpoint_url,
            "AWS_ACCESS_KEY_ID": server.access_key,
            "AWS_SECRET_ACCESS_KEY": server.secret_key,
            "AWS_DEFAULT_REGION": server.region,
        }
        boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            region_name=server.region,
            aws_access_key_id=server.access_key,
            aws_secret_access_key=server.secret_key,
        ).create_bucket(Bucket="my-bucket")
        yield env


def test_readme_has_the_two_commands_first() -> None:
    head = README.read_text().split("---", 1)[0]
    commands = re.findall(r"^    (\S.*)$", head, re.M)
    assert commands == ["bash scripts/demo.sh", "bash scripts/test.sh"]
    ci = (README.parent / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "cls",
    [
        "zerorename.engine:EngineConfig",
        "zerorename.engine.config:RetryConfig",
        "zerorename.committers:CommitOptions",
    ],
)
def test_every_option_is_documented(cls: str) -> None:
    """Every field of the configuration classes users build appears in the README
    (as `name`, in the tables that give its default)."""
    import dataclasses
    import importlib

    module, _, name = cls.partition(":")
    fields = dataclasses.fields(getattr(importlib.import_module(module), name))
    text = README.read_text()
    missing = [f.name for f in fields if f"`{f.name}`" not in text]
    assert not missing, f"{name} fields missing from README.md: {missing}"


def test_delete_rules_name_tests_that_exist() -> None:
    """'What zerorename will and will not delete' names the tests that hold it: each file
    exists and tests something (a renamed or emptied test file turns this red)."""
    text = README.read_text()
    section = text.split("<!-- delete-rules-tests:start -->")[1].split(
        "<!-- delete-rules-tests:end -->"
    )[0]
    files = re.findall(r"^- `(tests/[^`]+\.py)`", section, re.M)
    assert len(files) >= 5, section
    for name in files:
        path = README.parent / name
        assert path.is_file(), f"README names {name}, which does not exist"
        assert len(re.findall(r"^(?:async )?def test_", path.read_text(), re.M)) >= 1, name


@pytest.fixture(scope="module")
def python_examples(readme_env: dict[str, str]) -> Iterator[None]:
    """The README's Python examples, run once against the module's moto (the CLI examples
    read what they wrote, so either test runs alone)."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in readme_env.items():
            mp.setenv(k, v)
        examples = blocks("python")
        assert len(examples) >= 2
        for code in examples:
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
        yield


def test_python_examples_run(
    readme_env: dict[str, str], python_examples: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in readme_env.items():
        monkeypatch.setenv(k, v)
    client = boto3.client("s3")
    keys = {o["Key"] for o in client.list_objects_v2(Bucket="my-bucket")["Contents"]}
    assert {"raw/hello.txt", "raw/big.bin", "raw/stream.csv", "raw/many/99"} <= keys
    assert "reports/2026/_SUCCESS" in keys
    success = json.loads(
        client.get_object(Bucket="my-bucket", Key="reports/2026/_SUCCESS")["Body"].read()
    )
    job_id = success["jobId"]
    reports = sorted(k for k in keys if k.startswith("reports/2026/region=2/"))
    # the job id rides in every name the job creates: report-<job id>.csv or similar
    assert reports == [f"reports/2026/region=2/report-{job_id}.csv"]


def _cli_cases() -> list[Any]:
    """One case per ``bash cli-example`` block, run line by line in order; a block of
    ``zerorename perf`` lines (each independent, each a few harness children) is one case
    per line, so the runs spread over the test workers."""
    cases: list[Any] = []
    for n, body in enumerate(blocks("bash cli-example")):
        lines = [ln for ln in body.splitlines() if ln.strip()]
        if lines and all(ln.startswith("zerorename perf ") for ln in lines):
            cases += [
                pytest.param(n, [ln], id=f"block{n}-{ln.split()[2]}-{i}")
                for i, ln in enumerate(lines)
            ]
        else:
            cases.append(pytest.param(n, lines, id=f"block{n}"))
    return cases


def test_cli_examples_include_the_harness() -> None:
    cases = _cli_cases()
    assert len(cases) >= 3
    assert any(ln.startswith("zerorename perf") for c in cases for ln in c.values[1])


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("block", "lines"), _cli_cases())
def test_cli_examples_run(
    readme_env: dict[str, str],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    block: int,
    lines: list[str],
) -> None:
    """Line by line in a fresh directory, as a user would type them (put --defer refuses
    to overwrite a record file, so a second run in the same place would be refused). The
    blocks other than the harness's read what the Python examples wrote."""
    if not lines[0].startswith("zerorename perf "):
        request.getfixturevalue("python_examples")
    env = {**os.environ, **readme_env}
    for line in lines:
        out = subprocess.run(
            ["bash", "-c", line],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert out.returncode == 0, f"{line}\n{out.stdout}\n{out.stderr}"


@pytest.mark.spark
def test_spark_examples_run(readme_env: dict[str, str], tmp_path: Path) -> None:
    code = "\n".join(blocks("python spark-example")) + "\nspark.stop()\n"
    script = tmp_path / "readme_spark.py"
    script.write_text(code)
    env = {**os.environ, **readme_env, "SPARK_LOCAL_IP": "127.0.0.1"}
    out = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    client = boto3.client(
        "s3",
        endpoint_url=readme_env["AWS_ENDPOINT_URL"],
        aws_access_key_id=readme_env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=readme_env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    keys = [
        o["Key"]
        for o in client.list_objects_v2(Bucket="my-bucket", Prefix="tables/").get("Contents", [])
    ]
    assert "tables/events/_SUCCESS" in keys
    assert any(k.startswith("tables/events/day=2/") and k.endswith(".parquet") for k in keys)


def _option_rows(table: str) -> dict[str, str]:
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = re.sub(r"[`()]", "", cells[1])
    return rows


def test_readme_lists_every_writer_option_with_its_default() -> None:
    from zerorename.spark_adapter.options import options_table

    text = README.read_text()
    section = text[text.index("Options (keys are case-insensitive") :]
    section = section[: section.index("\n\n", section.index("| option |"))]
    documented = _option_rows(section)
    actual = _option_rows(options_table())
    assert documented.keys() == actual.keys()
    for name, default in actual.items():
        assert default.split()[0] in documented[name], (name, default, documented[name])


def test_readme_lists_every_perf_option_as_the_harness_defines_it() -> None:
    from zerorename.perf.harness import options_markdown

    text = README.read_text()
    begin, end = "<!-- perf-options:begin -->\n", "<!-- perf-options:end -->"
    block = text[text.index(begin) + len(begin) : text.index(end)].strip()
    assert block == options_markdown().strip(), (
        "README's perf option tables are stale: replace the block between the perf-options "
        "markers with the output of `python -m zerorename.perf.harness`"
    )
