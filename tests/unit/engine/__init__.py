"""Unit tests of :mod:`zerorename.engine`."""
