"""``zerorename perf``'s scenarios (issue 21): one module per scenario, ``NAME.py``, or a
folder ``NAME/`` (the scenario in ``NAME/scenario.py``) for one with parts of its own:

- ``upload`` (and ``upload_latency``: the added latency of ``--latency-ms``, which
  ``sweep`` and ``tune`` use too), ``many``, ``sweep``,
- ``commit/``: the job commit against boto3 (``scenario``), its parts: the wire with added
  latency (``latency``), the check of what a commit left (``verify``), the floor (``floor``),
- ``stream/``: the streaming sink's micro-batches (``scenario``), what a batch left
  (``check``), one measured run (``measure``),
- ``tune/``: the tuner (``scenario``), its model and pick (``model``), the grid (``grid``),
- ``spark`` (and ``rename_baseline``: Hadoop's rename commit it is measured against).

The harness finds each by its name in :data:`zerorename.perf.SCENARIO_NAMES`.
"""
