"""The Hazelcast grid adapter: IMaps as caches, their event journals as change streams."""

from gridstream._optional import require

require("hazelcast", "the Hazelcast grid")  # before the modules that import it

from gridstream.grid.hazelcast.adapter import HazelcastAdapter, HazelcastGridConfig  # noqa: E402

__all__ = ["HazelcastAdapter", "HazelcastGridConfig"]
