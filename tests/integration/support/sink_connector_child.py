"""A sink connector's Spark driver as a process of its own, run through the pipeline
runner (as ``gridstream run`` does), for the kill tests: prints the runner's progress
lines (``<name>  batch N: ...``) until stopped or killed.

Usage: python -m tests.integration.support.sink_connector_child '<SinkConnectorConfig as JSON>'
       BOOTSTRAP
"""

from __future__ import annotations

import sys

from gridstream.connect.config import SinkConnectorConfig
from gridstream.connect.sink import SinkConnector
from gridstream.spark import get_spark
from gridstream.spark.runner import PipelineRunner


def main(argv: list[str]) -> int:
    config = SinkConnectorConfig.model_validate_json(argv[0])
    connector = SinkConnector(config, bootstrap_servers=argv[1])
    runner = PipelineRunner([connector], lambda: get_spark(app_name="sink-child"),
                            poll_s=0.2)
    return runner.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
