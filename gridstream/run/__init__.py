"""Run files and running them: ``gridstream run FILE.toml | CONNECTOR.properties``.

``config`` loads a run file (``RunFile``: ``[kafka]``, ``[spark]``, ``[run]``,
``[types]``, store feeds, API pipelines and connectors), ``properties`` a
connector's ``.properties`` file, and ``runner`` supervises the flows they build until
stopped. Nothing below this package imports it.
"""

from gridstream.run.config import RunFile, load_config, run_config, run_flows
from gridstream.spark.runner import PipelineRunner, RestartPolicy

__all__ = ["PipelineRunner", "RestartPolicy", "RunFile", "load_config", "run_config",
           "run_flows"]
