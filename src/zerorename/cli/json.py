"""``--json`` output of the ``zerorename`` commands: ONE JSON document on stdout, with a
``version`` (of this schema) and the ``command`` that wrote it; errors stay one line on
stderr. The schema is the README's ``json cli-schema`` block (tests check each command's
output against it). A shared leaf: the committers' commands use it too.

Output is ASCII JSON (every non-ASCII or control character an escape), so a hostile key
can neither forge terminal output nor break the document. A list that may be long
(``uploads list|abort``) streams: :class:`JsonList` writes the document's head, one item
at a time, then its tail, so memory does not follow the number of uploads.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

__all__ = ["VERSION", "JsonList", "document", "emit"]

#: the schema's version: a field is only ever added within one version; a removal or a
#: change of meaning makes a new version
VERSION = 1


def document(command: str, **fields: Any) -> dict[str, Any]:
    """The document of ``command`` (``"put"``, ``"jobs list"``, ...) with ``fields``."""
    return {"version": VERSION, "command": command, **fields}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def emit(command: str, out: TextIO | None = None, **fields: Any) -> None:
    """Print the one document of ``command`` on stdout (one line)."""
    stream = out if out is not None else sys.stdout
    stream.write(dumps(document(command, **fields)) + "\n")
    stream.flush()


class JsonList:
    """One document whose field ``name`` is a list written item by item:

    with JsonList("uploads list", "uploads", prefix=uri) as doc:
        for u in uploads: doc.add({...})
        doc.set(count=n)          # fields after the list

    The tail is written only on a clean exit: an error leaves no closing brace, so the
    broken document is never mistaken for a complete one (the error is on stderr)."""

    def __init__(self, command: str, name: str, out: TextIO | None = None, **head: Any) -> None:
        self._out = out if out is not None else sys.stdout
        self._head = document(command, **head)
        self._name = name
        self._tail: dict[str, Any] = {}
        self._count = 0

    def __enter__(self) -> JsonList:
        text = dumps(self._head)
        self._out.write(f"{text[:-1]},{dumps(self._name)}:[")
        return self

    def add(self, item: Any) -> None:
        self._out.write(("," if self._count else "") + dumps(item))
        self._count += 1

    def set(self, **fields: Any) -> None:
        self._tail.update(fields)

    def __exit__(self, et: object, ev: object, tb: object) -> None:
        if et is not None:
            self._out.write("\n")
            self._out.flush()
            return
        tail = "".join(f",{dumps(k)}:{dumps(v)}" for k, v in self._tail.items())
        self._out.write(f"]{tail}}}\n")
        self._out.flush()
