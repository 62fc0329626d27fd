"""A Spark driver running one source connector, as a process of its own (the source
connector's kill tests SIGKILL it). Prints ``batch N: R records`` after each micro-batch.

Usage: python -m tests.integration.support.source_child CONFIG.json BOOTSTRAP
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.source import SourceConnector
from gridstream.spark import get_spark


def main(argv: list[str]) -> int:
    config = SourceConnectorConfig.model_validate_json(Path(argv[0]).read_text())
    connector = SourceConnector(config, bootstrap_servers=argv[1],
                                allowed_modules=["tests.integration.support.source_helpers"])
    spark = get_spark(app_name="source-child")
    query = connector.start(spark)
    print("started", flush=True)
    while query.isActive:
        while connector.reports:
            report = connector.reports.popleft()
            print(f"batch {report.batch_id}: {report.records} records", flush=True)
        time.sleep(0.05)
    print(f"FAILED: {query.exception()}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
