"""Unit tests of :mod:`zerorename.servers`."""
