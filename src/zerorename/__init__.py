"""zerorename: write large outputs into S3 with a zero-rename commit protocol."""

__version__ = "0.1.0"
