"""The perf harness's error family: every failure a benchmark run reports on purpose.

A ``PerfError`` is a ``zerorename.ZeroRenameError``, so ``zerorename perf`` ends with one
line naming it (never "unexpected ... please report it"); each class under it is also
a ``RuntimeError``, as before.
"""

from __future__ import annotations

from zerorename.errors import ZeroRenameError

__all__ = [
    "ChildFailed",
    "PerfError",
    "PrepareFailed",
    "StreamVerificationError",
    "TargetError",
    "TlsProbeError",
    "VerificationError",
]


class PerfError(ZeroRenameError):
    """A benchmark could not run or its result could not be trusted."""


class TargetError(PerfError, RuntimeError):
    """A target could not be opened; the message says what to do."""


class ChildFailed(PerfError, RuntimeError):
    """A measured run failed; the message carries the child's last lines of stderr."""


class PrepareFailed(PerfError, RuntimeError):
    """The untimed preparation process failed; the message carries its stderr's tail."""


class VerificationError(PerfError, RuntimeError):
    """After a measured run the destination did not hold exactly what the run promised."""


class TlsProbeError(PerfError, RuntimeError):
    """The probe connection failed (an unknown CA, a wrong host name, no TLS at all)."""


class StreamVerificationError(VerificationError):
    """After a ``stream`` run the destination or the query's log did not hold exactly the
    committed batches: the run's figures are not reported."""
