"""Errors raised by the Spark adapter; every one derives from :class:`SparkAdapterError`,
itself a :class:`zerorename.errors.ZeroRenameError`.

Errors of the layers below (engine, committers) pass through unchanged: a failed job
commit is still a :class:`zerorename.committers.JobCommitError`.
"""

from __future__ import annotations

from zerorename.errors import ConfigError, ZeroRenameError


class SparkAdapterError(ZeroRenameError):
    """Root of every error the Spark adapter raises."""


class OptionError(SparkAdapterError, ConfigError):
    """Raised on the driver, before any task runs, when a data source option, the data's
    schema or a demo argument is unusable. A :class:`zerorename.errors.ConfigError` (and a
    ValueError), not an engine error: catch ``zerorename.errors.ConfigError`` for a bad
    setting in any layer."""


class BridgeError(SparkAdapterError, RuntimeError):
    """Raised when the loop bridge is used in a way that cannot work, such as ``run``
    from the loop's own thread (it would wait for itself forever)."""


class CommitMessageError(SparkAdapterError):
    """Raised by job commit when Spark's task messages are not one accepted attempt per
    partition (a partition missing or twice): nothing is committed."""


class ClusterError(SparkAdapterError):
    """Raised when a local standalone cluster (the Spark tests' ``StandaloneCluster``) does
    not come up (logs in the message)."""


class DemoError(SparkAdapterError):
    """Raised when the demo cannot run or its data does not verify."""


class StreamLogError(SparkAdapterError):
    """Raised by the streaming sink and its readers when a query's stream log, or the state
    it describes, cannot be acted on (a malformed log, a checkpoint that is not Spark's, a
    batch id committed already), or when ``committed_files`` could take no consistent
    snapshot: nothing is committed or deleted; the message names the record and what to
    do."""
