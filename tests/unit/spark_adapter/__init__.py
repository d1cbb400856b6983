"""Unit tests of :mod:`zerorename.spark_adapter`."""
