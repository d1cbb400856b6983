"""``python -m zerorename.perf SCENARIO ...``: the same as ``zerorename perf``. The harness
is imported inside the interrupt handler, so a Ctrl-C is one line and exit code 130, never
a traceback, even while it loads."""

import sys


def _main() -> int:
    try:
        from zerorename.perf.harness import main

        return main()
    except KeyboardInterrupt:
        print("zerorename perf: interrupted", file=sys.stderr)
        return 130


raise SystemExit(_main())
