"""Hadoop S3A interop: the layout of an S3A magic job's directory (:mod:`.layout`, pure),
reading and checking a job's records (:mod:`.read`), and ``zerorename jobs`` on S3A jobs:
list, show, resume (:mod:`.jobs`) and abort (:mod:`.abort`). What S3A's record formats
need beyond plain JSON is a codec's (:mod:`zerorename.committers.codec.hadoop`).

Before issue 21 these were ``committers/s3a*.py``; those paths still import, as aliases
of these modules."""
