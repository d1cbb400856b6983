"""Unit tests of :mod:`zerorename.committers.commit`."""
