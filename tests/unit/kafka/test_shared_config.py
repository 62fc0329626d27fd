"""The one rule for which producer properties a consumer or an admin client takes."""

from __future__ import annotations

from gridstream.kafka.config import shared_config


def test_connection_and_security_are_shared_and_producer_settings_are_not() -> None:
    producer = {
        "bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN", "sasl.password": "s3cret", "ssl.ca.location": "/ca.pem",
        "client.id": "gs", "socket.timeout.ms": 5000, "log_level": 3,
        "transaction.timeout.ms": 60000, "acks": "all", "enable.idempotence": True,
        "compression.type": "lz4", "linger.ms": 5, "partitioner": "murmur2_random",
        "transactional.id": "t-1", "retries": 3,
    }
    assert shared_config(producer) == {
        "bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN", "sasl.password": "s3cret", "ssl.ca.location": "/ca.pem",
        "client.id": "gs", "socket.timeout.ms": 5000, "log_level": 3,
    }
