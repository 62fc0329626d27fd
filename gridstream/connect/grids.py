"""Grid adapters from connector config (``grid = { kind = ... }``)."""

from __future__ import annotations

from gridstream.connect.config import GridSettings, HazelcastGridSettings
from gridstream.grid.contract import GridAdapter
from gridstream.space import Space

__all__ = ["grid_adapter"]


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
