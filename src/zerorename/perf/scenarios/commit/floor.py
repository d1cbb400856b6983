"""The ``floor`` client of the ``commit`` scenario: the least CPU a job commit's completes cost.

It completes the same prepared uploads (N one-part deferred uploads, read from the job's
pendingsets untimed, as the boto3 loop does) as pre-signed CompleteMultipartUpload
requests whose request line, headers and one-part XML body are built before the
measurement starts. Measured: opening ``--batch-concurrency`` keep-alive connections (the
TLS handshakes included) and, on one thread with a selector, writing each ready request
and reading its answer (checked: 200 and a CompleteMultipartUploadResult), as many in
flight as the engine's commit. No signing, no XML building or parsing beyond that check,
no records, no ``_SUCCESS``: what is left is what any commit must pay per complete.
"""

from __future__ import annotations

import selectors
import ssl
from typing import Any
from urllib.parse import urlsplit

from zerorename.perf.floor import Connection, FloorError, client_context, split_answer
from zerorename.perf.model import Target
from zerorename.perf.scenarios.commit import scenario as commit_scenario
from zerorename.perf.scenarios.commit.latency import Measure

_WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


def measure_floor(target: Target, params: dict[str, Any]) -> dict[str, float]:
    """The floor of the prepared job's commit (verified by listing, like the others)."""
    return commit_scenario._measure(target, params, "floor", _commit_floor)


def build_requests(target: Target, uploads: list[tuple[str, str, Any]]) -> list[bytes]:
    """One ready request per upload: a pre-signed POST and its one-part XML body."""
    from zerorename.engine.wire.fastpath import complete_body

    client = target.plain_boto3_client()
    out = []
    for key, upload_id, parts in uploads:
        url = client.generate_presigned_url(
            "complete_multipart_upload",
            Params={"Bucket": target.bucket, "Key": key, "UploadId": upload_id},
            ExpiresIn=3600,
        )
        where = urlsplit(url)
        body = complete_body({"Parts": parts})
        if body is None:
            raise FloorError(f"no CompleteMultipartUpload body for parts {parts!r}")
        head = (
            f"POST {where.path}?{where.query} HTTP/1.1\r\nHost: {where.netloc}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        out.append(head.encode() + body)
    return out


class _Slot:
    """One connection of the selector loop: the request being written, the answer read."""

    __slots__ = ("conn", "inbuf", "out")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.out = memoryview(b"")
        self.inbuf = b""


def complete_all(target: Target, requests: list[bytes], concurrency: int) -> None:
    """Send every request, ``concurrency`` in flight, each answer checked; one thread."""
    ctx = client_context(target) if (target.endpoint_url or "").startswith("https:") else None
    sel = selectors.DefaultSelector()
    todo = iter(requests)
    slots = [_Slot(Connection(target, ctx)) for _ in range(min(concurrency, len(requests)))]
    left = len(requests)

    def start(slot: _Slot) -> bool:
        request = next(todo, None)
        if request is None:
            sel.unregister(slot.conn.sock)
            return False
        slot.out = memoryview(request)
        return flush(slot)

    def flush(slot: _Slot) -> bool:
        while slot.out:
            try:
                n = slot.conn.sock.send(slot.out)
            except _WOULD_BLOCK:
                sel.modify(slot.conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, slot)
                return True
            slot.out = slot.out[n:]
        sel.modify(slot.conn.sock, selectors.EVENT_READ, slot)
        return True

    try:
        for slot in slots:
            slot.conn.sock.setblocking(False)
            sel.register(slot.conn.sock, selectors.EVENT_READ, slot)
            start(slot)
        while left:
            for key, events in sel.select():
                slot = key.data
                if events & selectors.EVENT_WRITE:
                    flush(slot)
                if not events & selectors.EVENT_READ:
                    continue
                while True:
                    try:
                        more = slot.conn.sock.recv(65536)
                    except _WOULD_BLOCK:
                        break
                    if not more:
                        raise FloorError("the server closed a connection mid-commit")
                    slot.inbuf += more
                answer = split_answer(slot.inbuf)
                if answer is None:
                    continue
                status, _, body, slot.inbuf = answer
                if status != 200 or b"CompleteMultipartUploadResult" not in body:
                    raise FloorError(f"CompleteMultipartUpload answered {status}: {body[:200]!r}")
                left -= 1
                start(slot)
    finally:
        sel.close()
        for slot in slots:
            slot.conn.close()


def _commit_floor(
    target: Target,
    params: dict[str, Any],
    dest: str,
    job_id: str,
    lines: list[str],
    measure: Measure,
) -> tuple[Any, dict[str, float]]:
    uploads = commit_scenario.load_uploads(target.plain_boto3_client(), lines, 16)
    if len(uploads) != int(params["uploads"]):
        raise FloorError(f"pendingsets hold {len(uploads)} uploads, not {params['uploads']}")
    requests = build_requests(target, uploads)
    with measure() as meter:
        complete_all(target, requests, int(params["batch_concurrency"]))
    return meter, {}
