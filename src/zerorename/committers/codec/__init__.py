"""The committers' record files, encoded and checked: ``.pending`` and ``.pendingset``
(:mod:`.pending`), ``_SUCCESS`` (:mod:`.success`), the field checks every record goes
through (:mod:`.validate`), and the incremental JSON scanner that reads a pendingset of
any size (:mod:`.jsonstream`). Pure: no request is sent from here.

Before issue 21 these were ``committers/records.py``, ``successdata.py``, ``validate.py``
and ``jsonstream.py``; those paths still import, as aliases of these modules."""
