"""kv-scan: TiKV incremental-scan captures (DESIGN.md "Input contract").

`format` owns the layout (events Parquet schema, manifest, schema files, writers); `captures` lists
complete captures; `chain` and `resolved` decide how far a run can go; `matcher`, `keyranges` and
`collapse` turn region streams into one change per row; `decode` turns TiDB row bytes into typed rows;
`source` puts them behind the `Source` interface.
"""
