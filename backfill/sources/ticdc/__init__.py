"""TiCDC's output formats, shared by the storage-sink and the Kafka sources: pure decoding over bytes.

- :mod:`schema_file` - the storage sink's ``schema_<version>_<checksum>.json`` (TableDefinition) and its
  conversion to a TiDB TableInfo / :class:`backfill.codec.TableSchema`;
- :mod:`text_values` - MySQL text forms of values (as TiCDC prints them) to Delta-typed Arrow arrays;
- :mod:`csv_format` - the CSV protocol; :mod:`canal_json` - canal-json with the TiDB extension;
- :mod:`change_rows` - the one shape every decoder here returns (row changes with op, commit ts, line).

Facts come from tiflow and ticdc (``pkg/sink/cloudstorage``, ``pkg/cloudstorage``, ``pkg/sink/codec/csv``,
``pkg/sink/codec/canal``) and ``shared/reference/ticdc-protocols.md`` §2-§3.
"""
