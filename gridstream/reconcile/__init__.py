"""Reconciliation that looks at the data: every place against the grid, value by value.

``canonical`` gives one canonical form of an entity's properties for every place;
``compare`` finds, per place, the missing, extra and different entities and the first
difference (entity, property path, both values); ``readers`` read each place back.
The readers import their clients (Kafka, Cassandra, Spark) only when called.
"""

from __future__ import annotations

from gridstream.reconcile.canonical import (
    CASSANDRA,
    STRICT,
    Canon,
    PlaceRules,
    canonical_entity,
    canonical_value,
    show,
)
from gridstream.reconcile.compare import (
    Comparison,
    Difference,
    Entity,
    Holding,
    Key,
    State,
    compare,
    first_difference,
    state_hash,
)

__all__ = [
    "CASSANDRA",
    "STRICT",
    "Canon",
    "Comparison",
    "Difference",
    "Entity",
    "Holding",
    "Key",
    "PlaceRules",
    "State",
    "canonical_entity",
    "canonical_value",
    "compare",
    "first_difference",
    "show",
    "state_hash",
]
