"""Helm against the harness's API server: thin adapters of :mod:`llmaz_devkit.release` to ControlPlane.

Also for the lead's operator e2e: :func:`release_kubeconfig` gives the kubeconfig of an installed
release's ServiceAccount (a TokenRequest token), so the operator can run locally with exactly the
RBAC the chart ships.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from llmaz_devkit import release
from llmaz_devkit.chartgen import assemble
from llmaz_devkit.cluster import ControlPlane, go_tools_root
from llmaz_devkit.release import AuditSummary, release_fullname

__all__ = [
    "CHART_SOURCE",
    "AuditSummary",
    "Helm",
    "assembled_chart",
    "audit_summary",
    "helm_template",
    "release_kubeconfig",
]

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


def helm_template(
    chart: Path, home: Path, *, values: Path | None = None, sets: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The llmaz templates' objects as real ``helm template rel <chart> -n ns`` renders them (the
    dependency charts' objects left out), with private helm dirs under ``home``."""
    env = {**os.environ, **{f"HELM_{k}_HOME": str(home / k.lower()) for k in ("CACHE", "CONFIG", "DATA")}}
    args = [str(go_tools_root() / "bin" / "helm"), "template", "rel", str(chart), "-n", "ns"]
    if values is not None:
        args += ["-f", str(values)]
    for item in sets:
        args += ["--set", item]
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    docs: list[dict[str, Any]] = []
    source = ""
    for raw in out.split("\n---\n"):
        for line in raw.splitlines():
            if line.startswith("# Source: "):
                source = line.removeprefix("# Source: ")
        doc = yaml.safe_load(raw)
        if doc and source.startswith("llmaz/templates/"):
            docs.append(doc)
    return docs


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
