"""The perf package's copies of the committers' names (kept so that a baseline's child
never imports the committers and the engine) are the committers' own."""

from __future__ import annotations

from zerorename.committers.paths import MAGIC_JOB_PREFIX, SUCCESS_NAME, Destination
from zerorename.perf.model import Target
from zerorename.perf.scenarios.commit import verify as commit_verify


def test_the_record_and_success_names_are_the_committers() -> None:
    assert commit_verify.MAGIC_JOB_PREFIX == MAGIC_JOB_PREFIX
    assert commit_verify.SUCCESS_NAME == SUCCESS_NAME


def test_a_runs_destination_is_named_as_the_committers_name_it() -> None:
    for prefix in ("zerorename-perf", "run-1/sub"):
        target = Target("sink", "http://127.0.0.1:1", "bench", prefix=prefix)
        uri, list_prefix = target.destination("commit", "boto3-15-0123456789ab")
        dest = Destination.parse(uri)
        assert (dest.bucket, dest.prefix) == (
            "bench",
            target.key("commit", "boto3-15-0123456789ab"),
        )
        assert (dest.uri, dest.list_prefix) == (uri, list_prefix)


def test_the_harness_offers_the_engines_addressing_styles() -> None:
    """The harness spells the styles out (it loads no engine); they are engine.config's."""
    from zerorename.engine.config import ADDRESSING_STYLES
    from zerorename.perf import harness

    assert harness.ADDRESSING_STYLES == ADDRESSING_STYLES
