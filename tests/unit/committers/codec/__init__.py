"""Unit tests of :mod:`zerorename.committers.codec`."""
