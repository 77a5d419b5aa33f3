"""Oracles for the reliability scenarios: RELIABILITY.md's invariants as functions.

The operator launcher, the ``get``/``condition`` readers and the audit-log parser are the ones
``e2e/operator_helpers.py`` defines (imported, not copied). What is added here is what every fault
scenario checks afterwards:

* **C** converged: every Playground has its three children and a status for its current generation;
* **U** unique: exactly one child per (Playground, role), nothing else in the namespace;
* **O** no orphans: every child's controller ownerRef names a live owner UID;
* **L** no lost write: the children carry the last spec the user wrote;
* **Q** quiet: no operator writes in a window after convergence;
* **H** healthy: the process the test started is still the one running, ``/healthz`` is ok, no traceback;
* **S** secret-clean: a canary string appears nowhere the operator writes or serves.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operator_helpers import (
    Operator,
    audit_writes,
    condition,
    get,
    model,
    playground,
    running_operator,
    wait_until,
)

from llmaz_devkit.cluster import ControlPlane

__all__ = [
    "ACCOUNT",
    "OUTLASTING_LEASE",
    "Figures",
    "Operator",
    "audit_writes",
    "check_healthy",
    "check_unique_and_owned",
    "converged",
    "get",
    "leading_operator",
    "model",
    "playground",
    "rss_mib",
    "running_operator",
    "wait_converged",
    "wait_until",
]

ACCOUNT = "llmaz-operator-reliability"
LEAD_TIMEOUT = 150.0
"""Process start to leading. Usually 5-30 s; 60 s was seen on 2 CPUs at load 17 (interpreter start,
imports, then the Lease expiry of a killed predecessor)."""


@contextlib.contextmanager
def leading_operator(
    cp: ControlPlane,
    workdir: Path,
    *,
    prefix: tuple[str, ...] = (),
    env_extra: dict[str, str] | None = None,
    lease: dict[str, int] | None = None,
    extra_config: dict[str, Any] | None = None,
    kubeconfig: Path | None = None,
) -> Iterator[Operator]:
    """An operator process that holds the Lease. On exit it gets SIGTERM, so it hands the Lease over
    and the next operator (another scenario, or ``e2e/test_operator.py``'s) need not wait it out."""
    with running_operator(
        cp,
        workdir,
        ACCOUNT,
        extra_config,
        kubeconfig,
        prefix=prefix,
        env_extra=env_extra,
        lease=lease,
    ) as op:
        try:
            wait_until(op.ready, "the operator to lead", LEAD_TIMEOUT, op.log)
            yield op
        finally:
            if op.proc.poll() is None:
                op.stop(signal.SIGTERM, timeout=40)


OUTLASTING_LEASE = {"leaseDurationSeconds": 40, "renewDeadlineSeconds": 30, "retryPeriodSeconds": 2}
"""Lease timings longer than an API-server outage of the scenarios: a leader that cannot renew for
``renewDeadlineSeconds`` exits with status 1 by design (the pod restarts), so "stays up" needs this."""

SETTLED = {"Available", "Pending"}
"""Reasons a Playground settles on when its children exist (``Pending``: KWOK pods not yet Ready)."""


def _items(cp: ControlPlane, kind: str, namespace: str) -> list[dict[str, Any]]:
    return list((get(cp, kind, namespace) or {}).get("items", []))


def convergence_gap(cp: ControlPlane, namespace: str, names: set[str]) -> str:
    """What keeps C from holding ("" once it holds): each Playground in ``names`` reports a settled
    reason for its current generation and all three children (inference Service, LWS, ``-lb``
    Service) exist; no other Playground is left. (A Playground's status can settle before its
    ``-lb`` Service exists; checking only the first two let U fail right after "convergence".)"""
    pls = {p["metadata"]["name"]: p for p in _items(cp, "playgrounds", namespace)}
    if set(pls) != names:
        return f"Playgrounds {sorted(pls)} != {sorted(names)}"
    isvcs = {i["metadata"]["name"] for i in _items(cp, "services.inference.llmaz.io", namespace)}
    lws = {item["metadata"]["name"] for item in _items(cp, "leaderworkersets", namespace)}
    lbs = {s["metadata"]["name"] for s in _items(cp, "services", namespace)}
    for name, pl in sorted(pls.items()):
        avail = condition(pl, "Available")
        if avail.get("reason") not in SETTLED:
            return f"{name}: Available={avail}"
        if avail.get("observedGeneration") != pl["metadata"]["generation"]:
            seen, generation = avail.get("observedGeneration"), pl["metadata"]["generation"]
            return f"{name}: observedGeneration {seen} != generation {generation}"
        if name not in isvcs or name not in lws or f"{name}-lb" not in lbs:
            has_lb = f"{name}-lb" in lbs
            present = f"inference Service {name in isvcs}, LWS {name in lws}, -lb Service {has_lb}"
            return f"{name}: children present: {present}"
    return ""


def converged(cp: ControlPlane, namespace: str, names: set[str]) -> bool:
    """C holds (see :func:`convergence_gap`)."""
    return not convergence_gap(cp, namespace, names)


def wait_converged(cp: ControlPlane, namespace: str, names: set[str], op: Operator, timeout: float) -> None:
    """Wait for C; on timeout the failure names what was still missing."""
    gap = ["not checked"]

    def check() -> bool:
        gap[0] = convergence_gap(cp, namespace, names)
        return not gap[0]

    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            tail = "\n".join(op.log.read_text().splitlines()[-30:])
            raise AssertionError(f"not converged after {timeout:.0f}s: {gap[0]}\noperator log:\n{tail}")
        time.sleep(0.5)


def check_unique_and_owned(cp: ControlPlane, namespace: str, names: set[str]) -> None:
    """U and O: exactly the expected children, each with one controller ownerRef to a live UID."""
    pls = {p["metadata"]["name"]: p["metadata"]["uid"] for p in _items(cp, "playgrounds", namespace)}
    isvcs = _items(cp, "services.inference.llmaz.io", namespace)
    lws = _items(cp, "leaderworkersets", namespace)
    lbs = [s for s in _items(cp, "services", namespace) if s["metadata"]["name"].endswith("-lb")]
    assert sorted(i["metadata"]["name"] for i in isvcs) == sorted(names), "inference Services"
    assert sorted(item["metadata"]["name"] for item in lws) == sorted(names), "LeaderWorkerSets"
    assert sorted(s["metadata"]["name"] for s in lbs) == sorted(f"{n}-lb" for n in names), "-lb Services"
    isvc_uids = {i["metadata"]["name"]: i["metadata"]["uid"] for i in isvcs}
    for child, owners in [(i, pls) for i in isvcs] + [(c, isvc_uids) for c in lws + lbs]:
        refs = [r for r in child["metadata"].get("ownerReferences", []) if r.get("controller")]
        assert len(refs) == 1, f"{child['metadata']['name']}: controller refs {refs}"
        owner = child["metadata"]["name"].removesuffix("-lb")
        assert refs[0]["uid"] == owners.get(owner), f"{child['metadata']['name']} is orphaned: {refs[0]}"


def check_healthy(op: Operator, injected_error: str = "") -> None:
    """H: still running, ``/healthz`` ok (within a liveness probe's patience: on 2 shared CPUs one 2 s
    request can time out while the loop works through a resync), no traceback in the log except one
    per ``injected_error`` (the exception type an injected fault causes, e.g. kopf logging a handler
    retry when the API server is down)."""
    assert op.proc.poll() is None, f"the operator exited: {op.proc.returncode}\n{op.log.read_text()[-3000:]}"
    wait_until(lambda: op.http(op.health_port, "/healthz") == (200, "ok\n"), "/healthz ok", 15, op.log)
    text = op.log.read_text()
    chained = text.count("The above exception was the direct cause") + text.count(
        "During handling of the above"
    )
    tracebacks = text.count("Traceback (most recent call last)") - chained  # one per logged error
    injected = (
        sum(1 for line in text.splitlines() if line.startswith(f"{injected_error}:")) if injected_error else 0
    )
    assert tracebacks <= injected, text[-4000:]


def rss_mib(op: Operator) -> float:
    """Resident memory of the operator process (``VmRSS`` from ``/proc``), MiB."""
    for line in Path(f"/proc/{op.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS line")


def lws_arg(cp: ControlPlane, namespace: str, name: str) -> list[str]:
    """The leader/worker container args the LWS carries (to see which spec was rendered)."""
    lws = get(cp, f"leaderworkerset/{name}", namespace) or {}
    spec = lws.get("spec", {}).get("leaderWorkerTemplate", {}).get("workerTemplate", {}).get("spec", {})
    containers = spec.get("containers") or [{}]
    return list(containers[0].get("args") or [])


def operator_audit_bodies(cp: ControlPlane, user: str) -> str:
    """Every audit entry made by ``user``, as text (bodies too, if the policy ever logs them)."""
    with cp.audit_log.open() as log:
        return "\n".join(line for line in log if (json.loads(line).get("user") or {}).get("username") == user)


@dataclass
class Figures:
    """Measured figures a scenario reports (printed; collected into docs/development/reliability.md)."""

    scenario: str
    values: dict[str, str] = field(default_factory=dict)

    def add(self, key: str, value: float | int | str, unit: str = "") -> None:
        self.values[key] = f"{value:.1f}{unit}" if isinstance(value, float) else f"{value}{unit}"

    def report(self) -> None:
        print(f"\nRELIABILITY {self.scenario}: " + ", ".join(f"{k}={v}" for k, v in self.values.items()))


def elapsed(start: float) -> float:
    return time.monotonic() - start
