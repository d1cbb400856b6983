"""The files one task writes, from Arrow record batches to bytes (pyarrow; no Spark, no S3).

- :mod:`.router` routes a task's batches into one file per partition directory,
- :mod:`.partitioning` names the Hive-style partition directories as Spark does (pure),
- :mod:`.spill` decides which partitions stream into open files and which spill to local
  disk, and spills them,
- :mod:`.formats` writes Parquet, CSV, JSON and text into a sink as it goes, with the text
  encoders :mod:`.csvformat`, :mod:`.jsonformat` and :mod:`.javatext` (values as Spark's
  JVM writers print them).

Importing this package imports none of them (nor pyarrow).
"""
