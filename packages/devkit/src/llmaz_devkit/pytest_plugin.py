"""pytest fixtures for the real control plane (see :mod:`llmaz_devkit.cluster`).

* ``apiserver``: session-scoped tier A (etcd + kube-apiserver).
* ``control_plane``: session-scoped tier B (A + KCM + scheduler + KWOK GPU nodes + LWS).

Use it from a ``conftest.py``::

    from llmaz_devkit.pytest_plugin import *  # noqa: F403

When a test that uses one of them fails, the tail of every component log is attached to the report.
Set ``LLMAZ_GO_TOOLS_ROOT`` to use an already built tool set instead of calling ``tools/go-tools.sh``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest

from llmaz_devkit.cluster import ControlPlane

__all__ = ["apiserver", "control_plane", "pytest_runtest_makereport"]


def _boot(factory: pytest.TempPathFactory, tier: str) -> Iterator[ControlPlane]:
    workdir = factory.mktemp(f"control-plane-{tier}")
    cp = ControlPlane(workdir, tier="A" if tier == "A" else "B", keep_workdir=True)
    with cp:
        yield cp


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd + kube-apiserver with audit log, PodSecurity and RBAC; admin via ``.admin_kubeconfig``."""
    yield from _boot(tmp_path_factory, "A")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """The full tier B cluster: fake GPU node pools (a100, l4, cpu) and the LWS controller."""
    yield from _boot(tmp_path_factory, "B")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        funcargs = getattr(item, "funcargs", {})
        for name in ("control_plane", "apiserver"):
            cp = funcargs.get(name)
            if isinstance(cp, ControlPlane):
                report.sections.append((f"{name} component logs", cp.failure_report(lines=25)))
    return report
