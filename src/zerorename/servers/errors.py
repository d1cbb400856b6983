"""Errors of the S3 servers and the test infrastructure (one root: :class:`TestingError`, a
:class:`zerorename.errors.ZeroRenameError`)."""

from __future__ import annotations

from zerorename.errors import ZeroRenameError


class TestingError(ZeroRenameError):
    """Root of the errors raised by zerorename.servers."""

    __test__ = False  # not a pytest test class


class ServerStartError(TestingError):
    """A local S3 server (moto or Ceph RGW) could not be started; the message names the log."""


class RgwNotInstalled(TestingError):
    """The Ceph RGW binaries are missing and cannot be installed here (not root, no apt-get)."""
