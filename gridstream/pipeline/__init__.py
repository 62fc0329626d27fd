"""The pipeline API: ``read_from(source)`` → ``map`` / ``filter`` / ``flat_map`` /
``map_batch`` / ``window`` / ``join`` → ``write_to(sink)``, compiled to one Spark
Structured Streaming query per pipeline (``docs/pipeline-api.md``)."""

from gridstream.pipeline.api import KafkaRecord, Pipeline, Stage, entry
from gridstream.pipeline.base import Flow, Guarantee, RunContext, Sink, Source
from gridstream.pipeline.console import Sinks
from gridstream.pipeline.kafka import KafkaSinks, KafkaSources

__all__ = ["Flow", "Guarantee", "KafkaRecord", "KafkaSinks", "KafkaSources", "Pipeline",
           "RunContext", "Sink", "Sinks", "Source", "Stage", "entry"]
