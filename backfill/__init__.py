"""backfill: TiKV incremental-scan captures → Delta tables, one MERGE per table per window."""
