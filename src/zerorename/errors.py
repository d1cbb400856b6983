"""The one error root, the configuration family every layer shares, and
:class:`map_exceptions`, how a public boundary turns what crosses it into its own family.

Every error zerorename raises on purpose derives from :class:`ZeroRenameError`; each
package has one family under it (``engine.errors.EngineError``,
``committers.errors.CommitterError``, ``spark_adapter.errors.SparkAdapterError``,
``servers.errors.TestingError``). A bad setting or argument, in any layer, is also a
:class:`ConfigError`. A package's boundary maps the errors of the layer below into its own
family with the original as ``__cause__`` (httpcore's ``map_exceptions`` is the model).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

__all__ = ["ConfigError", "ZeroRenameError", "map_exceptions"]


class ZeroRenameError(Exception):
    """Root of every error zerorename raises: catch it to handle them all."""


class ConfigError(ZeroRenameError, ValueError):
    """Raised before any request when a setting or argument is unusable (an
    ``EngineConfig`` field, ``CommitOptions``, a conflict mode, a Spark option, a CLI
    argument); the message names it and what to give instead. Each layer raises a subclass
    that is also in its own family (``engine.errors.ConfigError`` is an ``EngineError``)."""


#: what a mapping sends an error to: an exception class (called with the message) or a
#: function making the new exception from the old one
Target = type[Exception] | Callable[[Exception], BaseException]


class map_exceptions:
    """``with`` (or ``async with``) this around a boundary's work: an error escaping it
    that is an instance of a ``mapping`` key (read in order: put subclasses first) is
    raised as its target, from the original (httpcore's ``_exceptions.py``). A class
    target gets ``"<context>: <original message>"``. An exception group (from a task
    group) counts as its first real error (``aio.first_error``): mapped, or raised as that
    error when it already is of a target class. Anything else, cancellation and
    interrupts included, passes unchanged."""

    def __init__(self, mapping: Mapping[type[Exception], Target], *, context: str = "") -> None:
        self.mapping = mapping
        self.context = context

    def __enter__(self) -> None:
        return None

    def __exit__(self, et: object, exc: BaseException | None, tb: object) -> None:
        from zerorename.aio import first_error  # asyncio and anyio: not for every importer

        leaf = None if exc is None else first_error(exc)
        if not isinstance(leaf, Exception) or isinstance(leaf, BaseExceptionGroup):
            return
        if isinstance(leaf, _classes(self.mapping.values())):
            if leaf is not exc:
                raise leaf  # a group's error that is already the boundary's
            return
        for source, target in self.mapping.items():
            if isinstance(leaf, source):
                if isinstance(target, type):
                    text = str(leaf) or type(leaf).__name__
                    raise target(f"{self.context}: {text}" if self.context else text) from leaf
                raise target(leaf) from leaf

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, et: object, exc: BaseException | None, tb: object) -> None:
        self.__exit__(et, exc, tb)


def _classes(targets: Iterable[Target]) -> tuple[type[Exception], ...]:
    return tuple(t for t in targets if isinstance(t, type))
