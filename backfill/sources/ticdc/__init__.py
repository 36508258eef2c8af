"""TiCDC outputs: the open protocol (Kafka) and the storage sink formats."""
