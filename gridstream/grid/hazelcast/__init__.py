"""The Hazelcast grid adapter: IMaps as caches, their event journals as change streams."""

from gridstream.grid.hazelcast.adapter import HazelcastAdapter, HazelcastGridConfig

__all__ = ["HazelcastAdapter", "HazelcastGridConfig"]
