"""TiCDC's Kafka sink as a source (`source.kind = "ticdc-kafka"`): a changefeed's topic read in batches by
offsets with Spark's Kafka source (`broker`), completeness from per-partition resolved events and the
offsets each run starts from recorded in the Delta commits (`progress`), the plan and typed changes
(`source`)."""
