"""Run files and running them: ``gridstream run FILE.toml | CONNECTOR.properties``.

``config`` loads a run file (``RunFile``: ``[kafka]``, ``[spark]``, ``[run]``,
``[types]``, store feeds, API pipelines and connectors) and ``properties`` a
connector's ``.properties`` file; ``run_flows`` runs the flows they build under the
runner (``gridstream.spark.runner.PipelineRunner``) until stopped. Nothing below this
package imports it.
"""

from gridstream.run.config import RunFile, load_config, run_config, run_flows
from gridstream.spark.runner import PipelineRunner, RestartPolicy

__all__ = ["PipelineRunner", "RestartPolicy", "RunFile", "load_config", "run_config",
           "run_flows"]
