"""One builder of the engine's options for every command that talks to S3 (issue 21): the
same ``--endpoint-url``, ``--region``, ``--profile`` and ``--addressing-style`` (help,
choices, defaults) on ``put``, ``complete``, ``abort``, ``uploads list|abort``, ``jobs`` and
``inspect``, read back into the engine's config by one function, so that the endpoint from
``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` is the same for all (and checked by the
engine's rule, which refuses a URL holding credentials before any request)."""

from __future__ import annotations

import argparse

import pytest

from zerorename.cli import build_parser
from zerorename.cli.options import ENDPOINT_ENV, engine_config
from zerorename.errors import ConfigError

#: each command that talks to S3, as words that parse
COMMANDS = {
    "put": ["put", "f", "s3://bucket/k"],
    "complete": ["complete", "r.json"],
    "abort": ["abort", "r.json"],
    "uploads list": ["uploads", "list", "s3://bucket/p"],
    "uploads abort": ["uploads", "abort", "s3://bucket/p"],
    "jobs": ["jobs", "list", "s3://bucket/d"],
    "inspect": ["inspect", "s3://bucket/d/_SUCCESS"],
}
ENGINE_OPTIONS = ("--endpoint-url", "--region", "--profile", "--addressing-style")


def _parser_of(words: list[str]) -> argparse.ArgumentParser:
    parser = build_parser()
    for word in words:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            break
        parser = subs[0].choices[word]
    return parser


def _engine_options(parser: argparse.ArgumentParser) -> dict[str, tuple[object, ...]]:
    return {
        option: (a.dest, a.help, tuple(a.choices or ()), a.default)
        for a in parser._actions
        for option in a.option_strings
        if option in ENGINE_OPTIONS
    }


def test_every_command_that_talks_to_s3_has_the_same_engine_options() -> None:
    options = {name: _engine_options(_parser_of(words)) for name, words in COMMANDS.items()}
    assert set(options["put"]) == set(ENGINE_OPTIONS)
    assert all(found == options["put"] for found in options.values()), options
    # the help names where the endpoint comes from, as the builder reads it
    help_text = str(options["put"]["--endpoint-url"][1])
    assert all(name in help_text for name in ENDPOINT_ENV)


@pytest.fixture
def no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ENDPOINT_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _endpoint(words: list[str]) -> str | None:
    args = build_parser().parse_args(words)
    return engine_config(args).endpoint_url


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_endpoint_comes_from_the_option_then_aws_endpoint_url_s3_then_aws_endpoint_url(
    command: str, no_endpoint_env: pytest.MonkeyPatch
) -> None:
    words = COMMANDS[command]
    assert _endpoint(words) is None  # botocore's own: AWS
    no_endpoint_env.setenv("AWS_ENDPOINT_URL", "http://general.example:9000")
    assert _endpoint(words) == "http://general.example:9000"
    no_endpoint_env.setenv("AWS_ENDPOINT_URL_S3", "")  # empty: as if unset
    assert _endpoint(words) == "http://general.example:9000"
    no_endpoint_env.setenv("AWS_ENDPOINT_URL_S3", "http://s3.example:9000")
    assert _endpoint(words) == "http://s3.example:9000"
    given = [*words, "--endpoint-url", "http://given.example:9000"]
    assert _endpoint(given) == "http://given.example:9000"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_credentialed_aws_endpoint_url_is_refused_by_the_engines_rule_for_every_command(
    command: str, no_endpoint_env: pytest.MonkeyPatch
) -> None:
    """The environment's endpoint reaches the engine's config and its rule (left to
    botocore, it would have been sent requests, the user's secret in the URL)."""
    no_endpoint_env.setenv("AWS_ENDPOINT_URL", "http://user:hunter2@127.0.0.1:9/")
    args = build_parser().parse_args(COMMANDS[command])
    with pytest.raises(ConfigError) as caught:
        engine_config(args)
    assert "hunter2" not in str(caught.value)
