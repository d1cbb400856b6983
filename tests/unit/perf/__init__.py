"""Unit tests of :mod:`zerorename.perf`."""
