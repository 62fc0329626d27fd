"""A grid named in a config (``grid = { kind = "space" | "hazelcast", ... }``) and the
adapter that opens it: what connectors, API pipelines and tables on Spark share."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from gridstream._config import StrictModel, comma_separated
from gridstream.grid.contract import GridAdapter
from gridstream.space import Space

__all__ = ["GridSettings", "HazelcastGridSettings", "SpaceGridSettings", "grid_adapter"]


class SpaceGridSettings(StrictModel):
    """``grid = { kind = "space", data_dir = "...", space_name = "..." }``."""

    kind: Literal["space"] = "space"
    data_dir: str = Field(min_length=1)
    space_name: str = Field(min_length=1)
    source: str = "default"
    id_property: str = "id"


class HazelcastGridSettings(StrictModel):
    """``grid = { kind = "hazelcast", members = ["127.0.0.1:5701"], cluster_name = ... }``."""

    kind: Literal["hazelcast"] = "hazelcast"
    cluster_name: str = "gridstream"
    members: tuple[str, ...] = Field(default=("127.0.0.1:5701",), min_length=1)
    """Empty is an error: the client would fall back to its own default address."""
    connect_timeout_s: float = Field(default=30.0, gt=0)
    invocation_timeout_s: float = Field(default=60.0, gt=0)
    source: str = "default"

    @field_validator("members", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        return comma_separated(value)


GridSettings = Annotated[SpaceGridSettings | HazelcastGridSettings, Field(discriminator="kind")]


def grid_adapter(settings: GridSettings, *, writable: bool = False,
                 space: Space | None = None) -> GridAdapter:
    """An unopened adapter for ``settings``. ``writable`` (the Space): the adapter opens
    the Space itself and owns it (a sink applies batches in this process); ``space``: an
    open Space of this process to write through instead."""
    if isinstance(settings, HazelcastGridSettings):
        from gridstream.grid.hazelcast import HazelcastAdapter, HazelcastGridConfig

        return HazelcastAdapter(HazelcastGridConfig(
            cluster_name=settings.cluster_name, members=settings.members,
            connect_timeout_s=settings.connect_timeout_s,
            invocation_timeout_s=settings.invocation_timeout_s, source=settings.source))
    from gridstream.grid.space import SpaceAdapter, SpaceGridConfig

    config = SpaceGridConfig(data_dir=settings.data_dir, space_name=settings.space_name,
                             writable=writable and space is None, source=settings.source,
                             id_property=settings.id_property)
    return SpaceAdapter(config, space=space)
