"""Namespace deletion with objects in every state, and at operator start, on the real control plane.

The real namespace controller (kube-controller-manager) deletes everything in the namespace while
the operator holds watches, timers (flavor fallback) and retries for those objects. Afterwards the
namespace must be gone, the operator must make no more requests for it (no error or retry loop:
the audit log, not only the log file), and stay healthy. In the full set (``nox -s reliability``).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import condition
from reliability_helpers import (
    Figures,
    audit_entries,
    check_healthy,
    check_unique_and_owned,
    elapsed,
    get,
    leading_operator,
    model,
    playground,
    rss_mib,
    wait_converged,
    wait_until,
)

from llmaz.render.fallback import ANNOTATION_FALLBACK_SECONDS
from llmaz_devkit.cluster import ControlPlane

pytestmark = pytest.mark.slow

T_GONE = 120.0
"""Bound for the namespace controller to empty and remove a namespace, on 2 shared CPUs."""
QUIET = 15.0
"""Seconds after the namespace is gone in which the operator must send nothing about it."""

NOWHERE = [
    {"name": f"nowhere-{i}", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"nvidia.com/gpu.product": p}}
    for i, p in enumerate(("H200", "B200"))
]
"""Two flavors no node offers: a Playground of this model keeps falling back (timers run)."""


def requests_about(cp: ControlPlane, user: str, since: float, namespace: str) -> list[str]:
    """``verb resource/name code`` of every request ``user`` made in ``namespace`` after ``since``
    (watches and lists of all namespaces are cluster-wide requests and not counted)."""
    out = []
    for entry in audit_entries(cp, user, since):
        ref = entry.get("objectRef") or {}
        if ref.get("namespace") == namespace:
            code = (entry.get("responseStatus") or {}).get("code")
            out.append(f"{entry.get('verb')} {ref.get('resource')}/{ref.get('name')} {code}")
    return out


def create_namespace(cp: ControlPlane, name: str) -> None:
    cp.kubectl("create", "namespace", name)
    wait_until(lambda: get(cp, "sa/default", name) is not None, f"ServiceAccount default in {name}", 60)


def delete_and_wait_gone(cp: ControlPlane, name: str, log: Path) -> float:
    began = time.monotonic()
    cp.kubectl("delete", "namespace", name, "--wait=false")
    wait_until(lambda: get(cp, f"namespace/{name}") is None, f"namespace {name} gone", T_GONE, log)
    return elapsed(began)


def check_forgotten(cp: ControlPlane, user: str, namespace: str, gone_at: float, fig: Figures) -> None:
    """No request about ``namespace`` from a second after it was gone, for :data:`QUIET` seconds."""
    time.sleep(QUIET)
    late = requests_about(cp, user, gone_at + 1, namespace)
    fig.add("requests into the gone namespace", len(late))
    assert late == [], late


def test_namespace_with_objects_in_every_state_is_deleted_and_forgotten(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    cp, fig = control_plane, Figures("namespace-deletion")
    doomed = f"{namespace}-doomed"[:60]
    create_namespace(cp, doomed)
    fallback = playground("falling", doomed, "qwen-rel-nowhere")
    fallback["metadata"]["annotations"] = {ANNOTATION_FALLBACK_SECONDS: "2"}
    cp.apply(
        [
            model("qwen-rel-ns"),
            model("qwen-rel-nowhere", NOWHERE),
            playground("serving", doomed, "qwen-rel-ns"),
            playground("waiting", doomed, "qwen-rel-missing"),  # no such model
            fallback,
        ]
    )
    extra = {"flavorFallback": {"unschedulableSeconds": 120, "retryAllSeconds": 10}}
    with leading_operator(cp, tmp_path, extra_config=extra) as op:
        states: dict[str, Any] = {}

        def every_state() -> bool:
            for name in ("serving", "waiting", "falling"):
                states[name] = condition(get(cp, f"pl/{name}", doomed), "Available").get("reason")
            flavor = ((get(cp, "pl/falling", doomed) or {}).get("status") or {}).get("flavor") or {}
            return (
                states["serving"] in {"Available", "Pending"}
                and states["waiting"] not in {None, "Available", "Pending"}
                and bool(flavor.get("tried"))
            )

        wait_until(every_state, "serving, waiting for its model, and falling back", 120, op.log)
        cp.apply([playground("new", doomed, "qwen-rel-ns")])  # created, not yet reconciled
        fig.add("states at deletion", ", ".join(f"{k}={v}" for k, v in sorted(states.items())))
        took = delete_and_wait_gone(cp, doomed, op.log)
        gone_at = time.time()
        fig.add("namespace gone after", took, " s")
        check_forgotten(cp, op.user, doomed, gone_at, fig)
        # the operator still serves the other namespaces
        cp.apply([playground("after", namespace, "qwen-rel-ns")])
        wait_converged(cp, namespace, {"after"}, op, 120)
        check_unique_and_owned(cp, namespace, {"after"})
        check_healthy(op)
        fig.add("RSS", rss_mib(op), " MiB")
    fig.report()


def test_namespace_deleted_right_at_operator_start_is_forgotten_and_others_converge(
    control_plane: ControlPlane, crds: None, namespace: str, tmp_path: Path
) -> None:
    """The operator is down; a namespace of 10 converged Playgrounds is deleted; the operator starts
    at once, so it lists objects that are being deleted under it."""
    cp, fig = control_plane, Figures("namespace-deleted-at-start")
    doomed = f"{namespace}-doomed"[:60]
    create_namespace(cp, doomed)
    names = {f"d{i}" for i in range(10)}
    cp.apply([model("qwen-rel-ns")] + [playground(n, doomed, "qwen-rel-ns") for n in sorted(names)])
    with leading_operator(cp, tmp_path / "first") as op:
        wait_converged(cp, doomed, names, op, 120)
        assert op.stop(signal.SIGTERM, timeout=40) == 0
    cp.kubectl("delete", "namespace", doomed, "--wait=false")
    began = time.monotonic()
    cp.apply([playground("other", namespace, "qwen-rel-ns")])
    with leading_operator(cp, tmp_path / "second") as op:
        wait_until(lambda: get(cp, f"namespace/{doomed}") is None, f"namespace {doomed} gone", T_GONE, op.log)
        gone_at = time.time()
        fig.add("namespace gone after", elapsed(began), " s")
        wait_converged(cp, namespace, {"other"}, op, 120)
        fig.add("other namespace converged after start", elapsed(began), " s")
        check_forgotten(cp, op.user, doomed, gone_at, fig)
        check_unique_and_owned(cp, namespace, {"other"})
        check_healthy(op)
    fig.report()
