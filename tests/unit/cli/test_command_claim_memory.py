"""Of a ``jobs resume`` and a ``jobs abort`` of one job, at most one acts (simulation
finding 10): each takes the job's command claim (If-None-Match) before it reads
anything; the other verb then refuses in one line and changes nothing. Here the first
command's process dies mid-way (its claim stays, as a command still running would hold
it), the other verb is refused with the store unchanged, and the same verb run again
finishes the job and removes its own claim and the dead run's. Through the CLI's own
functions, on the in-memory store."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerorename.committers import CommitOptions, CommitterError, MagicCommitter
from zerorename.sim.operators import run_cli
from zerorename.testing.memfaults import ProcessCrashed
from zerorename.testing.memstore import MemoryState, MemoryStore

B = "bkt"
URI = f"s3://{B}/out"


async def dead_commit(tmp: Path) -> tuple[MemoryState, str]:
    """A magic job whose commit died after its first complete (journal: completing)."""
    state = MemoryState(B)
    store = MemoryStore(state)
    committer = MagicCommitter(store, URI, options=CommitOptions(staging_dir=tmp))
    job = await committer.setup_job()
    summaries = []
    for t in range(3):
        ta = job.task_attempt(t)
        await ta.setup()
        async with ta.open(f"f{t}.csv") as out:
            await out.write(b"x")
        summaries.append(await ta.commit())
    store.crash_at(2, op="CompleteMultipartUpload")
    with pytest.raises((ProcessCrashed, BaseExceptionGroup)):
        await job.commit(summaries)
    return state, job.job_id


def claims(state: MemoryState, job_id: str) -> list[str]:
    """The job's command claims (one object per command run)."""
    return sorted(state.objects(B, f"out/__magic_commit/command-{job_id}/"))


def snapshot(state: MemoryState) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    return dict(state.objects(B)), list(state.pending(B))


@pytest.mark.parametrize(("first", "other"), [("abort", "resume"), ("resume", "abort")])
async def test_a_resume_and_an_abort_of_one_job_never_both_act(
    tmp_path: Path, first: str, other: str, capsys: pytest.CaptureFixture[str]
) -> None:
    state, job_id = await dead_commit(tmp_path)
    dying = MemoryStore(state, min_part_size=1)
    dying.crash_at(4)  # after its claim, part way through
    with pytest.raises((ProcessCrashed, BaseExceptionGroup)):
        await run_cli(dying, "jobs", first, URI, job_id)
    (claim,) = claims(state, job_id)
    assert claim.rsplit("/", 1)[1].startswith(f"{first}-")
    before = snapshot(state)
    with pytest.raises(CommitterError) as refused:
        await run_cli(MemoryStore(state, min_part_size=1), "jobs", other, URI, job_id)
    msg = str(refused.value)
    done = {"abort": "aborted", "resume": "resumed"}[first]
    assert "\n" not in msg and f"being {done}" in msg and f"s3://{B}/{claim}" in msg
    assert snapshot(state) == before, "the refused command changed something"
    await run_cli(MemoryStore(state, min_part_size=1), "jobs", first, URI, job_id)
    assert claims(state, job_id) == []  # its own, and the dead run's
    assert not [k for k, _ in state.pending(B) if job_id in k]
    assert not [k for k in state.objects(B) if f"__magic_job-{job_id}" in k]
    data = [k for k in state.objects(B) if job_id in k and "__magic" not in k]
    assert len(data) == (3 if first == "resume" else 0)
    capsys.readouterr()


async def test_a_dead_aborts_claim_never_keeps_a_committed_job_from_its_cleanup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the commit succeeded and died in its cleanup (journal: succeeded); an abort of it
    # died holding its claim; abort refuses a committed job and changes nothing, so the
    # resume that only finishes the cleanup takes the claim over (simulation s3a-late 56)
    state = MemoryState(B)
    store = MemoryStore(state)
    job = await MagicCommitter(store, URI, options=CommitOptions(staging_dir=tmp_path)).setup_job()
    ta = job.task_attempt(0)
    await ta.setup()
    async with ta.open("f.csv") as out:
        await out.write(b"x")
    summary = await ta.commit()
    store.crash_at(1, op="DeleteObjects")
    with pytest.raises((ProcessCrashed, BaseExceptionGroup)):
        await job.commit([summary])
    dying = MemoryStore(state, min_part_size=1)
    dying.crash_at(2)  # after its claim
    with pytest.raises((ProcessCrashed, BaseExceptionGroup)):
        await run_cli(dying, "jobs", "abort", URI, job.job_id)
    assert len(claims(state, job.job_id)) == 1
    await run_cli(MemoryStore(state, min_part_size=1), "jobs", "resume", URI, job.job_id)
    assert not [k for k in state.objects(B) if job.job_id in k and "__magic" in k]
    assert [k for k in state.objects(B) if job.job_id in k] == [f"out/f-{job.job_id}.csv"]
    capsys.readouterr()
