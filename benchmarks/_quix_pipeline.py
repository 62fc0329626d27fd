"""The map pipeline in Quix Streams (run in Quix's own virtualenv; it imports nothing of
gridstream): Kafka topic → uppercase the string value → Kafka topic, the key unchanged.

Usage: <quix-venv>/bin/python benchmarks/_quix_pipeline.py SOURCE TARGET RECORDS
       (at-least-once | exactly-once)
Stops once it has produced RECORDS outputs (or after 60 s without input); prints one
JSON line: the seconds to build the application (``setup_s``) and to run it
(``run_s``), split into ``startup_s`` (up to the first record) and ``drain_s`` (from the
first record to the end of the run: the last commit included).
"""

from __future__ import annotations

import json
import sys
import time
import uuid


def main(argv: list[str]) -> int:
    source, target, records, guarantee = argv[0], argv[1], int(argv[2]), argv[3]
    started = time.perf_counter()
    from quixstreams import Application  # type: ignore[import-not-found]  # Quix's venv

    app = Application(broker_address="127.0.0.1:9092",
                      consumer_group=f"bench-quix-{uuid.uuid4().hex[:8]}",
                      auto_offset_reset="earliest", processing_guarantee=guarantee,
                      auto_create_topics=False, use_changelog_topics=False,
                      loglevel="WARNING")
    inp = app.topic(source, key_deserializer="bytes", value_deserializer="str")
    out = app.topic(target, key_serializer="bytes", value_serializer="str")
    first: list[float] = []

    def upper(value: str) -> str:
        if not first:
            first.append(time.perf_counter())
        return value.upper()

    sdf = app.dataframe(inp)
    sdf = sdf.apply(upper)
    sdf.to_topic(out)
    built = time.perf_counter()
    app.run(count=records, timeout=60.0, collect=False)
    done = time.perf_counter()
    if not first:
        raise SystemExit("no record read")
    print(json.dumps({"side": f"quix-{guarantee}", "setup_s": built - started,
                      "run_s": done - built, "startup_s": first[0] - built,
                      "drain_s": done - first[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
