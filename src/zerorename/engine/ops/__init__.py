"""The operations :class:`~zerorename.engine.UploadEngine` owns as members, beside its
uploads: completing, aborting and listing multipart uploads, one or streamed in batches
(``completion.py``, :class:`Completion`), and whole small objects: get, put, head, list,
delete (``objects.py``, :class:`Objects`). The engine's public methods delegate to them."""
