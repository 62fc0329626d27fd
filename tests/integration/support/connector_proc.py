"""One connector run by ``PipelineRunner`` in a process of its own, for the tests that
SIGKILL its Spark driver.

``python -m tests.integration.support.connector_proc CONFIG.json``, the file holding
``{"connector": {...connector options...}, "bootstrap_servers": "..."}``. Prints
``spark ready`` once the Spark session is up, then the runner's lines (``starting ...``,
one progress line per batch); SIGTERM stops it cleanly.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gridstream.connect.config import SinkConnectorConfig, SourceConnectorConfig
from gridstream.spark import get_spark
from gridstream.spark.runner import PipelineRunner


def build(raw: dict[str, Any]) -> Any:
    options = raw["connector"]
    bootstrap = raw["bootstrap_servers"]
    if options.get("kind", "source") == "source":
        from gridstream.connect.source import (  # type: ignore[import-not-found,unused-ignore]
            SourceConnector,
        )

        return SourceConnector(SourceConnectorConfig.model_validate(options),
                               bootstrap_servers=bootstrap)
    from gridstream.connect.sink import (  # type: ignore[import-not-found,unused-ignore]
        SinkConnector,
    )

    return SinkConnector(SinkConnectorConfig.model_validate(options), bootstrap_servers=bootstrap)


def main(argv: list[str]) -> int:
    raw = json.loads(Path(argv[0]).read_text())
    connector = build(raw)

    def spark_factory() -> Any:
        spark = get_spark(app_name=f"connector-{connector.name}")
        print("spark ready", flush=True)
        return spark

    return PipelineRunner([connector], spark_factory, poll_s=0.2).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
