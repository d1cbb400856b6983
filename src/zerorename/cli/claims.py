"""A job's command claims: of a ``zerorename jobs resume`` and a ``jobs abort`` of one job
running at once, at most one acts (invariants 6 and 11).

Every run of either command writes a claim object of its own,
``<dest>/__magic_commit/command-<job>/<verb>-<nonce>.json`` (the nonce a fresh uuid4; with
If-None-Match, so a resend after a lost answer finds it and nothing else writes that key),
before it reads anything of the job; then it lists ``command-<job>/`` and reads the one
claim ``command-<job>.json`` an older zerorename wrote. A claim of the other verb there: it
deletes its own and refuses in one line, changing nothing. Of two commands that start at
once at least one sees the other's claim (each lists after its own write; S3's listings
are strongly consistent), so at most one acts; both may refuse (run again). Same-verb
claims of other runs do not stop it (a retry of a command whose process died; two runs of
one idempotent command may overlap).

A run deletes only its own claim when it ends, however it ends, so no command ever removes
the claim of another one still running (the defect of the one shared claim object: a
second abort that failed deleted the first one's claim, and a resume ran under that
abort). Once its command has succeeded, or found that its verb has nothing to do on the
job (:data:`NOTHING_TO_DO`: no job; a resume of a job whose commit never started), it
lists the claims again and also deletes those of its verb: runs that died guard nothing
any more, and one still alive can only find the same (its verb's work is done, or there
is none). A failure of any other kind (a store error, a refusal) leaves them: the
earlier run may be acting still. A claim of a dead command of the other verb blocks only
the other verb, and the refusal names it (to delete once that process is gone).
``settled`` (a resume's): True when the job committed, so an abort of it refuses and
changes nothing; such a resume, which only finishes the job's cleanup, goes on past abort
claims and deletes them when it succeeds (a dead abort's would keep a committed job's
records forever otherwise).

Needs a listing that shows every claim written before it (S3, moto, one Ceph RGW zone):
where listings lag writes, a resume and an abort can both act (a strict xfail in
``tests/unit/cli/test_cmdclaim.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from zerorename.aio import to_the_end
from zerorename.committers import objectstore as caps
from zerorename.committers.codec.validate import Fields, load_json
from zerorename.committers.errors import (
    CommitterError,
    InvalidJobId,
    JobNotFound,
    NothingToResume,
    RecordFormatError,
)
from zerorename.committers.objectstore import Store
from zerorename.committers.paths import Destination, check_job_id
from zerorename.committers.s3a.layout import s3a_id_problem
from zerorename.committers.store import read_optional
from zerorename.engine.errors import ObjectTooLarge, PreconditionFailed

#: zerorename's own directory at a destination (the commit lock's too)
CLAIM_DIR = "__magic_commit"
CLAIM_VERSION = 1
JSON = "application/json"
#: the verbs of the operator commands that take a job's command claim
CLAIM_VERBS = {"resume": "resumed", "abort": "aborted"}
#: the claims a command considers at most (each dead run leaves one until a run of its
#: verb succeeds): past it the command refuses, so memory never follows a listing
MAX_CLAIMS = 1000
#: the claims a refusal names (and says how many more)
NAMED = 3
#: a command's verdicts that its verb has nothing left to do on the job (no job; a resume
#: of a job whose commit never started): as after its success, earlier runs of the
#: verb, dead or alive, have nothing to do there either, so their claims guard nothing
NOTHING_TO_DO = (JobNotFound, NothingToResume)
_NAME = re.compile(r"(resume|abort)-([0-9a-f]{32})\.json")

__all__ = [
    "CLAIM_VERBS",
    "Claim",
    "Decision",
    "claim_dir",
    "command_claim",
    "decide",
    "legacy_claim_key",
]


def _job_slot(job_id: str) -> str:
    """The id as the claim's key carries it: a UUID (zerorename's, canonical form) or an
    S3A job's id as Hadoop chose it (a UUID, or the Hadoop JobID ``job_<ts>_<n>``:
    :func:`s3alayout.s3a_id_problem`); InvalidJobId for anything else."""
    try:
        return check_job_id(job_id)
    except InvalidJobId:
        problem = s3a_id_problem(job_id)
        if problem is not None:
            raise InvalidJobId(
                f"job id {job_id!r} is neither a UUID nor an S3A job id: {problem}"
            ) from None
        return job_id


def claim_dir(dest: Destination, job_id: str) -> str:
    """The prefix of job ``job_id``'s claims, ``<dest>/__magic_commit/command-<job>/`` (in
    zerorename's own directory, also at an S3A job's destination, whose layout we do not
    own; with its '/': ``command-job_1/`` never lists ``command-job_10/``)."""
    return dest.key(f"{CLAIM_DIR}/command-{_job_slot(job_id)}/")


def legacy_claim_key(dest: Destination, job_id: str) -> str:
    """The one claim object of a job that zerorename wrote before claims were per run."""
    return dest.key(f"{CLAIM_DIR}/command-{_job_slot(job_id)}.json")


def claim_record(job_id: str, verb: str, nonce: str) -> bytes:
    d = {
        "version": CLAIM_VERSION,
        "jobId": job_id,
        "command": verb,
        "nonce": nonce,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "created": time.time(),
    }
    return json.dumps(d, ensure_ascii=False).encode()


@dataclass(frozen=True)
class Claim:
    """One claim object of the job: its key and its verb ("" when it is no claim this
    zerorename wrote: an object it cannot read, or a name it never gives)."""

    key: str
    verb: str
    #: the single ``command-<job>.json`` of an older zerorename
    legacy: bool = False


def listed_claim(prefix: str, key: str) -> Claim:
    """The claim at ``key`` listed under ``prefix`` (:func:`claim_dir`); its verb is in its
    name, so a listing decides without reading any claim."""
    m = _NAME.fullmatch(key.removeprefix(prefix))
    return Claim(key, m.group(1) if m is not None else "")


@dataclass(frozen=True)
class Decision:
    """What a command does about the other claims of its job (:func:`decide`)."""

    #: claims that stop it: the other verb's, or any it cannot read
    blocking: tuple[Claim, ...]
    #: same-verb claims of other runs: deleted once the command succeeded
    earlier: tuple[Claim, ...]

    def waivable(self, verb: str) -> bool:
        """Whether a resume of a committed job goes on past every blocking claim: each is
        an abort's (an abort of a committed job changes nothing)."""
        return verb == "resume" and all(c.verb == "abort" for c in self.blocking)


def decide(verb: str, mine: str, claims: Sequence[Claim]) -> Decision:
    """Sort the job's claims (``mine``, the command's own key, left out) for a command
    of ``verb``."""
    others = [c for c in claims if c.key != mine]
    return Decision(
        tuple(c for c in others if c.verb != verb),
        tuple(c for c in others if c.verb == verb),
    )


def claimed_by(data: bytes | None, location: str) -> tuple[str, str]:
    """The claim's verb and a short "who, since when"; ("", "") when unreadable (a
    claim nobody can read is no claim's verb: the command refuses)."""
    if data is None:
        return "", ""
    try:
        f = Fields(load_json(data, "command claim", location), "command claim", location)
        verb = f.str_("command")
        who = f"{f.str_('hostname', required=False, empty=True)} pid {f.d.get('pid')}"
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(f.time_("created")))
        return verb, f"{who}, since {when}"
    except RecordFormatError:
        return "", ""


async def _read(engine: Store, dest: Destination, key: str) -> bytes | None:
    """A claim's bytes (None: gone); one larger than a marker is no claim (b"")."""
    try:
        return await read_optional(engine, dest.bucket, key, max_size=caps.MARKER_CAP)
    except ObjectTooLarge:
        return b""


async def job_claims(engine: Store, dest: Destination, job_id: str) -> list[Claim]:
    """Every claim of the job: those listed under :func:`claim_dir`, then the legacy one
    (its verb read from its record). More than :data:`MAX_CLAIMS`: CommitterError."""
    prefix = claim_dir(dest, job_id)
    out: list[Claim] = []
    async for info in engine.list_objects(dest.bucket, prefix):
        if len(out) == MAX_CLAIMS:
            raise CommitterError(
                f"job {job_id}: more than {MAX_CLAIMS} objects under {dest.uri_of(prefix)}, "
                f"so not only claims of commands that ran; nothing changed: delete those no "
                f"command holds, then run the command again"
            )
        out.append(listed_claim(prefix, info.key))
    legacy = legacy_claim_key(dest, job_id)
    data = await _read(engine, dest, legacy)
    if data is not None:
        out.append(Claim(legacy, claimed_by(data, dest.uri_of(legacy))[0], legacy=True))
    return out


async def refusal(
    engine: Store, dest: Destination, job_id: str, verb: str, blocking: Sequence[Claim]
) -> CommitterError:
    """The one line of a command that other claims stop: who holds each (its record read
    for the few named), and what to do."""
    named: list[str] = []
    for c in blocking[:NAMED]:
        where = dest.uri_of(c.key)
        _, who = claimed_by(await _read(engine, dest, c.key), where)
        named.append(f"{who}: {where}" if who and c.verb else where)
    more = len(blocking) - NAMED
    rest = f"; and {more} more under {dest.uri_of(claim_dir(dest, job_id))}" if more > 0 else ""
    held = "; ".join(named) + rest
    if all(c.verb for c in blocking):
        other = blocking[0].verb  # all of one verb: the other one
        doing = CLAIM_VERBS[other]
        them = "that process is" if len(blocking) == 1 else "those processes are"
        it = "it" if len(blocking) == 1 else "them"
        return CommitterError(
            f"job {job_id} is being {doing} by another command ({held}); nothing changed: "
            f"let it finish (`zerorename jobs {other}` again), or run this again if it "
            f"refused too; if {them} gone and you mean to {verb} instead, delete {it} first"
        )
    return CommitterError(
        f"job {job_id}: its command claims include objects this zerorename did not write "
        f"({held}); nothing changed: delete what no command of yours wrote, then run the "
        f"{verb} again"
    )


async def _write(engine: Store, dest: Destination, key: str, data: bytes) -> None:
    # PreconditionFailed: a resend of this write after a lost answer (the key is this run's)
    with contextlib.suppress(PreconditionFailed):
        await engine.put_object(dest.bucket, key, data, if_none_match=True, content_type=JSON)


async def _release(engine: Store, dest: Destination, keys: list[str]) -> None:
    """Delete this run's claim (and the claims it may drop), to its end even when the
    command is interrupted; a failure leaves them (the refusals name them)."""
    with contextlib.suppress(Exception):
        await to_the_end(engine.delete_objects(dest.bucket, keys))


@contextlib.asynccontextmanager
async def command_claim(
    engine: Store,
    dest: Destination,
    job_id: str,
    verb: str,
    *,
    settled: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncIterator[str]:
    """Hold a claim of job ``job_id`` for ``zerorename jobs <verb>`` (resume or abort)
    while the block runs (the module's rules); the block gets the claim's URI. Refused
    (CommitterError, one line, nothing changed) while a command of the other verb holds
    one."""
    nonce = uuid.uuid4().hex
    key = f"{claim_dir(dest, job_id)}{verb}-{nonce}.json"
    drop: list[str] = []
    try:
        await _write(engine, dest, key, claim_record(job_id, verb, nonce))
        d = decide(verb, key, await job_claims(engine, dest, job_id))
        waived: tuple[Claim, ...] = ()
        if d.blocking:
            if not (settled is not None and d.waivable(verb) and await settled()):
                raise await refusal(engine, dest, job_id, verb, d.blocking)
            waived = d.blocking
        try:
            yield dest.uri_of(key)
        except NOTHING_TO_DO:
            drop = await _done(engine, dest, job_id, verb, d.earlier)
            raise
        drop = await _done(engine, dest, job_id, verb, (*d.earlier, *waived), waived != ())
    finally:
        await _release(engine, dest, [key, *drop])


async def _done(
    engine: Store,
    dest: Destination,
    job_id: str,
    verb: str,
    seen: Sequence[Claim],
    settled: bool = False,
) -> list[str]:
    """The claims a run whose verb's work is done deletes with its own: every claim of its
    verb listed now (also of runs that began after it; they find the job as it left it),
    and a settled resume's abort claims too; ``seen`` (those it listed at its start) when
    this listing fails: the command's outcome stands."""
    try:
        now = await job_claims(engine, dest, job_id)
    except Exception:
        now = list(seen)
    return [c.key for c in now if c.verb == verb or (settled and c.verb == "abort")]
