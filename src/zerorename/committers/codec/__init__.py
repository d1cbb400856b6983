"""The committers' record files, encoded and checked: ``.pending`` and ``.pendingset``
(:mod:`.pending`), ``_SUCCESS`` (:mod:`.success`), the field checks every record goes
through (:mod:`.validate`), the incremental JSON scanner that reads a pendingset of any
size (:mod:`.jsonstream`), and what Hadoop reads in these records beyond plain JSON
(:mod:`.hadoop`: a ``uri`` as Hadoop's ``Path`` writes it, ``iostatistics``). Pure: no
request is sent from here.

Before issue 21 these were ``committers/records.py``, ``successdata.py``, ``validate.py``,
``jsonstream.py`` and ``s3aformat.py``; those paths still import, as aliases of these
modules."""
