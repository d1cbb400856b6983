"""``python -m zerorename.perf SCENARIO ...``: the same as ``zerorename perf``."""

from zerorename.perf.harness import main

raise SystemExit(main())
