"""The pipeline API: ``read_from(source)`` → ``map`` / ``filter`` / ``flat_map`` /
``map_batch`` / ``window`` / ``join`` → ``write_to(sink)``, compiled to one Spark
Structured Streaming query per pipeline (``docs/pipeline-api.md``)."""
