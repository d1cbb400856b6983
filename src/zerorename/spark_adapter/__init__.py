"""PySpark integration: the event-loop bridge and the ``zerorename`` data source.

Importing this package does not import pyspark; the data source pieces load it lazily.
"""

from __future__ import annotations

from zerorename.spark_adapter.bridge import BridgeError, LoopBridge, get_bridge

__all__ = ["BridgeError", "LoopBridge", "get_bridge"]
