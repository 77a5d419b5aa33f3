"""Helm against the harness's API server: thin adapters of :mod:`llmaz_devkit.release` to ControlPlane.

Also for the lead's operator e2e: :func:`release_kubeconfig` gives the kubeconfig of an installed
release's ServiceAccount (a TokenRequest token), so the operator can run locally with exactly the
RBAC the chart ships.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from llmaz_devkit import release
from llmaz_devkit.chartgen import assemble
from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.release import AuditSummary, release_fullname

__all__ = ["CHART_SOURCE", "AuditSummary", "Helm", "assembled_chart", "audit_summary", "release_kubeconfig"]

ROOT = Path(__file__).resolve().parents[1]
CHART_SOURCE = ROOT / "charts" / "llmaz"


class Helm(release.Helm):
    """``helm`` built from its Go module, with private config/cache dirs and the admin kubeconfig."""

    def __init__(self, cp: ControlPlane, home: Path) -> None:
        super().__init__(cp.binary("helm"), cp.admin_kubeconfig, home)
        self.cp = cp

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        try:
            return super().__call__(*args, check=check, timeout=timeout)
        except RuntimeError as err:
            raise AssertionError(str(err)) from None


def assembled_chart(cp: ControlPlane, dest: Path) -> Path:
    """The chart with LWS and Envoy Gateway from the Go module cache, stand-ins for the rest."""
    return assemble(dest, cp.tools_root.parent / "gomod", source=CHART_SOURCE)


def release_kubeconfig(
    cp: ControlPlane, namespace: str, release: str, *, fullname: str | None = None
) -> Path:
    """Kubeconfig of the operator ServiceAccount of release ``release`` in ``namespace``.

    The ServiceAccount is named after the release's fullname (``<release>-llmaz``, or the release
    name alone when it contains ``llmaz``), unless ``operator.serviceAccount.name`` was set: pass
    that as ``fullname``.
    """
    return cp.service_account_kubeconfig(namespace, fullname or release_fullname(release), create=False)


def audit_summary(cp: ControlPlane, username: str) -> AuditSummary:
    """Summarise the control plane's audit log for ``username`` (see :mod:`llmaz_devkit.release`).

    For the operator e2e: run the operator with :func:`release_kubeconfig`, then assert
    ``summary.forbidden == []`` and ``summary.unused_grants(RULES) == set()``.
    """
    return release.audit_summary(cp.audit_log, username)
