"""Property tests of the path rules behind every destructive call (invariant 7): any string
parses or raises PathError, an empty component never widens a prefix, and a key is owned
by at most one job, only through the naming rule's slot in its file name."""

from __future__ import annotations

import json
import unicodedata
import uuid

from hypothesis import example, given, settings
from hypothesis import strategies as st

from zerorename.cli.jobs import safe, safe_json
from zerorename.committers.errors import PathError
from zerorename.committers.paths import (
    Destination,
    check_relative_path,
    job_id_of_key,
    key_carries_job,
    with_job_id,
)

A = "6f1c2b9e-8a4d-4c57-9a0e-3b2f1d0c9e8a"
B = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3"
uuids = st.uuids(version=4).map(str)
ids = st.one_of(st.sampled_from([A, B]), uuids)
#: pieces that make keys confusing: ids, their halves, separators, Spark counters
pieces = st.one_of(
    ids,
    ids.map(lambda j: j[:18]),
    ids.map(lambda j: j[18:]),
    st.sampled_from(["-", ".", "/", "//", "..", "-c000", "-c", "part-00001", "=", " ", "\n"]),
    st.text(max_size=6),
)
keys = st.lists(pieces, max_size=10).map("".join)
uris = st.one_of(
    st.text(),
    st.builds(
        lambda scheme, rest: scheme + rest,
        st.sampled_from(["s3://", "s3a://", "s3n://", "s3:/", "http://"]),
        st.lists(st.sampled_from(["b", "bkt", "/", "//", ".", "..", "x", "", " ", "ü"])).map(
            "".join
        ),
    ),
)


@given(uris)
@example("s3://b//")
@example("s3://b///x")
@example("s3://b/x//")
@settings(max_examples=400)
def test_destination_parses_or_raises_path_error(uri: str) -> None:
    try:
        d = Destination.parse(uri)
    except PathError:
        return
    parts = d.prefix.split("/") if d.prefix else []
    assert all(p not in ("", ".", "..") for p in parts)
    assert d.list_prefix == ("" if not parts else d.prefix + "/")
    # never the whole bucket unless the URI names just the bucket
    after = uri.split("://", 1)[1].partition("/")[2]
    assert d.whole_bucket == (after == "")


@given(st.one_of(st.text(), keys))
@settings(max_examples=300)
def test_relative_path_is_kept_or_refused(rel: str) -> None:
    try:
        out = check_relative_path(rel)
    except PathError:
        return
    assert out == rel
    assert all(c not in ("", ".", "..") for c in rel.split("/"))


@given(keys)
@example(f"d/x-{A}-{B}.csv")
@example(f"run={A}/rerun-of-{A}-{B}.csv")
@example(f"d/x-{A}-c000-{B}.csv")
@settings(max_examples=500)
def test_a_key_has_at_most_one_owner(key: str) -> None:
    owner = job_id_of_key(key)
    if owner is not None:
        assert str(uuid.UUID(owner)) == owner
        assert key_carries_job(key, owner)
    for j in (A, B):
        assert key_carries_job(key, j) is (owner == j)


@given(keys, keys)
@settings(max_examples=300)
def test_directories_never_make_an_owner(directory: str, name: str) -> None:
    name = name.rpartition("/")[2]
    assert job_id_of_key(f"{directory}/{name}") == job_id_of_key(name)


@given(keys, ids)
@example(f"rerun-of-{A}-x.csv", A)
@example(f"x-{B}.csv", A)
@example("...", A)
@settings(max_examples=400)
def test_with_job_id_makes_a_name_of_that_job_only(rel: str, job: str) -> None:
    try:
        check_relative_path(rel)
    except PathError:
        return
    named = with_job_id(rel, job)
    assert job_id_of_key(named) == job
    assert with_job_id(named, job) == named
    head = rel.rpartition("/")[0]
    assert named.rpartition("/")[0] == head  # the id never goes into a directory


_UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs"}


@given(st.text(alphabet=st.characters(codec=None)))
@example("\x1b]0;owned\x07\r\nzerorename: job committed\x9b2J")
@example("a\u202eb\u2028c\\x1b")
def test_human_output_is_one_inert_line(text: str) -> None:
    out = safe(text)
    assert all(unicodedata.category(ch) not in _UNSAFE for ch in out)
    # nothing is lost: a different input never prints the same
    assert safe(text + "\x1b") != safe(text + "\\x1b")


@given(st.dictionaries(st.text(alphabet=st.characters(codec=None)), st.text()))
@example({"jobId": "\x1b[2J\u2028\x9b", "k\x00": "\U000e0001"})
def test_json_output_stays_the_same_json(doc: dict[str, str]) -> None:
    text = safe_json(doc)
    assert json.loads(text) == doc
    assert all(ch == "\n" or unicodedata.category(ch) not in _UNSAFE for ch in text)
