"""gridstream: connect an in-memory data grid with Apache Kafka and stores, on Spark."""

from __future__ import annotations

from gridstream.errors import GridstreamError
from gridstream.operations import Bulk, Operation, OpType, PropertySpec, TypeDescriptor

__all__ = [
    "Bulk",
    "GridstreamError",
    "OpType",
    "Operation",
    "PropertySpec",
    "TypeDescriptor",
    "__version__",
]

__version__ = "0.1.0"
