"""The TiCDC storage-sink source (`source.kind = "ticdc-storage"`).

- :mod:`layout` - the sink's folder layout, as pure path parsing;
- :mod:`plan` - which files a run reads, table versions, segments and rename chains (pure);
- :mod:`decode` - one data file to typed row changes (pure, run on the executors);
- :mod:`source` - the `Source`: listing, schema files, the window, Spark reads.
"""
