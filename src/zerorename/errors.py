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

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, TypeVar, cast

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
Source = type[Exception] | tuple[type[Exception], ...]
F = TypeVar("F", bound=Callable[..., Any])


def _is_source(key: object) -> bool:
    if isinstance(key, tuple):
        return bool(key) and all(_is_source(k) for k in key)
    return isinstance(key, type) and issubclass(key, Exception)


class map_exceptions:
    """Map errors escaping a block or function into a boundary's family, keeping the
    original as ``__cause__``.

    ``mapping`` is read in order, first match wins (put subclasses first); an error that
    already is one of the target classes, an unmatched error, and anything that is not an
    ``Exception`` (cancellation, KeyboardInterrupt) pass unchanged. An exception group
    (from a task group) is mapped by its first real error (``aio.first_error``).
    A class target gets ``"<context>: <original message>"``. Works as ``with``,
    ``async with`` and as a decorator of functions, coroutine functions and async
    generator functions; it keeps no state, so one instance may guard many calls at once.
    """

    __slots__ = ("_context", "_family", "_mapping")

    def __init__(self, mapping: Mapping[Source, Target], *, context: str = "") -> None:
        items = tuple(mapping.items())
        for source, target in items:
            if not _is_source(source):
                raise TypeError(f"map_exceptions keys must be Exception classes, got {source!r}")
            if not callable(target):
                raise TypeError(f"map_exceptions values must be callable, got {target!r}")
        self._mapping = items
        self._context = context
        self._family = tuple(t for _, t in items if isinstance(t, type))

    def __repr__(self) -> str:
        pairs = ", ".join(f"{_name(s)}: {_name(t)}" for s, t in self._mapping)
        return f"map_exceptions({{{pairs}}}, context={self._context!r})"

    def translate(self, exc: BaseException) -> BaseException:
        """What leaves the boundary for ``exc``: the mapped error (its ``__cause__`` is the
        original), the group's error when it already is in the family, else ``exc``."""
        from zerorename.aio import first_error  # asyncio and anyio: not for every importer

        leaf = first_error(exc)
        if not isinstance(leaf, Exception) or isinstance(leaf, BaseExceptionGroup):
            return exc
        if self._family and isinstance(leaf, self._family):
            return leaf
        for source, target in self._mapping:
            if isinstance(leaf, source):
                new = target(self._message(leaf)) if isinstance(target, type) else target(leaf)
                new.__cause__ = leaf
                return new
        return exc

    def _message(self, exc: Exception) -> str:
        text = str(exc) or type(exc).__name__
        return f"{self._context}: {text}" if self._context else text

    def _reraise(self, exc: BaseException | None) -> bool:
        if exc is None:
            return False
        new = self.translate(exc)
        if new is exc:
            return False
        raise new  # translate set its __cause__

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        et: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        return self._reraise(exc)

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc_info: Any) -> bool:
        return self.__exit__(*exc_info)

    def __call__(self, fn: F) -> F:
        """Decorate ``fn`` so what escapes each call is mapped."""
        if inspect.isasyncgenfunction(fn):

            @functools.wraps(fn)
            async def agen(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                with self:
                    async for item in fn(*args, **kwargs):
                        yield item

            return cast(F, agen)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def coro(*args: Any, **kwargs: Any) -> Any:
                with self:
                    return await fn(*args, **kwargs)

            return cast(F, coro)

        @functools.wraps(fn)
        def plain(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return cast(F, plain)


def _name(obj: object) -> str:
    if isinstance(obj, tuple):
        return "(" + ", ".join(_name(o) for o in cast(Iterable[object], obj)) + ")"
    return getattr(obj, "__qualname__", repr(obj))
