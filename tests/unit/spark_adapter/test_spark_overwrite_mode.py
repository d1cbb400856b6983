"""What ``mode("overwrite")`` replaces (pure): the ``partitionOverwriteMode`` option, else
the session's ``spark.sql.sources.partitionOverwriteMode`` as the job's tasks read it, and
the conflict scope each committer gets from it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zerorename.committers import ConflictScope
from zerorename.errors import ConfigError
from zerorename.spark_adapter.errors import CommitMessageError, OptionError
from zerorename.spark_adapter.options import (
    SESSION_OVERWRITE_KEY,
    PartitionOverwrite,
    WriteOptions,
    session_overwrite_mode,
)

STATIC, DYNAMIC = PartitionOverwrite.STATIC, PartitionOverwrite.DYNAMIC
PARTS, WHOLE = ConflictScope.PARTITIONS, ConflictScope.DESTINATION


def opts(overwrite: bool = True, **o: str) -> WriteOptions:
    return WriteOptions.parse({"path": "s3://b/t", **o}, overwrite=overwrite)


def test_the_option_any_case_is_known_and_parsed() -> None:
    o = opts(partitionBy="day", PARTITIONOVERWRITEMODE=" Dynamic ")
    assert o.partition_overwrite is DYNAMIC and o.unknown == ()
    assert opts(partitionoverwritemode="STATIC").partition_overwrite is STATIC
    assert opts().partition_overwrite is None
    with pytest.raises(OptionError, match="partitionOverwriteMode must be one of static, dynamic"):
        opts(partitionOverwriteMode="dynamik")


@given(st.text(max_size=12))
def test_any_option_text_is_a_mode_or_one_option_error(text: str) -> None:
    try:
        mode = PartitionOverwrite.parse(text)
    except OptionError as exc:
        assert isinstance(exc, ConfigError) and "\n" not in str(exc).strip("\n")
    else:
        assert mode.value == text.strip().lower()


def test_the_session_setting_as_the_tasks_read_it() -> None:
    assert session_overwrite_mode(["dynamic", "DYNAMIC"]) is DYNAMIC
    assert session_overwrite_mode(["static"]) is STATIC
    assert session_overwrite_mode(["", ""]) is STATIC  # not set: Spark's default
    for unknown in ([], [None], ["dynamic", None]):  # no task, or a task that could not read
        with pytest.raises(OptionError) as err:
            session_overwrite_mode(unknown)
        # one line naming the setting and the option that makes the choice explicit
        msg = str(err.value)
        assert SESSION_OVERWRITE_KEY in msg and "partitionOverwriteMode'" in msg
        assert "\n" not in msg
    with pytest.raises(CommitMessageError, match="different"):
        session_overwrite_mode(["dynamic", ""])
    with pytest.raises(OptionError, match=SESSION_OVERWRITE_KEY):
        session_overwrite_mode(["sometimes"])


@pytest.mark.parametrize("committer", ["magic", "directory"])
def test_option_wins_else_session_for_an_overwrite_by_partition(committer: str) -> None:
    o = opts(committer=committer, partitionBy="day")
    assert o.session_decides
    assert o.overwrite_mode(["dynamic"]) is DYNAMIC
    assert o.overwrite_mode([""]) is STATIC
    with pytest.raises(OptionError):
        o.overwrite_mode([])  # no task reported it: refused, not guessed
    assert o.overwrite_mode(None) is STATIC  # not a SQL write (RDD API): the option only
    given_opt = opts(committer=committer, partitionBy="day", partitionOverwriteMode="static")
    assert not given_opt.session_decides
    assert given_opt.overwrite_mode(["dynamic"]) is STATIC  # the option wins
    assert given_opt.overwrite_mode([]) is STATIC
    dyn = opts(committer=committer, partitionBy="day", partitionOverwriteMode="dynamic")
    assert dyn.overwrite_mode([""]) is DYNAMIC


@pytest.mark.parametrize(
    ("o", "why"),
    [
        (opts(overwrite=False, partitionBy="day"), "append"),
        (opts(), "no partition columns: Spark ignores the mode"),
        (opts(committer="partitioned", partitionBy="day"), "by partition in either mode"),
    ],
)
def test_the_session_does_not_decide(o: WriteOptions, why: str) -> None:
    assert not o.session_decides, why
    assert o.overwrite_mode([]) is STATIC  # nothing to refuse


@pytest.mark.parametrize(
    ("committer", "extra", "static", "dynamic"),
    [
        ("magic", {"partitionBy": "day"}, WHOLE, PARTS),
        ("directory", {"partitionBy": "day"}, WHOLE, PARTS),
        ("partitioned", {"partitionBy": "day"}, PARTS, PARTS),  # as before, in both modes
        ("magic", {}, WHOLE, WHOLE),  # no partition columns: the destination
    ],
)
def test_scope_by_committer_and_mode(
    committer: str, extra: dict[str, Any], static: ConflictScope, dynamic: ConflictScope
) -> None:
    o = opts(committer=committer, **extra)
    assert (o.replace_scope(STATIC), o.replace_scope(DYNAMIC)) == (static, dynamic)
    assert o.setup_scope is static  # set up as static until the tasks tell
    appending = opts(False, committer=committer, **extra)
    want = PARTS if committer == "partitioned" else WHOLE
    assert appending.replace_scope(DYNAMIC) is want  # append: Spark's mode does not apply
    explicit = opts(committer=committer, partitionOverwriteMode="dynamic", **extra)
    assert explicit.setup_scope is dynamic  # the option is known before any task runs


def test_an_explicit_dynamic_option_is_never_overridden_by_append_and_replace() -> None:
    """mode('append') with conflict=replace and partitionOverwriteMode=dynamic replaces the
    partitions it writes, not the whole destination (found by a review: it did)."""
    o = WriteOptions.parse(
        {
            "path": "s3://b/t",
            "partitionBy": "day",
            "conflict": "replace",
            "partitionOverwriteMode": "dynamic",
        },
        overwrite=False,
    )
    assert o.replace_scope(o.overwrite_mode(["dynamic"])) is ConflictScope.PARTITIONS
    static = WriteOptions.parse(
        {"path": "s3://b/t", "partitionBy": "day", "conflict": "replace"}, overwrite=False
    )
    assert static.replace_scope(static.overwrite_mode(["dynamic"])) is ConflictScope.DESTINATION
