"""The one base of every configuration model, and how an option states its importance.

Each option is declared once, on its field: its name and aliases (the seed names a
properties file uses), its type and bounds, its default, its meaning (the field's
docstring: ``use_attribute_docstrings``) and, where it is not ``medium``, its importance
(``importance("high")`` in ``json_schema_extra``). ``gridstream.options_doc`` renders the
docs tables from exactly that, and a unit test keeps the docs equal to it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.config import JsonDict

__all__ = ["Importance", "StrictModel", "comma_separated", "importance"]

Importance = Literal["high", "medium", "low"]
"""As Kafka's ``ConfigDef`` has it: ``high`` must be looked at in every deployment,
``low`` is tuning few ever change."""


class StrictModel(BaseModel):
    """Immutable, unknown keys refused, known by name or alias, and no input value in
    an error (a secret must never reach one)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="forbid",
                              hide_input_in_errors=True, use_attribute_docstrings=True)


def importance(level: Importance) -> JsonDict:
    """``Field(json_schema_extra=importance("high"))``: the option's importance."""
    return {"importance": level}


def comma_separated(value: Any) -> Any:
    """A list option given as text (``"a, b"``, as a ``.properties`` file or an
    environment variable has it) as a tuple of its non-empty parts; anything else as it
    is (the field's type checks it)."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value
