"""The data source's options carry the config, never Kafka secrets; the registry's
credentials go apart, under an option name Spark redacts."""

from __future__ import annotations

import re

from gridstream.connect.config import SourceConnectorConfig
from gridstream.connect.source.datasource import SECRET_OPTION, _config, source_options


def test_options_round_trip_without_kafka_secrets() -> None:
    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "hazelcast"}, "checkpoint": "/tmp/c",
        "kafka": {"sasl.password": "kafka-secret"},
        "converter": {"value": "avro", "schema.registry.url": "http://r:8081",
                      "basic.auth.user.info": "me:registry-secret"},
        "cacheWhitelist": ["a.*"]})
    options = source_options(config, ["my.filters"])
    assert "kafka-secret" not in repr(options)
    assert "registry-secret" not in options["config"]
    assert options[SECRET_OPTION] == "me:registry-secret"
    # Spark's default spark.redaction.regex hides the option wherever it prints it
    assert re.search(r"(?i)secret|password|token|access[.]?key", SECRET_OPTION)
    back, allowed = _config(options)
    assert allowed == ("my.filters",)
    assert back.kafka == {}
    assert back.converter.schema_registry_user_info is not None
    assert back.converter.schema_registry_user_info.get_secret_value() == "me:registry-secret"
    assert back.model_copy(update={"kafka": config.kafka}) == config


def test_options_without_credentials() -> None:
    config = SourceConnectorConfig.model_validate({
        "name": "s", "grid": {"kind": "space", "data_dir": "/d", "space_name": "x"},
        "checkpoint": "/tmp/c"})
    options = source_options(config, [])
    assert SECRET_OPTION not in options
    assert _config(options) == (config, ())
