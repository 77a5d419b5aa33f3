"""The ``llmaz`` chart installed with real helm, and the operator run locally as its ServiceAccount.

Shared by ``llmaz demo`` and the e2e suites: a cluster here has no container runtime, so the chart's
operator Deployment is installed with zero replicas and the operator runs as a local process that
authenticates with a TokenRequest token of the release's ServiceAccount. Everything it does is then
checked against exactly the RBAC the chart ships (:func:`audit_summary` reads the audit log).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmaz.operator.rbac import Rule
from llmaz_devkit.chartgen import CHART_DIR, assemble
from llmaz_devkit.cluster import Kubectl

__all__ = [
    "AuditSummary",
    "Helm",
    "audit_summary",
    "release_config",
    "release_fullname",
    "release_service_account_kubeconfig",
]

CHART_NAME = "llmaz"


@dataclass
class Helm:
    """One ``helm`` binary with private config/cache dirs, against one kubeconfig."""

    binary: Path
    kubeconfig: Path
    home: Path

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        res = subprocess.run(
            [str(self.binary), *args], check=False, capture_output=True, text=True, env=env, timeout=timeout
        )
        if check and res.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
        return res

    def assembled_chart(self, root: Path, dest: Path, gomodcache: Path | None) -> Path:
        """The chart of checkout ``root`` copied to ``dest`` with its dependencies (offline)."""
        return assemble(dest, gomodcache, source=root / CHART_DIR)


def release_fullname(release: str) -> str:
    """The chart's fullname for ``release`` (no ``fullnameOverride``): also its ServiceAccount name."""
    return release if CHART_NAME in release else f"{release}-{CHART_NAME}"


def release_service_account_kubeconfig(
    kubectl: Kubectl, namespace: str, name: str, out: Path, *, duration: str = "2h"
) -> Path:
    """A kubeconfig for the cluster of ``kubectl`` that authenticates as ServiceAccount ``name``.

    The ServiceAccount must exist (the chart made it); the token comes from the TokenRequest API, so
    the holder has exactly the RBAC bound to that ServiceAccount.
    """
    token = kubectl("create", "token", name, "-n", namespace, f"--duration={duration}").stdout.strip()
    admin = json.loads(kubectl("config", "view", "--minify", "--raw", "-o", "json").stdout)
    cluster = admin["clusters"][0]
    user = f"{namespace}-{name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user}}],
        "current-context": user,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    return out


def release_config(kubectl: Kubectl, namespace: str, release: str, out: Path) -> Path:
    """The operator config the chart wrote (its ConfigMap's ``config.yaml``), saved to ``out``."""
    data = json.loads(
        kubectl(
            "get", "configmap", f"{release_fullname(release)}-config", "-n", namespace, "-o", "json"
        ).stdout
    )["data"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(data["config.yaml"])
    return out


@dataclass
class AuditSummary:
    """What one user did, from the API server's audit log (Metadata level, ResponseComplete stage)."""

    forbidden: list[str]
    """``verb group/resource[/subresource]`` of every request RBAC refused (403 without an ``allow``
    authorization decision; admission refusals such as writes into a terminating namespace are
    authorized and not counted)."""
    used: set[tuple[str, str, str]]
    """``(apiGroup, resource[/subresource], verb)`` of every request RBAC allowed, whatever its
    outcome (a ``get`` answered 404 still needed its grant)."""

    def unused_grants(self, rules: Iterable[Rule]) -> set[tuple[str, str, str]]:
        """Granted ``(apiGroup, resource, verb)`` triples that no allowed request used."""
        granted = {
            (g, r, v) for rule in rules for g in rule.api_groups for r in rule.resources for v in rule.verbs
        }
        return granted - self.used


def audit_lines(audit_log: Path, *, since_line: int = 0) -> list[str]:
    """The audit log's lines from ``since_line`` on, complete ones only: the API server may be
    halfway through writing the last one (a reader in the reliability suite hit one)."""
    text = audit_log.read_text()
    return text[: text.rfind("\n") + 1].splitlines()[since_line:]


def audit_events(audit_log: Path, *, since_line: int = 0) -> list[dict[str, Any]]:
    """The audit log's entries (decoded :func:`audit_lines`)."""
    return [json.loads(line) for line in audit_lines(audit_log, since_line=since_line)]


def audit_summary(audit_log: Path, username: str, *, since_line: int = 0) -> AuditSummary:
    """Summarise the audit log for ``username`` (e.g. ``system:serviceaccount:<ns>:<sa>``)."""
    forbidden: list[str] = []
    used: set[tuple[str, str, str]] = set()
    for event in audit_events(audit_log, since_line=since_line):
        if event.get("user", {}).get("username") != username:
            continue
        # A watch is logged as ResponseStarted when it opens and ResponseComplete only when it ends.
        stage = "ResponseStarted" if event.get("verb") == "watch" else "ResponseComplete"
        if event.get("stage") != stage:
            continue
        ref = event.get("objectRef") or {}
        if "resource" not in ref:
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        group, verb = ref.get("apiGroup", ""), event["verb"]
        code = event.get("responseStatus", {}).get("code", 0)
        decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
        if code == 403 and decision != "allow":
            forbidden.append(f"{verb} {group}/{resource}")
        elif decision == "allow" or (decision is None and code < 400):
            # An authorized request used its grant whatever came next: a 404 `get`, a 409, or a
            # 403 from admission (e.g. writing into a namespace being deleted).
            used.add((group, resource, verb))
            if verb == "patch" and code == 201:  # a server-side apply that created the object
                used.add((group, resource, "create"))
    return AuditSummary(forbidden, used)
