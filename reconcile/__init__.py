"""reconcile: prove a Delta table equals its upstream TiDB/MySQL/MariaDB table, or show where it does not."""
