"""searchbox: agentic search as test-time compute, run, swept, graded and logged."""

__version__ = "0.1.0"
SCHEMA_VERSION = 2  # run_meta.json and parquet tables; bump on any change, old runs still load (record.upgrade)
