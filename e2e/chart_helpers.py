"""Helm against the harness's API server: a runner and the chart assembled with its dependencies.

Also for the lead's operator e2e: :func:`release_kubeconfig` gives the kubeconfig of an installed
release's ServiceAccount (a TokenRequest token), so the operator can run locally with exactly the
RBAC the chart ships.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from llmaz.operator.rbac import Rule
from llmaz_devkit.chartgen import assemble
from llmaz_devkit.cluster import ControlPlane

ROOT = Path(__file__).resolve().parents[1]
CHART_SOURCE = ROOT / "charts" / "llmaz"


@dataclass
class Helm:
    """``helm`` built from its Go module, with private config/cache dirs and the admin kubeconfig."""

    cp: ControlPlane
    home: Path

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cp.admin_kubeconfig),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        res = subprocess.run(
            [str(self.cp.binary("helm")), *args],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        if check and res.returncode != 0:
            raise AssertionError(
                f"helm {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}"
            )
        return res


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
    name = fullname or (release if "llmaz" in release else f"{release}-llmaz")
    return cp.service_account_kubeconfig(namespace, name, create=False)


@dataclass
class AuditSummary:
    """What one user did, from the API server's audit log (Metadata level, ResponseComplete stage)."""

    forbidden: list[str]
    """``verb group/resource[/subresource]`` of every request answered 403."""
    used: set[tuple[str, str, str]]
    """``(apiGroup, resource[/subresource], verb)`` of every request that succeeded."""

    def unused_grants(self, rules: Iterable[Rule]) -> set[tuple[str, str, str]]:
        """Granted ``(apiGroup, resource, verb)`` triples that no successful request used."""
        granted = {
            (g, r, v) for rule in rules for g in rule.api_groups for r in rule.resources for v in rule.verbs
        }
        return granted - self.used


def audit_summary(cp: ControlPlane, username: str) -> AuditSummary:
    """Summarise the audit log for ``username`` (e.g. ``system:serviceaccount:<ns>:<sa>``).

    For the operator e2e: run the operator with :func:`release_kubeconfig`, then assert
    ``summary.forbidden == []`` and ``summary.unused_grants(RULES) == set()``.
    """
    forbidden: list[str] = []
    used: set[tuple[str, str, str]] = set()
    for line in cp.audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete" or event.get("user", {}).get("username") != username:
            continue
        ref = event.get("objectRef") or {}
        if "resource" not in ref:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        group, verb = ref.get("apiGroup", ""), event["verb"]
        code = event.get("responseStatus", {}).get("code", 0)
        if code == 403:
            forbidden.append(f"{verb} {group}/{resource}")
        elif code < 400:
            used.add((group, resource, verb))
    return AuditSummary(forbidden, used)
