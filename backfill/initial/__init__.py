"""A job's initial load: each tracked table's first Delta version from a consistent snapshot of the
upstream, committed at the snapshot's TSO, so the job's TiCDC source continues from there
(`[source.initial]`, docs/architecture.md "Starting from a snapshot").

- :mod:`export` - a Dumpling export: its TSO, its tables' schemas, its CSV files parsed (pure);
- :mod:`load` - the first run: the export's tracked tables read by Spark and committed at the TSO.
"""
