"""zerorename: write large outputs into S3 with a zero-rename commit protocol."""

from zerorename.errors import ZeroRenameError as ZeroRenameError

__version__ = "0.1.0"
