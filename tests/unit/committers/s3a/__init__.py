"""Unit tests of :mod:`zerorename.committers.s3a`."""
