"""``zerorename perf stream``: the scenario (``scenario``), the check of what a
micro-batch left (``check``), one measured run in its child process (``measure``)."""
