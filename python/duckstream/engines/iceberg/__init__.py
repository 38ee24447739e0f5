"""Spark + Apache Iceberg: the engine (SQL), its dialect and refusals, the estimate, the runner,
the local session and its jar relocation."""
