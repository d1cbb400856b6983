"""A context-manager base for test services that have start() and stop()."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Service:
    """``with Svc(...) as s:`` runs ``s.start()`` and, on the way out, ``s.stop()``."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
