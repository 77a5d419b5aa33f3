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
* **S** secret-clean: a canary string appears nowhere the operator writes or serves;
* **R** RBAC enough: no request of the operator's ServiceAccount was refused by RBAC (403), checked
  by :func:`leading_operator` for every scenario that ends well.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from operator_helpers import (
    Operator,
    audit_entries,
    audit_writes,
    condition,
    get,
    model,
    playground,
    running_operator,
    wait_until,
)

from llmaz_devkit.cluster import ControlPlane
from llmaz_devkit.release import audit_lines, audit_summary

__all__ = [
    "ACCOUNT",
    "OUTLASTING_LEASE",
    "Figures",
    "KillAfter",
    "Operator",
    "audit_entries",
    "audit_writes",
    "check_bounded_log",
    "check_healthy",
    "check_rbac_enough",
    "check_unique_and_owned",
    "child_writes",
    "converged",
    "converged_with_arg",
    "edited",
    "get",
    "leading_operator",
    "log_lines",
    "model",
    "playground",
    "request_is",
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
    since_line = audit_line_count(cp)
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
            check_rbac_enough(cp, op.user, since_line)
        finally:
            if op.proc.poll() is None:
                op.stop(signal.SIGTERM, timeout=40)


def check_rbac_enough(cp: ControlPlane, user: str, since_line: int = 0) -> None:
    """R: RBAC refused no request of ``user`` (from audit-log line ``since_line`` on) that it does
    not allow at other times. The scenarios' operators run as a ServiceAccount bound to exactly
    ``llmaz.operator.rbac.RULES``, the rules the chart's ClusterRole is generated from, so a fault
    path that needs one more grant fails here. A refusal of a request that RBAC allowed elsewhere in
    the log is the authorizer not ready yet (a restarted API server answers 403 until its RBAC
    cache is filled: seen in the API-server restart scenario), not a missing grant."""
    allowed = audit_summary(cp.audit_log, user).used
    missing = set()
    for refused in audit_summary(cp.audit_log, user, since_line=since_line).forbidden:
        verb, _, target = refused.partition(" ")
        group, _, resource = target.partition("/")
        if (group, resource, verb) not in allowed:
            missing.add(refused)
    assert not missing, f"RBAC refused requests of {user} that it never allows: {sorted(missing)}"


def audit_line_count(cp: ControlPlane) -> int:
    """How many complete entries the audit log holds now (to look only at what comes later)."""
    return len(audit_lines(cp.audit_log))


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


def converged_with_arg(cp: ControlPlane, namespace: str, names: set[str], name: str, arg: str) -> bool:
    """C for ``names`` and L: the LWS of ``name`` carries the user's last argument ``arg``."""
    return converged(cp, namespace, names) and lws_arg(cp, namespace, name)[-1:] == [arg]


def edited(name: str, namespace: str, model_name: str, arg: str) -> dict[str, Any]:
    """Playground ``name`` as a user edits it: its engine gets the extra argument ``arg``."""
    return playground(name, namespace, model_name, backendRuntimeConfig={"args": [arg]})


def log_lines(path: Path) -> int:
    return len(path.read_text().splitlines())


LONGEST_LOG_LINE = 500
"""Characters: a log line longer than this is a dump, not a message. The longest messages seen are
about 420: an API server's 403 text, which names user, verb, resource and namespace, after a path
with the same 50-character test namespace; urllib3's text around a refused connection was 510-620."""


def check_bounded_log(fig: Figures, log: Path, before: int, began: float, per_fault: int = 0) -> None:
    """H's noise bound: at most two log lines per second of fault and recovery (30 at least), or,
    for many short faults, 30 plus two per fault (each broken request is one failure line, and
    its retry may fail once more); and no line longer than :data:`LONGEST_LOG_LINE`."""
    new = log.read_text().splitlines()[before:]
    fig.add("log lines during fault+recovery", len(new))
    bound = 30 + 2 * per_fault if per_fault else max(30, int(elapsed(began)) * 2)
    assert len(new) <= bound, log.read_text()[-3000:]
    longest = max((len(line) for line in new), default=0)
    fig.add("longest log line", longest, " chars")
    assert longest <= LONGEST_LOG_LINE, max(new, key=len)


def child_writes(cp: ControlPlane, user: str, since: float, namespace: str) -> list[str]:
    """Operator writes to children in ``namespace`` (status and Events excluded)."""
    return [
        w
        for w in audit_writes(cp, user, since)
        if f" {namespace}/" in w and "/status" not in w and " events " not in w
        if any(f" {r}" in w for r in ("leaderworkersets ", "services ", "horizontalpodautoscalers "))
    ]


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
    lines = audit_lines(cp.audit_log)
    return "\n".join(line for line in lines if (json.loads(line).get("user") or {}).get("username") == user)


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


class KillAfter:
    """SIGKILL ``op`` right after the API server answered a request of its that ``matches`` (an audit
    entry, stage ``ResponseComplete``): a named fault point without test hooks in the operator. A
    thread tails the audit log (the apiserver's log backend writes each entry before the next
    request is served) from its end at start; ``killed`` is the entry that triggered the kill."""

    def __init__(self, cp: ControlPlane, op: Operator, matches: Callable[[dict[str, Any]], bool]) -> None:
        self.cp, self.op, self.matches = cp, op, matches
        self.killed: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._offset = cp.audit_log.stat().st_size
        self._thread = threading.Thread(target=self._tail, name="kill-after", daemon=True)

    def __enter__(self) -> KillAfter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _tail(self) -> None:
        with self.cp.audit_log.open() as log:
            log.seek(self._offset)
            pending = ""
            while not self._stop.is_set():
                chunk = log.read()
                if not chunk:
                    time.sleep(0.01)
                    continue
                pending += chunk
                *lines, pending = pending.split("\n")
                for line in lines:
                    entry = json.loads(line)
                    if entry.get("stage") != "ResponseComplete":
                        continue
                    if (entry.get("user") or {}).get("username") != self.op.user or not self.matches(entry):
                        continue
                    self.op.proc.send_signal(signal.SIGKILL)
                    self.killed = entry
                    return

    def wait(self, timeout: float) -> dict[str, Any]:
        """Wait for the kill; the entry that triggered it."""
        self._thread.join(timeout=timeout)
        if self.killed is None:
            raise AssertionError(
                f"the fault point was not reached in {timeout:.0f}s\n{self.op.log.read_text()[-3000:]}"
            )
        self.op.proc.wait(timeout=10)
        return self.killed


Matcher = Callable[[dict[str, Any]], bool]
"""A predicate on one audit entry."""


def request_is(verb: str, group: str, resource: str, name: str, subresource: str = "") -> Matcher:
    """An audit-entry predicate: ``verb`` on ``group``'s ``resource[/subresource]`` named ``name``
    (``group`` "" is the core group), answered 2xx."""

    def matches(entry: dict[str, Any]) -> bool:
        ref = entry.get("objectRef") or {}
        code = (entry.get("responseStatus") or {}).get("code", 0)
        return (
            entry.get("verb") == verb
            and ref.get("apiGroup", "") == group
            and ref.get("resource") == resource
            and ref.get("name") == name
            and (ref.get("subresource") or "") == subresource
            and 200 <= code < 300
        )

    return matches
