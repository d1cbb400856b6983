"""The rows ``zerorename demo`` writes, which the ``spark`` perf scenario writes too: each
column a function of ``id``, so every row read back can be checked. Apart from both (the
command and the harness) so that neither imports the other; pyspark is not imported here,
the caller's session builds the rows."""

from __future__ import annotations

import datetime as dt
from typing import Any

#: raw bytes per generated row (id, key, value, 64-character payload), to size the data.
ROW_BYTES = 100
DAY0 = dt.date(2024, 1, 1)


def dataset(spark: Any, rows: int, tasks: int, days: int) -> Any:
    """The demo's rows (the ``spark`` perf scenario writes the same): each column is a
    function of ``id``, so every row read back can be verified."""
    return spark.range(0, rows, 1, tasks).selectExpr(
        "id",
        "CAST(id % 1000 AS INT) AS key",
        "CAST(id AS DOUBLE) * 0.5 AS value",
        "sha2(CAST(id AS STRING), 256) AS payload",
        f"CAST(date_add(DATE'{DAY0.isoformat()}', CAST(id * {days} DIV {rows} AS INT)) "
        "AS STRING) AS day",
    )
