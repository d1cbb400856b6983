"""No credential, session token or signature in any log line at any level (invariant 8).

Every logger is captured at DEBUG while an upload (direct and deferred, both send paths),
a job commit and CLI commands run against a real server with a session token set; then
the captured text is searched for the access key id, the secret key, the token and for
signature-shaped values. moto accepts any credentials, so the test's own are used there;
RGW checks signatures, so there the session token is left out (the launcher's user has
none) and the other checks still run.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator

import pytest

from zerorename import logsafe
from zerorename.cli import main as cli_main
from zerorename.committers import MagicCommitter
from zerorename.engine import UploadEngine
from zerorename.servers.targets import S3Target

TOKEN = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKENzr0123456789abcdefSECRET"
# a hex run of 64 after something that names a signature, or an Authorization value
SIGNATURE_LEAK = re.compile(
    r"(signature\s*[=:]\s*\n?\s*[0-9a-f]{64})|(authorization['\"]?\s*:\s*b?['\"]aws4)",
    re.IGNORECASE,
)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def captured() -> Iterator[_Capture]:
    root = logging.getLogger()
    handler = _Capture()
    old_level = root.level
    levels = {}
    for name in list(logging.Logger.manager.loggerDict):
        lg = logging.getLogger(name)
        levels[name] = lg.level
        lg.setLevel(logging.NOTSET)
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _secrets(s3: S3Target) -> list[str]:
    out = [v for v in (s3.access_key, s3.secret_key) if v]
    if s3.name == "moto":
        out.append(TOKEN)
    return out


# both servers (RGW checks signatures and answers its own errors), HTTP only: what is logged
# is the same over TLS, which is no part of this claim (the rule in tests/conftest.py)
@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "botocore"])
async def test_no_secret_in_any_log_line(
    s3: S3Target, captured: _Capture, fast_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert s3.access_key and s3.secret_key, "the test needs explicit credentials"
    token = TOKEN if s3.name == "moto" else None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret_key)
    if token:
        monkeypatch.setenv("AWS_SESSION_TOKEN", token)
    else:
        monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    cfg = s3.engine_config(fast_path=fast_path, aws_session_token=token, part_size=5 * 1024 * 1024)
    data = b"z" * (6 * 1024 * 1024)
    async with UploadEngine(cfg) as eng:
        await eng.upload(s3.bucket, s3.key("direct.bin"), data)
        pending = await eng.upload(s3.bucket, s3.key("deferred.bin"), data, defer=True)
        await eng.complete(pending)
        committer = MagicCommitter(eng, f"s3://{s3.bucket}/{s3.prefix}job")
        job = await committer.setup_job()
        ta = job.task_attempt(0, 0)
        await ta.setup()
        async with ta.open("a.csv") as out:
            await out.write(b"a,b\n1,2\n")
        summary = await ta.commit()
        await job.commit([summary])

    endpoint = ["--endpoint-url", str(s3.endpoint_url), "--region", s3.region]
    assert (
        await asyncio.to_thread(
            cli_main, ["-v", "uploads", "list", f"s3://{s3.bucket}/{s3.prefix}job", *endpoint]
        )
        == 0
    )
    assert (
        await asyncio.to_thread(
            cli_main, ["-v", "inspect", f"s3://{s3.bucket}/{s3.prefix}job/_SUCCESS", *endpoint]
        )
        == 0
    )

    text = "\n".join(captured.lines)
    # the run logged what botocore logs at DEBUG: requests and signing went through logging
    assert "botocore" in text and len(captured.lines) > 50
    for secret in _secrets(s3):
        assert secret not in text, f"a credential ({len(secret)} chars) is in the logs"
    leak = SIGNATURE_LEAK.search(text)
    assert leak is None, f"a signature is in the logs: {leak.group(0)[:40]}..."


def test_scrub_masks_credential_shapes() -> None:
    """Credentials never registered (an instance role's, say) are masked by shape."""
    lines = {
        "headers={'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIAEXAMPLE/2026/x, "
        "Signature=" + "a" * 64 + "', 'X-Amz-Security-Token': b'TOKENVALUE'}": (
            "AKIAEXAMPLE",
            "a" * 64,
            "TOKENVALUE",
        ),
        "x-amz-security-token:TOKENVALUE2\nhost:127.0.0.1": ("TOKENVALUE2",),
        "Signature:\n" + "b" * 64: ("b" * 64,),
        "https://h/k?X-Amz-Credential=AKIAX%2F2026&X-Amz-Signature=" + "c" * 64: (
            "AKIAX",
            "c" * 64,
        ),
        "aws_secret_access_key = wJalrXUtnFEMIK7MDENG": ("wJalrXUtnFEMIK7MDENG",),
    }
    for line, secrets in lines.items():
        out = logsafe.scrub(line)
        for secret in secrets:
            assert secret not in out, (line, out)
    assert logsafe.scrub("uploaded s3://b/k: 3 parts") == "uploaded s3://b/k: 3 parts"


def test_registered_secret_is_masked_anywhere() -> None:
    logsafe.register_secrets("registered-secret-value-123", None, "short")
    assert "registered-secret-value-123" not in logsafe.scrub("x=registered-secret-value-123;")
    assert logsafe.scrub("a short word") == "a short word"
