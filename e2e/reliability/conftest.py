"""Reliability scenarios (issue 16, docs/development/reliability.md).

Every test here is marked ``reliability``. The fast subset runs in the default e2e run; tests also
marked ``slow`` are deselected unless ``LLMAZ_RELIABILITY=all`` (what ``nox -s reliability`` sets).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from operator_helpers import install_crds

from llmaz_devkit.cluster import ControlPlane

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def crds(control_plane: ControlPlane) -> None:
    install_crds(control_plane)


FULL_SET_ENV = "LLMAZ_RELIABILITY"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    full = os.environ.get(FULL_SET_ENV) == "all"
    keep, drop = [], []
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.reliability)
            if not full and item.get_closest_marker("slow"):
                drop.append(item)
                continue
        keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
