"""Unit tests of :mod:`zerorename.testing`."""
