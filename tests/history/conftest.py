"""History-bundle fixtures: the store's project and per-engine databases."""

from __future__ import annotations

from tests.store.conftest import MINIMAL_CONFIG, engine_name, project, store_url

__all__ = ["MINIMAL_CONFIG", "engine_name", "project", "store_url"]
