"""Unit tests of :mod:`zerorename.sim`."""
