"""Config: the seed's option names, validation, and a password that never shows."""

from __future__ import annotations

import pytest

from gridstream.errors import ConfigError
from gridstream.stores.cassandra import CassandraConfig, CassandraSyncEndpoint


def test_seed_option_names_are_accepted() -> None:
    config = CassandraConfig.parse(
        {
            "hosts": "10.0.0.1, 10.0.0.2",
            "port": 9142,
            "keyspaceName": "grid",
            "fixedPropertyValueSerializer": "json",
            "dynamicPropertyValueSerializer": "msgpack",
        }
    )
    assert config.contact_points == ("10.0.0.1", "10.0.0.2")
    assert config.keyspace == "grid"
    assert config.fixed_serializer == "json"
    assert config.consistency_level == "LOCAL_QUORUM"


@pytest.mark.parametrize(
    "values",
    [
        {"keyspace": "bad-name"},
        {"keyspace": "k", "consistency_level": "SOMETIMES"},
        {"keyspace": "k", "fixed_serializer": "pickle"},
        {"keyspace": "k", "unknown_option": 1},
        {"keyspace": "k", "password": 12345},
    ],
)
def test_invalid_config_is_a_config_error(values: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        CassandraConfig.parse(values)
    assert "12345" not in str(info.value)


def test_password_never_appears() -> None:
    config = CassandraConfig(keyspace="k", username="app", password="s3cr3t-value")  # type: ignore[arg-type]
    endpoint = CassandraSyncEndpoint(config)
    for text in (repr(config), str(config), repr(endpoint), str(config.model_dump())):
        assert "s3cr3t-value" not in text
    assert config.password is not None and config.password.get_secret_value() == "s3cr3t-value"


def test_endpoint_has_no_position_and_connects_only_in_open() -> None:
    endpoint = CassandraSyncEndpoint(CassandraConfig(keyspace="k", contact_points=("192.0.2.1",)))
    assert endpoint.position() is None
    assert endpoint.counters.operations == 0
