"""``python -m zerorename.cli``: the ``zerorename`` command."""

import sys

from zerorename.cli.entry import main

sys.exit(main())
