"""How one Kafka record is named in errors, dead letters, logs and ``skipRecords``:
``topic[partition]@offset``."""

from __future__ import annotations

import re

__all__ = ["KafkaPosition", "kafka_where", "parse_kafka_where"]

KafkaPosition = tuple[str, int, int]
"""(topic, partition, offset) of one Kafka record."""
_WHERE = re.compile(r"(?P<topic>[A-Za-z0-9._-]+)\[(?P<partition>[0-9]+)\]@(?P<offset>[0-9]+)")


def kafka_where(topic: str, partition: int, offset: int) -> str:
    """``topic[partition]@offset``: how a Kafka record is named in errors, dead letters,
    logs and ``skipRecords``."""
    return f"{topic}[{partition}]@{offset}"


def parse_kafka_where(text: str) -> KafkaPosition:
    """``kafka_where``'s text back; ``ValueError`` for anything else."""
    found = _WHERE.fullmatch(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not a record position: write topic[partition]@offset, "
                         "as a failure names it (e.g. 'orders[0]@250')")
    return found["topic"], int(found["partition"]), int(found["offset"])
