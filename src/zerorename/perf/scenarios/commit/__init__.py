"""``zerorename perf commit``: the scenario (``scenario``) and its parts: the wire with
added latency (``latency``), the check of what a commit left (``verify``), the floor
(``floor``)."""
