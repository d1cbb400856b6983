"""logsafe.redact_url: the one rule for showing an endpoint URL in a message (issue 20
finding 7). Whatever a user hands in, a password, a query or a fragment never shows."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from zerorename.engine.config import endpoint_problem
from zerorename.logsafe import MASK, redact_url

#: a secret is marked by a character no other part of a generated URL holds
_SECRET = st.text(alphabet="!$%&*+,;=~" + string.ascii_uppercase, min_size=1, max_size=20).map(
    lambda s: "~" + s
)
_PART = st.text(alphabet=string.ascii_lowercase + string.digits + ".-_/", max_size=20)
_ANY = st.text(alphabet=string.printable, max_size=30)  # spaces and controls too


def test_plain_urls_are_unchanged() -> None:
    for url in ("http://127.0.0.1:9000", "https://s3.example.com/base/", "aws", "moto"):
        assert redact_url(url) == url


def test_each_secret_place_is_masked() -> None:
    assert redact_url("https://u:pw@host:9000/p") == f"https://{MASK}@host:9000/p"
    assert redact_url("http://host/?X-Amz-Signature=abc") == f"http://host/?{MASK}"
    assert redact_url("http://host/p#frag") == f"http://host/p#{MASK}"
    assert redact_url("u:pw@host") == f"{MASK}@host"


@given(
    scheme=st.sampled_from(["http://", "https://", "ftp://", ""]),
    user=_PART,
    secret=_SECRET,
    host=_PART,
    sep=st.sampled_from(["/", "?", "#", ":", "@"]),
    tail=_PART,
)
def test_a_password_never_shows(
    scheme: str, user: str, secret: str, host: str, sep: str, tail: str
) -> None:
    """Even a password holding '/', '?', '#', ':' or '@' (not percent-encoded)."""
    mid = secret[: len(secret) // 2] + sep + secret[len(secret) // 2 :]
    shown = redact_url(f"{scheme}{user}:{mid}@{host}")
    assert "~" not in shown, shown


@given(host=_PART, sep=st.sampled_from(["?", "#", "/?", "/#", "/p?a=1&", "/#?"]), q=_SECRET)
def test_a_query_or_fragment_never_shows(host: str, sep: str, q: str) -> None:
    assert "~" not in redact_url(f"https://{host}{sep}{q}")


@given(
    scheme=st.sampled_from(["http://", "https://", "ftp://", ""]),
    host=_PART,
    where=st.sampled_from(["user", "query", "fragment"]),
    secret=_SECRET,
    junk=_ANY,
)
def test_the_engine_rule_never_echoes_a_secret(
    scheme: str, host: str, where: str, secret: str, junk: str
) -> None:
    """endpoint_problem refuses such a URL and shows it only through redact_url (junk:
    anything else a user may add, spaces and control characters included)."""
    junk = junk.replace("~", "")
    url = {
        "user": f"{scheme}u:{secret}@{host}{junk}",
        "query": f"{scheme}{host}?{secret}{junk}",
        "fragment": f"{scheme}{host}#{secret}{junk}",
    }[where]
    problem = endpoint_problem(url)
    assert problem is not None
    assert "~" not in problem, problem
