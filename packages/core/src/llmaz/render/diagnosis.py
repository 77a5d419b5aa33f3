"""Why a model is not serving: one reason and message from the pods of its LeaderWorkerSet.

Pure: the pods are plain dicts as the API server returns them, ``now`` is an argument, nothing is
read from a cluster or a clock. The operator lists the pods by llmaz's labels, calls
:func:`diagnose` and writes the result into a condition only when reason or message changed; the
message therefore never holds a duration or a restart count, which change on every look.

Precedence (the first that applies wins):

1. ``Available``: at least ``desired`` replicas are ready (a replica is the group of pods of one LWS
   group: the leader and its workers; it is ready when every pod of the group is Ready).
2. ``ModelLoadFailed``: a model-loader init container terminated with an error.
3. ``CrashLoopBackOff``: any other container keeps failing.
4. ``ImagePullBackOff`` then ``ErrImagePull``: an image cannot be pulled.
5. ``Unschedulable``: the scheduler cannot place a pod.
6. ``Loading``: a model loader is downloading weights.
7. ``Starting``: the engine runs but is not Ready yet.
8. ``Pending``: anything else (no pods yet, pods waiting to be scheduled or created); a container
   waiting for an unusual reason, such as ``CreateContainerConfigError`` for a missing Secret, is
   named with the kubelet's message.

Failures a user must fix come before states that resolve by waiting, and among failures the ones
that name a cause (a loader message, a crash) come before the ones that only name a symptom.
``Unschedulable`` comes after them because flavor fallback may resolve it without the user; how
long pods have been unschedulable is reported separately (:attr:`Diagnosis.unschedulable_since`)
whatever the winning reason, as the input of :func:`llmaz.render.fallback.decide_fallback`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from llmaz.api.conventions import MODEL_RUNNER
from llmaz.render.objects import LWS_WORKER_INDEX_LABEL

LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LOADER_PREFIX = "model-loader"
"""Model-loader init containers are named ``model-loader`` and ``model-loader-<n>``."""
ROUTINE_WAITING = frozenset({"ContainerCreating", "PodInitializing"})
"""Waiting reasons of a healthy start; any other one is quoted in a ``Pending`` message."""
MAX_DETAIL = 300
"""Longest piece of a foreign message (scheduler, kubelet, loader) quoted in a condition message."""


class Reason(StrEnum):
    """Condition reasons, also shown in the printer column."""

    AVAILABLE = "Available"
    MODEL_LOAD_FAILED = "ModelLoadFailed"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    ERR_IMAGE_PULL = "ErrImagePull"
    UNSCHEDULABLE = "Unschedulable"
    LOADING = "Loading"
    STARTING = "Starting"
    PENDING = "Pending"


PRECEDENCE: tuple[Reason, ...] = (
    Reason.MODEL_LOAD_FAILED,
    Reason.CRASH_LOOP_BACK_OFF,
    Reason.IMAGE_PULL_BACK_OFF,
    Reason.ERR_IMAGE_PULL,
    Reason.UNSCHEDULABLE,
    Reason.LOADING,
    Reason.STARTING,
    Reason.PENDING,
)
"""Order in which a not-available workload's pod states win (see the module docstring)."""

FAILURES: frozenset[Reason] = frozenset(
    {
        Reason.MODEL_LOAD_FAILED,
        Reason.CRASH_LOOP_BACK_OFF,
        Reason.IMAGE_PULL_BACK_OFF,
        Reason.ERR_IMAGE_PULL,
        Reason.UNSCHEDULABLE,
    }
)
"""Reasons that need action (a Warning Event); the others resolve by waiting (Normal)."""


@dataclass(frozen=True)
class Finding:
    """What one pod is blocked on."""

    reason: Reason
    pod: str
    detail: str


@dataclass(frozen=True)
class Diagnosis:
    """The state of one workload.

    :param reason: the winning reason (see :data:`PRECEDENCE`).
    :param message: one line for the condition message; stable while nothing changes.
    :param ready_replicas: groups whose every pod is Ready.
    :param desired_replicas: replicas asked for.
    :param unschedulable_since: the earliest time a live pod became Unschedulable (the replica that
        has waited longest), or ``None`` when no pod is Unschedulable.
    :param unschedulable_seconds: ``now - unschedulable_since`` (0 when none).
    :param any_ready: whether any pod is Ready (a flavor change must not happen then).
    """

    reason: Reason
    message: str
    ready_replicas: int
    desired_replicas: int
    unschedulable_since: dt.datetime | None = None
    unschedulable_seconds: float = 0.0
    any_ready: bool = False

    @property
    def available(self) -> bool:
        return self.reason is Reason.AVAILABLE

    @property
    def failing(self) -> bool:
        """Whether a user (or flavor fallback) must act: a Warning rather than a Normal Event."""
        return self.reason in FAILURES


def parse_time(value: str | None) -> dt.datetime | None:
    """An RFC 3339 timestamp of the API (``2026-01-02T03:04:05Z``) as an aware datetime."""
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def one_line(text: str | None, limit: int = MAX_DETAIL) -> str:
    """The last non-empty line of ``text`` (where tracebacks and loaders put the cause), shortened."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _short(text: str | None, limit: int = MAX_DETAIL) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "\u2026"


def _conditions(pod: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {c.get("type", ""): c for c in (pod.get("status") or {}).get("conditions") or []}


def _is_ready(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and _conditions(pod).get("Ready", {}).get(
        "status"
    ) == "True"


def _name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name", ""))


def _role(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    size = (meta.get("annotations") or {}).get(LWS_SIZE_ANNOTATION)
    index = labels.get(LWS_WORKER_INDEX_LABEL)
    if size in (None, "1") or index is None:
        return "pod"
    return "leader pod" if index == "0" else "worker pod"


def _images(pod: Mapping[str, Any]) -> dict[str, str]:
    spec = pod.get("spec") or {}
    return {
        c.get("name", ""): c.get("image", "")
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    }


def _terminated_error(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The failed termination of a container that is not running now: the current state when it
    ended in an error, else the last one while the kubelet waits to restart it."""
    state = status.get("state") or {}
    if state.get("running"):
        return None
    for term in (state.get("terminated"), (status.get("lastState") or {}).get("terminated")):
        if isinstance(term, dict) and term.get("exitCode", 0) != 0:
            found: Mapping[str, Any] = term
            return found
    return None


def _termination_text(term: Mapping[str, Any]) -> str:
    cause = one_line(term.get("message")) or str(term.get("reason") or "")
    code = term.get("exitCode")
    return f"exit code {code}: {cause}" if cause else f"exit code {code}"


def _pod_finding(pod: Mapping[str, Any]) -> Finding | None:
    """What keeps one pod from being Ready, or ``None`` when it is Ready."""
    if _is_ready(pod):
        return None
    name, role = _name(pod), _role(pod)
    status = pod.get("status") or {}
    images = _images(pod)
    init_statuses = list(status.get("initContainerStatuses") or [])
    statuses = list(status.get("containerStatuses") or [])
    findings: list[Finding] = []
    for cs in init_statuses + statuses:
        cname = str(cs.get("name", ""))
        waiting = (cs.get("state") or {}).get("waiting") or {}
        wreason = waiting.get("reason")
        term = _terminated_error(cs)
        is_loader = cs in init_statuses and cname.startswith(LOADER_PREFIX)
        if wreason in (Reason.IMAGE_PULL_BACK_OFF, Reason.ERR_IMAGE_PULL):
            image = cs.get("image") or images.get(cname, "")
            detail = f"container {cname} of {role} {name} cannot pull image {image!r}"
            if waiting.get("message"):
                detail += f": {_short(waiting.get('message'))}"
            findings.append(Finding(Reason(wreason), name, detail))
        elif is_loader and term is not None:
            cause = one_line(term.get("message")) or str(
                term.get("reason") or f"exit code {term.get('exitCode')}"
            )
            findings.append(
                Finding(Reason.MODEL_LOAD_FAILED, name, f"{cname} of {role} {name} failed: {cause}")
            )
        elif wreason == Reason.CRASH_LOOP_BACK_OFF or term is not None:
            last = (cs.get("lastState") or {}).get("terminated") or term or {}
            detail = f"container {cname} of {role} {name} keeps crashing"
            if last:
                detail += f" ({_termination_text(last)})"
            findings.append(Finding(Reason.CRASH_LOOP_BACK_OFF, name, detail))
    if findings:
        return min(findings, key=lambda f: PRECEDENCE.index(f.reason))
    scheduled = _conditions(pod).get("PodScheduled", {})
    if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return Finding(Reason.UNSCHEDULABLE, name, _short(scheduled.get("message")) or "no node fits")
    for cs in init_statuses:
        if (cs.get("state") or {}).get("running") and str(cs.get("name", "")).startswith(LOADER_PREFIX):
            return Finding(Reason.LOADING, name, f"{cs.get('name')} of {role} {name} is fetching the model")
    for cs in statuses:
        if cs.get("name") == MODEL_RUNNER and (cs.get("state") or {}).get("running"):
            return Finding(Reason.STARTING, name, f"{MODEL_RUNNER} of {role} {name} started, not ready yet")
    for cs in init_statuses + statuses:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and waiting.get("reason") not in ROUTINE_WAITING:
            # e.g. CreateContainerConfigError: a Secret named by an env var (a hub token) is missing
            detail = f"container {cs.get('name')} of {role} {name} is waiting: {waiting['reason']}"
            if waiting.get("message"):
                detail += f": {_short(waiting.get('message'))}"
            return Finding(Reason.PENDING, name, detail)
    if status.get("phase") == "Running":
        return Finding(Reason.STARTING, name, f"{role} {name} is running, not ready yet")
    return Finding(Reason.PENDING, name, f"{role} {name} is {status.get('phase') or 'being created'}")


def _live(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Pods that count: not being deleted and not finished (LWS replaces finished pods)."""
    out = [
        p
        for p in pods
        if not (p.get("metadata") or {}).get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]
    return sorted(out, key=_name)


def _group(pod: Mapping[str, Any]) -> str:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(LWS_GROUP_INDEX_LABEL, _name(pod)))


def ready_replicas(pods: Sequence[Mapping[str, Any]]) -> int:
    """Groups (replicas) whose every pod exists and is Ready."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for pod in _live(pods):
        groups.setdefault(_group(pod), []).append(pod)
    ready = 0
    for members in groups.values():
        annotations = (members[0].get("metadata") or {}).get("annotations") or {}
        try:
            size = int(annotations.get(LWS_SIZE_ANNOTATION, "1"))
        except ValueError:
            size = 1
        if len(members) >= size and all(_is_ready(p) for p in members):
            ready += 1
    return ready


def unschedulable_since(pods: Sequence[Mapping[str, Any]]) -> dt.datetime | None:
    """The earliest ``PodScheduled=False/Unschedulable`` transition among live pods."""
    times = []
    for pod in _live(pods):
        cond = _conditions(pod).get("PodScheduled", {})
        if cond.get("status") == "False" and cond.get("reason") == "Unschedulable":
            since = parse_time(cond.get("lastTransitionTime")) or parse_time(
                (pod.get("metadata") or {}).get("creationTimestamp")
            )
            if since is not None:
                times.append(since)
    return min(times) if times else None


def diagnose(
    pods: Sequence[Mapping[str, Any]],
    *,
    desired_replicas: int,
    flavor: str | None = None,
    now: dt.datetime,
) -> Diagnosis:
    """One reason and message for a workload from its pods.

    :param pods: the pods of the workload's LeaderWorkerSet (leaders and workers), as API dicts.
    :param desired_replicas: the replicas the Playground or Service asks for.
    :param flavor: the flavor the workload is rendered for, named in ``Unschedulable`` messages.
    :param now: the current time (aware), for :attr:`Diagnosis.unschedulable_seconds`.
    """
    live = _live(pods)
    ready = ready_replicas(live)
    since = unschedulable_since(live)
    waited = max(0.0, (now - since).total_seconds()) if since is not None else 0.0
    any_ready = any(_is_ready(p) for p in live)
    counts = f"{ready}/{desired_replicas} replicas ready"

    def result(reason: Reason, message: str) -> Diagnosis:
        return Diagnosis(
            reason=reason,
            message=message,
            ready_replicas=ready,
            desired_replicas=desired_replicas,
            unschedulable_since=since,
            unschedulable_seconds=waited,
            any_ready=any_ready,
        )

    if ready >= desired_replicas:
        return result(Reason.AVAILABLE, counts if desired_replicas else "scaled to 0 replicas")
    findings = [f for f in (_pod_finding(p) for p in live) if f is not None]
    if not findings:
        return result(Reason.PENDING, f"{counts}; waiting for pods to be created")
    top = min(findings, key=lambda f: (PRECEDENCE.index(f.reason), f.pod))
    same = [f for f in findings if f.reason is top.reason]
    more = f" (and {len(same) - 1} more pods)" if len(same) > 1 else ""
    if top.reason is Reason.UNSCHEDULABLE:
        where = f"on flavor {flavor!r}" if flavor else ""
        message = f"pod {top.pod}{more} cannot be scheduled {where}".rstrip() + f": {top.detail}"
    else:
        message = f"{top.detail}{more}"
    return result(top.reason, f"{message}; {counts}")
