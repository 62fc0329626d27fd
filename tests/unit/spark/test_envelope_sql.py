"""The envelope checks' SQL text (their results are checked in the JVM by the integration
test ``test_envelope_checks_in_the_jvm``)."""

from __future__ import annotations

from gridstream.spark.envelope import _CHECKS, _error, _sql_string


def test_sql_string_escapes_quotes_and_backslashes() -> None:
    assert _sql_string("plain") == "'plain'"
    assert _sql_string("field 'op'") == "'field \\'op\\''"
    assert _sql_string("a\\b") == "'a\\\\b'"


def test_error_names_the_first_failing_check_in_order() -> None:
    text = _error(has_headers=False)
    assert text.startswith("CASE WHEN _no_value THEN ") and text.endswith(" END")
    positions = [text.index(_sql_string(reason)) for _, reason in _CHECKS]
    assert positions == sorted(positions)
    assert "codec" not in text


def test_error_checks_the_codec_header_first_when_there_are_headers() -> None:
    text = _error(has_headers=True)
    codec = text.index("record codec is not json")
    assert codec < text.index("record has no value")
    assert "'gs.codec'" in text
