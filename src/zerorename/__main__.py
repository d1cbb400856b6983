"""``python -m zerorename``: the ``zerorename`` command."""

import sys

from zerorename.cli import main

sys.exit(main())
