"""The engine's requests on the wire: the aiobotocore client and the fast path for the hot
calls (``client.py``), their requests built and signed (``fastpath.py``) and their answers
parsed (``fastanswers.py``), the checks every answer passes (``answers.py``), and bodies
sent with a trailing checksum (``trailer.py``). Nothing here retries: ``retry.py`` does."""
