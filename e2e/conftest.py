"""e2e: tests against the real control plane built from Go modules (``tools/go-tools.sh``).

Fixtures come from the dev kit's pytest plugin (:mod:`llmaz_devkit.pytest_plugin`, loaded below):
``apiserver`` (tier A) and ``control_plane`` (tier B). Every test under this directory is marked ``e2e``.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmaz_devkit.cluster import ControlPlane

pytest_plugins = ["llmaz_devkit.pytest_plugin"]

HERE = Path(__file__).resolve().parent
_counter = itertools.count()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace with its default ServiceAccount (made by the real controller-manager)."""
    name = f"t{next(_counter)}-{request.node.name.lower().replace('_', '-')}"[:50].rstrip("-")
    control_plane.kubectl("create", "namespace", name)
    control_plane.wait_for(
        lambda: control_plane.kubectl("get", "sa/default", "-n", name, check=False).returncode == 0,
        f"ServiceAccount default in {name}",
        timeout=60,
    )
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def path_without_go(tmp_path: Path) -> Path:
    """A directory to use as the whole PATH: bash and the coreutils ``tools/go-tools.sh`` calls (a
    machine without Go still has those), but no ``go``."""
    only_bash = tmp_path / "bin-without-go"
    only_bash.mkdir()
    for tool in ("bash", "readlink", "dirname", "basename", "cat", "sha256sum", "cut"):
        found = shutil.which(tool)
        assert found, tool
        (only_bash / tool).symlink_to(found)
    return only_bash
