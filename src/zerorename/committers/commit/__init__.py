"""The job commit: the I/O driver (:mod:`.run`) and its parts.

- :mod:`.scan` reads and checks every pendingset before the first complete (round 1),
- :mod:`.complete` runs the completion window (:mod:`.window`, pure) over the spooled
  pendingsets (:mod:`.spool`),
- :mod:`.storage` does the job's records as a whole (abort, replace, cleanup),
- :mod:`.journal` is the commit's state machine and its records, :mod:`.policy` which
  work each state needs and what a failure there means (both pure),
- :mod:`.lock` is the destination's commit lock, :mod:`.result` what a commit returns.

Before issue 21 these were ``committers/job*.py``, ``journal``, ``window``, ``spool`` and
``commitlock``; those paths still import, as aliases of these modules."""
