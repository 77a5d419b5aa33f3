"""Fixtures of the render tests (helpers and test doubles are in render_helpers.py)."""

from __future__ import annotations

import pytest

from llmaz.plugins.manager import PluginManager


@pytest.fixture(scope="session")
def plugins() -> PluginManager:
    """The installed plugins (every first-party backend and autoscaler of the workspace)."""
    manager = PluginManager.from_environment({})
    if manager.errors:
        pytest.fail("plugin load errors: " + "; ".join(map(str, manager.errors)))
    return manager
