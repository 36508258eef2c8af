"""backfill: TiDB change data (kv-scan captures, a TiCDC storage sink, a TiCDC Kafka topic) → Delta tables."""
