"""zerorename: write large outputs into S3 with a zero-rename commit protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zerorename import _moved

if TYPE_CHECKING:
    from zerorename.errors import ZeroRenameError as ZeroRenameError

__version__ = "0.1.0"

_moved.install()  # the old paths of moved modules import as those modules (issue 21)


def __getattr__(name: str) -> Any:
    """``ZeroRenameError`` is imported on first use: importing the package stays cheap, so
    the command's entry point (zerorename.cli) can catch a Ctrl-C before anything heavy
    loads."""
    if name == "ZeroRenameError":
        from zerorename.errors import ZeroRenameError

        return ZeroRenameError
    raise AttributeError(f"module 'zerorename' has no attribute {name!r}")
