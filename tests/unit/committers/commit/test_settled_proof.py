"""A job commit settles a failed complete only by proof (issue 20, finding 6): when the
upload is gone and an object of the same size is at its key, it is the job's only if its
ETag is the multipart ETag of the job's parts. Another writer's same-size single PUT, or
another writer's multipart object of the same size with other parts, fails the commit
naming the key and is left as it was. On the in-memory store: no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from unit.committers.test_protocol_memory import B, data_of, prepare
from zerorename.committers import JobCommitError
from zerorename.engine.results import UploadInfo
from zerorename.testing.memstore import MemoryState, MemoryStore


async def _foreign_object_at_our_key(state: MemoryState, multipart: bool) -> tuple[str, bytes]:
    """Abort the job's upload of one key (as a lifecycle rule or an operator would) and
    let another writer put an object of exactly that size there."""
    store = MemoryStore(state)
    key, upload_id = next((k, u) for k, u in state.pending(B) if "/y=1/" in k)
    size = sum(len(part.data) for part in state.uploads[upload_id].parts.values())
    await store.abort(UploadInfo(B, key, upload_id, 0.0))
    foreign = bytes(reversed(range(256))) * (size // 256) + b"z" * (size % 256)
    if multipart:  # another upload of the same size: a '-N' ETag, from other parts
        small = MemoryStore(state, part_size=4, min_part_size=1)
        other = await small.upload(B, key, foreign, defer=True)
        assert len(other.parts) > 1
        await small.complete(other)
        assert state.etags(B)[key].endswith(f'-{len(other.parts)}"')
    else:
        await store.put_object(B, key, foreign)
    return key, foreign


@pytest.mark.parametrize("multipart", [False, True], ids=["single_put", "other_parts"])
async def test_a_same_size_object_of_another_writer_is_not_taken_for_ours(
    multipart: bool, tmp_path: Path
) -> None:
    p = await prepare("magic", "append", tmp_path, rollback_on_failure=False)
    key, foreign = await _foreign_object_at_our_key(p.state, multipart)
    assert len(foreign) == len(p.expected[key])
    job = await p.committer(p.store()).open_job(p.job_id)
    with pytest.raises(JobCommitError) as err:
        await job.commit(p.summaries)
    assert key in str(err.value) and "\n" not in str(err.value)
    assert data_of(p.state)[key] == foreign  # the other writer's object is left alone
    assert not p.state.objects(B).get("out/_SUCCESS")
