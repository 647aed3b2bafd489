"""Many traces at once: ``batch`` analyses every trace under some paths as Dask tasks into Parquet
tables (``memtrace batch``), ``trend`` reads those tables back as peaks across runs (``memtrace trend``).
Needs the ``batch`` extra (Dask, pyarrow).
"""
