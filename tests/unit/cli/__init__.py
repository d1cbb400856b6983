"""Unit tests of :mod:`zerorename.cli`."""
