"""The Structured Streaming sink: ``df.writeStream.format("zerorename")``, one zerorename
job per micro-batch, exactly once across restarts.

- :mod:`.writer` is Spark's stream writer (pickled to the tasks; no committer inside),
- :mod:`.task` what a task of a micro-batch runs,
- :mod:`.log` the query's log of committed batches and what to do with a batch (pure),
- :mod:`.sink` the commit (or abort) of one micro-batch at the destination (and
  ``read_stream_log``),
- :mod:`.read` the readers that see only whole batches (``committed_files``),
- :mod:`.jobs` ``zerorename jobs show|resume|abort`` of a batch's job.

Importing this package imports none of them: each of Spark's processes loads only the
module its step needs.
"""
