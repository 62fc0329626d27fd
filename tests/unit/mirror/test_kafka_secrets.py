"""Secret Kafka properties are recognized by name, never printed, and the mirror's
command line reads properties from a file and the environment."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from gridstream.consumer import OperationConsumer
from gridstream.errors import ConfigError, GridstreamError
from gridstream.kafka import KafkaProperties, kafka_error, redact
from gridstream.kafka.config import is_secret
from gridstream.kafka.sources import parse_properties, properties_from_env
from gridstream.mirror import KafkaEndpointConfig, KafkaSyncEndpoint
from gridstream.mirror.cli import build_parser, kafka_properties

SECRET = "s3cr3t-value-never-printed"
SECRET_PROPERTIES = [
    "ssl.key.pem", "sasl.oauthbearer.config", "ssl.keystore.password", "ssl.key.password",
    "sasl.password", "sasl.jaas.config", "ssl.truststore.password",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.extensions",
    "ssl.keystore.pem.private.key", "some.custom.api_token", "ssl_key_pem",
    # the Java client's inline PEM private key (Spark's Kafka source and sink take Java
    # names: kafka.ssl.keystore.key), and HTTP basic-auth user info (user:password)
    "ssl.keystore.key", "kafka.ssl.keystore.key", "basic.auth.user.info",
    "schema.registry.basic.auth.user.info",
]
PUBLIC_PROPERTIES = ["ssl.certificate.pem", "sasl.username", "bootstrap.servers",
                     "ssl.key.location", "sasl.mechanism", "linger.ms", "security.protocol",
                     "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
                     "ssl.keystore.location", "ssl.keystore.type"]


@pytest.mark.parametrize("name", SECRET_PROPERTIES)
def test_secret_properties_never_print(name: str) -> None:
    assert is_secret(name)
    props = {name: SECRET, "sasl.username": "u"}
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(bootstrap_servers="127.0.0.1:1",
                                                     producer_properties=props))
    consumer = OperationConsumer("127.0.0.1:1", topics=["t"], group_id="g",
                                 consumer_properties=props)
    kp = KafkaProperties(props)
    texts = [repr(endpoint), str(endpoint), repr(consumer), repr(kp), str(kp),
             str(redact(props)), str(dict(kp)), str(kp.get_str(name))]
    for text in texts:
        assert SECRET not in text, text
    assert kp.client_config()[name] == SECRET  # still handed to the client


@pytest.mark.parametrize("name", PUBLIC_PROPERTIES)
def test_public_properties_stay_visible(name: str) -> None:
    assert not is_secret(name)
    assert "visible" in repr(KafkaProperties({name: "visible"}))


@pytest.mark.parametrize("name", SECRET_PROPERTIES)
def test_client_errors_quoting_a_secret_are_scrubbed(name: str) -> None:
    err = KafkaError(KafkaError._INVALID_ARG, f"bad value {SECRET} for {name}")
    exc = kafka_error("invalid kafka client configuration", KafkaException(err),
                      {name: SECRET})
    assert SECRET not in str(exc) and name in str(exc)


def test_invalid_secret_config_raises_without_the_value() -> None:
    endpoint = KafkaSyncEndpoint(KafkaEndpointConfig(
        bootstrap_servers="127.0.0.1:1", producer_properties={
            "ssl.key.pem": SECRET, "security.protocol": "ssl"}))
    with pytest.raises(GridstreamError) as raised:
        endpoint._open_producers()
    assert SECRET not in str(raised.value)


def test_properties_file_syntax() -> None:
    props = parse_properties(
        "# comment\n! other comment\n\nsasl.password = p\\=x\nssl.key.pem: -----BEGIN\\n\\\n"
        "  body\nlinger.ms 7\nsasl.jaas.config=org.X required password=\"q\";\n")
    assert props == {"sasl.password": "p=x", "ssl.key.pem": "-----BEGIN\nbody",
                     "linger.ms": "7", "sasl.jaas.config": 'org.X required password="q";'}
    with pytest.raises(ConfigError):
        parse_properties("=value\n")


@pytest.mark.parametrize("escape", ["\\u12", "\\u+123", "\\u_123", "\\u 123", "\\uzzzz"])
def test_a_unicode_escape_takes_exactly_four_hex_digits(escape: str) -> None:
    """As Java's: a short or signed escape is malformed, not a different character."""
    assert parse_properties("a=\\u00e9\\u0041\n") == {"a": "éA"}
    with pytest.raises(ConfigError, match="malformed"):
        parse_properties(f"a={escape}\n")
    with pytest.raises(ConfigError, match="malformed"):
        parse_properties(f"key{escape}=x\n")


def test_a_repeated_name_is_refused_when_unique() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}  # Java's rule: the last wins
    with pytest.raises(ConfigError, match="'a' is given twice \\(first on line 1\\)"):
        parse_properties("a=secret-1\n#\na=secret-2\n", unique=True)


def test_env_properties() -> None:
    env = {"GRIDSTREAM_KAFKA_SASL_PASSWORD": SECRET, "GRIDSTREAM_KAFKA_LINGER_MS": "9",
           "OTHER": "x"}
    assert properties_from_env(env) == {"sasl.password": SECRET, "linger.ms": "9"}


def test_mirror_cli_reads_a_properties_file_and_the_environment(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "kafka.properties"
    path.write_text(f"sasl.password={SECRET}\nlinger.ms=1\ncompression.type=zstd\n")
    args: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m",
                                           "--kafka-properties", str(path),
                                           "-X", "compression.type=gzip"])
    env = {"GRIDSTREAM_KAFKA_LINGER_MS": "3", "GRIDSTREAM_KAFKA_SSL_KEY_PASSWORD": SECRET}
    with caplog.at_level(logging.DEBUG):
        props = kafka_properties(args, env)
    config = props.client_config()
    assert config["sasl.password"] == SECRET and config["ssl.key.password"] == SECRET
    assert (config["linger.ms"], config["compression.type"]) == ("3", "gzip")
    assert SECRET not in repr(props) and SECRET not in caplog.text


def test_mirror_cli_warns_about_secrets_on_the_command_line(
        caplog: pytest.LogCaptureFixture) -> None:
    args: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m",
                                           "-X", f"sasl.password={SECRET}"])
    with caplog.at_level(logging.WARNING):
        kafka_properties(args, {})
    assert "sasl.password" in caplog.text and SECRET not in caplog.text


def test_mirror_cli_unreadable_properties_file(tmp_path: Path) -> None:
    args: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m",
                                           "--kafka-properties", str(tmp_path / "none")])
    with pytest.raises(ConfigError):
        kafka_properties(args, {})


def test_the_stacks_own_kafka_variables_are_not_client_properties() -> None:
    # `gridstream stack` reads these for the broker it runs; as client properties
    # ("port", "heap", ...) librdkafka would refuse to create the mirror's producer
    env = {"GRIDSTREAM_KAFKA_PORT": "19092", "GRIDSTREAM_KAFKA_CONTROLLER_PORT": "19093",
           "GRIDSTREAM_KAFKA_HEAP": "1g", "GRIDSTREAM_KAFKA_JVM_OPTS": "-Xmn64m",
           "GRIDSTREAM_KAFKA_LINGER_MS": "9"}
    assert properties_from_env(env) == {"linger.ms": "9"}


def test_a_malformed_property_on_the_command_line_is_not_quoted() -> None:
    # a mistyped separator would otherwise put the value, a secret here, in the error
    args: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m",
                                           "-X", f"sasl.password:{SECRET}"])
    with pytest.raises(ConfigError, match="KEY=VALUE") as raised:
        kafka_properties(args, {})
    assert SECRET not in str(raised.value)


def test_mirror_cli_takes_the_registry_out_of_the_producer_properties(tmp_path: Path) -> None:
    from gridstream.mirror.cli import endpoint_config
    from gridstream.protocol.avro import AvroCodec, RegistrySchemas

    path = tmp_path / "kafka.properties"
    path.write_text(f"basic.auth.user.info=user:{SECRET}\nlinger.ms=1\n"
                    "schema.registry.url=http://127.0.0.1:1/apis/ccompat/v7\n")
    args: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m", "--codec", "avro",
                                           "--kafka-properties", str(path),
                                           "--subject-strategy", "topic"])
    config = endpoint_config(args, kafka_properties(args, {}))
    endpoint = KafkaSyncEndpoint(config)
    codec = endpoint.encoder.codec
    assert isinstance(codec, AvroCodec) and isinstance(codec.registry, RegistrySchemas)
    assert codec.subject_strategy == "topic"
    assert endpoint._props.client_config()["linger.ms"] == "1"
    assert not {"schema.registry.url", "basic.auth.user.info"} & set(
        endpoint._props.client_config())
    for text in (repr(codec), repr(config), str(config), repr(endpoint)):
        assert SECRET not in text
    json_args: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m",
                                                "--kafka-properties", str(path)])
    with pytest.raises(ConfigError, match="only used with codec 'avro'") as raised:
        endpoint_config(json_args, kafka_properties(json_args, {}))
    assert SECRET not in str(raised.value)
    local: Any = build_parser().parse_args(["--data-dir", "d", "--name", "m", "--codec", "avro"])
    codec = KafkaSyncEndpoint(endpoint_config(local, kafka_properties(local, {}))).encoder.codec
    assert isinstance(codec, AvroCodec) and not isinstance(codec.registry, RegistrySchemas)
