"""Keep credentials out of log lines (DESIGN invariant 8).

At DEBUG, botocore logs whole requests (the ``Authorization`` header with the access key id
and the signature, ``X-Amz-Security-Token``), its canonical requests (the token again) and
the signatures it computes. :func:`install` wraps the process's log record factory so that
every record from the AWS and HTTP libraries and from zerorename is rendered once and
scrubbed before any handler sees it:

- every value passed to :func:`register_secrets` (the engine registers the credentials it
  resolves; ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` from the
  environment are registered at install) is replaced wherever it occurs;
- whatever follows ``Credential=``, ``Signature=``/``Signature:``, ``X-Amz-Signature=``,
  ``X-Amz-Credential=``, ``X-Amz-Security-Token``, ``Authorization`` and
  ``aws_secret_access_key``/``aws_session_token`` is replaced, so a credential that was never
  registered (one from an instance role, say) is still not printed.

:func:`redact_url` is the one rule for showing an endpoint URL in a message: its user info
(``https://user:secret@host``), query and fragment (a presigned signature, a token) are
masked; scheme, host, port and path are kept.

Records of other loggers pass untouched, and the work is done only for records that a
logger actually emits (the factory runs after the level check).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any

#: loggers whose records are scrubbed (and their children).
SCRUBBED_LOGGERS = (
    "botocore",
    "aiobotocore",
    "boto3",
    "s3transfer",
    "urllib3",
    "aiohttp",
    "zerorename",
)
MASK = "***"
_ENV_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
_MIN_SECRET = 8  # shorter values would mask ordinary words

_PATTERNS = (
    # header values as botocore prints them in a dict: 'Authorization': b'AWS4-HMAC-SHA256 ...'
    re.compile(
        r"""(?P<k>['"]?(?:authorization|x-amz-security-token)['"]?\s*:\s*b?['"])[^'"]*""",
        re.IGNORECASE,
    ),
    # canonical-request lines: x-amz-security-token:VALUE
    re.compile(r"(?P<k>x-amz-security-token\s*[:=]\s*)[^\s,;&'\"]+", re.IGNORECASE),
    # Credential=AKID/date/region/s3/aws4_request, X-Amz-Credential=..., Signature=hex, ...
    re.compile(
        r"(?P<k>(?:x-amz-)?(?:credential|signature)\s*[=:]\s*)[^\s,;&'\"]+",
        re.IGNORECASE,
    ),
    # aws_secret_access_key = ..., "aws_session_token": "..."
    re.compile(
        r"""(?P<k>(?:aws_)?(?:secret_access_key|session_token|security_token)['"]?\s*[=:]\s*['"]?)"""
        r"""[^\s,;'"]+""",
        re.IGNORECASE,
    ),
)

_lock = threading.Lock()
_secrets: set[str] = set()
_secret_re: re.Pattern[str] | None = None
_installed_factory: Callable[..., logging.LogRecord] | None = None


def register_secrets(*values: str | None) -> None:
    """Remember credential values so no log line shows them (short or empty ones are
    ignored: they would mask ordinary text)."""
    global _secret_re
    new = {v for v in values if isinstance(v, str) and len(v) >= _MIN_SECRET}
    with _lock:
        if new <= _secrets:
            return
        _secrets.update(new)
        ordered = sorted(_secrets, key=len, reverse=True)
        _secret_re = re.compile("|".join(re.escape(s) for s in ordered))


def scrub(text: str) -> str:
    """``text`` with every registered secret and every credential-shaped value masked."""
    pattern = _secret_re
    if pattern is not None:
        text = pattern.sub(MASK, text)
    for p in _PATTERNS:
        text = p.sub(lambda m: m.group("k") + MASK, text)
    return text


def redact_url(url: str) -> str:
    """``url`` as a message may show it: everything up to the last ``@`` after the scheme
    (user info; a password may hold ``/``, ``?`` or ``#``) becomes ``***@``, and everything
    from the first ``?`` or ``#`` after that becomes ``?***``/``#***``. A URL holding none
    of them is returned unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    if "@" in rest:
        rest = MASK + "@" + rest.rpartition("@")[2]
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if cut >= 0:
        rest = rest[: cut + 1] + MASK
    return f"{scheme}{sep}{rest}"


def _scrub_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: logging reports it itself later
        return
    record.msg = scrub(message)
    record.args = None
    if record.exc_info and record.exc_info[1] is not None:
        # render the traceback now, scrubbed; formatters use exc_text when it is set
        record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
    if record.stack_info:
        record.stack_info = scrub(record.stack_info)


def _wants(name: str) -> bool:
    return name.partition(".")[0] in SCRUBBED_LOGGERS


def install() -> None:
    """Scrub the AWS/HTTP libraries' and zerorename's log records from now on (idempotent;
    called when an engine opens and by the CLI)."""
    global _installed_factory
    register_secrets(*(os.environ.get(n) for n in _ENV_SECRETS))
    with _lock:
        current = logging.getLogRecordFactory()
        if _installed_factory is not None and current is _installed_factory:
            return
        inner = current

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = inner(*args, **kwargs)
            if _wants(record.name):
                _scrub_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed_factory = factory
