"""Status of Playgrounds and inference Services, computed by pure functions (``now`` is injected).

Two conditions, following Kubernetes conventions (``observedGeneration``, ``lastTransitionTime`` that
changes only when ``status`` changes):

* ``Available``: ``True`` with reason ``Available`` when every desired replica is ready; else
  ``False`` with the reason a user can act on. ``kubectl get pl,isvc`` shows this reason.
* ``Progressing``: ``True``/``Pending`` while the workload rolls out; ``False`` with the blocking
  reason when the operator cannot proceed (``ModelNotFound``...), ``False``/``Available`` when done.

A third, ``IntegrationsReady`` (:func:`integrations_condition`), is written by the integration
reconcile, not by :func:`compute_status`, which keeps it (and any other condition it does not own) as
it finds it.

Pure: no kopf, no client, no clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.api.core import CONDITION_IN_USE
from llmaz.api.inference import (
    CONDITION_AUTOSCALING_READY,
    CONDITION_AVAILABLE,
    CONDITION_INTEGRATIONS_READY,
    CONDITION_MANAGED,
    CONDITION_PROGRESSING,
)
from llmaz.render.diagnosis import FAILURES, Reason
from llmaz.render.errors import RenderError
from llmaz.render.preheat import Report as PreheatReport

__all__ = [
    "REASON_APPLIED",
    "REASON_AVAILABLE",
    "REASON_CRD_NOT_INSTALLED",
    "REASON_ENDPOINT_PICKER_NOT_FOUND",
    "REASON_ENDPOINT_PICKER_NOT_READY",
    "REASON_GATEWAY_NOT_FOUND",
    "REASON_NAME_CONFLICT",
    "REASON_PENDING",
    "REASON_REJECTED",
    "IntegrationProblem",
    "Observation",
    "available_of",
    "compute_status",
    "condition_differs",
    "error_reason",
    "event_wanted",
    "format_time",
    "in_use_condition",
    "integrations_condition",
    "managed_by_condition",
    "progress_only",
    "same_reason",
    "status_changed",
    "transitions",
    "with_condition",
]

REASON_AVAILABLE = "Available"
REASON_PENDING = "Pending"
REASON_NAME_CONFLICT = "NameConflict"
REASON_INVALID_TEMPLATE = "InvalidTemplate"

_TEMPLATE_REASONS = frozenset({"UnknownTemplateVariable", "InvalidWorkloadTemplate"})


def error_reason(err: RenderError) -> str:
    """The condition reason of a render error (template problems are all ``InvalidTemplate``)."""
    reason = err.condition_reason
    return REASON_INVALID_TEMPLATE if reason in _TEMPLATE_REASONS else reason


@dataclass(frozen=True)
class Observation:
    """What the operator saw for one Playground or Service.

    :param generation: ``metadata.generation`` of the object.
    :param blocked: ``(reason, message)`` when the children cannot be rendered or applied.
    :param desired: desired replicas.
    :param ready: ready replicas of the workload (a child's status).
    :param available: whether the workload reports itself available.
    :param selector: label selector of the serving pods (scale subresource).
    :param workload: ``(reason, message)`` of the pods' diagnosis
        (:func:`llmaz.render.diagnosis.diagnose`) or of flavor fallback (``NoFlavorSchedulable``);
        when set it decides ``Available`` instead of ``ready``/``available``.
    :param failing: the workload reason needs action (a Warning Event; ``Progressing=False`` unless
        the reason is ``Unschedulable``, which flavor fallback may still resolve).
    :param flavor: ``status.flavor`` to record (``selected``, ``tried``, ``selectedAt``), if any.
    :param scaling: ``(reason, message)`` of each problem an autoscaler plugin reported (a
        Playground's ``AutoscalingReady=False``; none: no such condition).
    """

    generation: int
    blocked: tuple[str, str] | None = None
    desired: int = 1
    ready: int = 0
    available: bool = False
    selector: str | None = None
    workload: tuple[str, str] | None = None
    failing: bool = False
    flavor: Mapping[str, Any] | None = None
    scaling: tuple[tuple[str, str], ...] = ()


def format_time(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(  # noqa: PLR0917
    previous: Mapping[str, Mapping[str, Any]],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int,
    now: datetime,
) -> dict[str, Any]:
    value = "True" if status else "False"
    before = previous.get(type_)
    since = (
        str(before["lastTransitionTime"])
        if before is not None and before.get("status") == value and before.get("lastTransitionTime")
        else format_time(now)
    )
    return {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


_OWN_TYPES = frozenset({CONDITION_PROGRESSING, CONDITION_AVAILABLE, CONDITION_AUTOSCALING_READY})


def compute_status(
    kind: str, seen: Observation, previous: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """The full ``status`` of a Playground or inference Service (``kind`` names it in messages)."""
    old = {
        str(c.get("type")): c
        for c in ((previous or {}).get("conditions") or [])
        if isinstance(c, Mapping) and c.get("type")
    }
    gen = seen.generation
    if seen.blocked is not None:
        reason, message = seen.blocked
        progressing = _condition(old, CONDITION_PROGRESSING, False, reason, message, gen, now)
        available = _condition(old, CONDITION_AVAILABLE, False, reason, message, gen, now)
    elif seen.workload is not None:
        reason, message = seen.workload
        if reason == REASON_AVAILABLE:
            progressing = _condition(
                old, CONDITION_PROGRESSING, False, REASON_AVAILABLE, f"{kind} rolled out; {message}", gen, now
            )
            available = _condition(old, CONDITION_AVAILABLE, True, REASON_AVAILABLE, message, gen, now)
        else:
            moving = not seen.failing or reason == Reason.UNSCHEDULABLE
            progressing = _condition(old, CONDITION_PROGRESSING, moving, reason, message, gen, now)
            available = _condition(old, CONDITION_AVAILABLE, False, reason, message, gen, now)
    elif seen.available and seen.ready >= seen.desired:
        message = f"{seen.ready}/{seen.desired} replicas ready"
        progressing = _condition(
            old, CONDITION_PROGRESSING, False, REASON_AVAILABLE, f"{kind} rolled out; {message}", gen, now
        )
        available = _condition(old, CONDITION_AVAILABLE, True, REASON_AVAILABLE, message, gen, now)
    else:
        message = f"waiting for replicas to become ready: {seen.ready}/{seen.desired} ready"
        progressing = _condition(old, CONDITION_PROGRESSING, True, REASON_PENDING, message, gen, now)
        available = _condition(old, CONDITION_AVAILABLE, False, REASON_PENDING, message, gen, now)
    # conditions another reconcile owns (IntegrationsReady) are kept as they are
    kept = [dict(c) for t, c in old.items() if t not in _OWN_TYPES]
    own = [progressing, available]
    if seen.scaling:  # (no condition when all is well: no status write for it, issue 15)
        reason = seen.scaling[0][0]
        message = (
            "; ".join(f"{r}: {m}" for r, m in seen.scaling) if len(seen.scaling) > 1 else seen.scaling[0][1]
        )
        own.append(_condition(old, CONDITION_AUTOSCALING_READY, False, reason, message, gen, now))
    status: dict[str, Any] = {"conditions": [*own, *kept], "replicas": seen.ready}
    if seen.selector:
        status["selector"] = seen.selector
    if seen.flavor is not None:
        status["flavor"] = dict(seen.flavor)
    return status


def _comparable(status: Mapping[str, Any] | None) -> Any:
    if not status:
        return None
    conds = sorted(
        (
            (
                c.get("type"),
                c.get("status"),
                c.get("reason"),
                c.get("message"),
                c.get("observedGeneration"),
            )
            for c in status.get("conditions") or []
        ),
        key=lambda c: str(c[0]),
    )
    return (
        conds,
        status.get("replicas", 0),
        status.get("selector"),
        status.get("flavor"),
        status.get("preheat"),
    )


def status_changed(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether writing ``desired`` would change anything a user can see."""
    return bool(_comparable(current) != _comparable(desired))


WAITING_REASONS = frozenset(str(r) for r in Reason if r not in FAILURES and r is not Reason.AVAILABLE)
"""``Available=False`` reasons of a rollout that resolve by waiting (``Pending``, ``Loading``,
``Starting``): nothing for a user to do."""


def _available(status: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    for cond in (status or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == CONDITION_AVAILABLE:
            return cond
    return None


def _waiting(cond: Mapping[str, Any]) -> bool:
    """Whether an ``Available`` condition is ``False`` with a reason that resolves by waiting."""
    return cond.get("status") == "False" and cond.get("reason") in WAITING_REASONS


def progress_only(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether ``desired`` only says a rollout is under way: ``Available`` is ``False`` with a waiting
    reason (``Pending``, ``Loading``, ``Starting``), and so was it before, for the same generation, or
    there was no ``Available`` condition before (the first status). Such a change may wait a moment
    before it is written, and is not written at all when the next state supersedes it first (a pod
    that is ``Pending`` for a few seconds before it is Ready: the first status is then
    ``Available``). Becoming available, losing availability, a failure, a blocked render and a spec
    change are never held back."""
    before, after = _available(current), _available(desired)
    if after is None or not _waiting(after):
        return False
    if before is None:
        return True
    return _waiting(before) and before.get("observedGeneration") == after.get("observedGeneration")


def same_reason(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """Whether ``current`` and ``desired`` have an ``Available`` condition with the same status and
    reason (what ``kubectl get`` shows): only its message or counts differ."""
    before, after = _available(current), _available(desired)
    if before is None or after is None:
        return False
    return (before.get("status"), before.get("reason")) == (after.get("status"), after.get("reason"))


def event_wanted(current: Mapping[str, Any] | None, *, warning: bool) -> bool:
    """Whether a change of the ``Available`` reason deserves an Event. Events tell of problems and
    of their end: a change to a reason a user must act on (``warning``) has a ``Warning`` Event, and
    leaving such a reason has a ``Normal`` one (``Unschedulable`` -> ``Available``). The steps of a
    rollout (``Pending``, ``Loading``, ``Starting``, ``Available``, losing availability to a waiting
    reason) say nothing the condition and its ``lastTransitionTime`` do not (issue 15: an Event per
    object and transition was a third of the writes of a rollout)."""
    if warning:
        return True
    before = _available(current)
    return before is not None and before.get("status") == "False" and not _waiting(before)


def transitions(current: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(type, reason, message)`` of each condition whose status or reason changes: one Event each."""
    old = {str(c.get("type")): c for c in ((current or {}).get("conditions") or []) if isinstance(c, Mapping)}
    out = []
    for cond in desired.get("conditions") or []:
        before = old.get(cond["type"])
        if before is None or (before.get("status"), before.get("reason")) != (
            cond["status"],
            cond["reason"],
        ):
            out.append((str(cond["type"]), str(cond["reason"]), str(cond["message"])))
    return out


def available_of(status: Mapping[str, Any] | None) -> bool:
    """Whether a status (ours or a LeaderWorkerSet's) has ``Available=True``."""
    conds: Sequence[Mapping[str, Any]] = (status or {}).get("conditions") or []
    return any(c.get("type") == CONDITION_AVAILABLE and c.get("status") == "True" for c in conds)


class _PluginLookup(Protocol):
    @property
    def backends(self) -> Mapping[str, Any]: ...

    def owner_of_backend(self, name: str) -> Any: ...


def managed_by_condition(  # noqa: PLR0917
    labels: Mapping[str, str],
    name: str,
    plugins: _PluginLookup,
    generation: int,
    previous: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    """The ``Managed`` condition of a BackendRuntime: reason ``Plugin`` (message names the plugin and
    its distribution), ``UserCreated``, or ``PluginNotInstalled`` (left alone, no longer updated)."""
    old = {
        str(c.get("type")): c
        for c in ((previous or {}).get("conditions") or [])
        if isinstance(c, Mapping) and c.get("type")
    }
    if labels.get(MANAGED_BY) != MANAGER:
        return _condition(
            old,
            CONDITION_MANAGED,
            False,
            "UserCreated",
            "created by a user; the operator never changes it",
            generation,
            now,
        )
    if name in plugins.backends:
        info = plugins.owner_of_backend(name)
        dist = f" (distribution {info.distribution})" if info is not None and info.distribution else ""
        return _condition(
            old,
            CONDITION_MANAGED,
            True,
            "Plugin",
            f"applied by the operator from backend plugin {name!r}{dist}",
            generation,
            now,
        )
    return _condition(
        old,
        CONDITION_MANAGED,
        False,
        "PluginNotInstalled",
        f"backend plugin {name!r} is not installed any more; the object is left as it was",
        generation,
        now,
    )


IN_USE_LISTED = 10


def in_use_condition(
    users: list[tuple[str, str, str]], generation: int, previous: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """``InUse``: ``True``/``Referenced`` naming the users (``(kind, namespace, name)``, the first
    ten), or ``False``/``Unused``."""
    old = {
        str(c.get("type")): c
        for c in ((previous or {}).get("conditions") or [])
        if isinstance(c, Mapping) and c.get("type")
    }
    if not users:
        return _condition(
            old, CONDITION_IN_USE, False, "Unused", "no Playground or Service uses it", generation, now
        )
    names = ", ".join(f"{kind} {ns}/{name}" for kind, ns, name in users[:IN_USE_LISTED])
    more = f" and {len(users) - IN_USE_LISTED} more" if len(users) > IN_USE_LISTED else ""
    message = f"used by {len(users)} object{'s' if len(users) != 1 else ''}: {names}{more}"
    return _condition(old, CONDITION_IN_USE, True, "Referenced", message, generation, now)


CONDITION_PREHEATED = "Preheated"
"""OpenModel condition while it is marked ``llmaz.io/model-preheat``: its download into the shared
cache of the nodes its flavors select (:mod:`llmaz.operator.preheat`)."""


def preheated_condition(
    state: PreheatReport, generation: int, previous: Mapping[str, Any] | None, now: datetime
) -> dict[str, Any]:
    """``Preheated`` from a :class:`llmaz.render.preheat.Report` (message cut at :data:`MAX_MESSAGE`)."""
    old = {
        str(c.get("type")): c
        for c in ((previous or {}).get("conditions") or [])
        if isinstance(c, Mapping) and c.get("type")
    }
    message = state.message if len(state.message) <= MAX_MESSAGE else state.message[: MAX_MESSAGE - 3] + "..."
    return _condition(old, CONDITION_PREHEATED, state.done, state.reason, message, generation, now)


# ------------------------------------------------------------------------------ integrations

REASON_APPLIED = "Applied"
REASON_CRD_NOT_INSTALLED = "CRDNotInstalled"
REASON_GATEWAY_NOT_FOUND = "GatewayNotFound"
REASON_ENDPOINT_PICKER_NOT_FOUND = "EndpointPickerNotFound"
REASON_ENDPOINT_PICKER_NOT_READY = "EndpointPickerNotReady"
REASON_REJECTED = "Rejected"
MAX_MESSAGE = 1024
"""Longest condition message written (the rest is cut with an ellipsis)."""


@dataclass(frozen=True, order=True)
class IntegrationProblem:
    """Why an integration object of a workload could not be applied, and what to do about it.

    :param reason: condition reason (``CRDNotInstalled``, ``GatewayNotFound``,
        ``EndpointPickerNotFound``, ``EndpointPickerNotReady``, ``Rejected``, ``NameConflict``, or a
        render error's reason such as ``InvalidAnnotation``).
    :param message: names the object or setting at fault and the fix.
    """

    reason: str
    message: str


def integrations_condition(
    applied: Collection[str],
    problems: Collection[IntegrationProblem],
    generation: int,
    previous: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any] | None:
    """``IntegrationsReady`` of a workload from the kinds of its integration objects that are in
    place (``applied``) and the problems met; ``None`` (no condition) when neither exists.

    ``True``/``Applied`` names the kinds; ``False`` takes the reason of the first problem (problems
    are sorted, so the result does not depend on the order they were met in) and lists every
    distinct message.
    """
    old = {
        str(c.get("type")): c
        for c in ((previous or {}).get("conditions") or [])
        if isinstance(c, Mapping) and c.get("type")
    }
    if problems:
        ordered = sorted(set(problems))
        message = "; ".join(p.message for p in ordered)
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        return _condition(
            old, CONDITION_INTEGRATIONS_READY, False, ordered[0].reason, message, generation, now
        )
    if not applied:
        return None
    kinds = ", ".join(sorted(set(applied)))
    return _condition(
        old, CONDITION_INTEGRATIONS_READY, True, REASON_APPLIED, f"in place: {kinds}", generation, now
    )


def _without_time(cond: Mapping[str, Any] | None) -> Any:
    return None if cond is None else {k: v for k, v in cond.items() if k != "lastTransitionTime"}


def condition_differs(
    status: Mapping[str, Any] | None, condition: Mapping[str, Any] | None, type_: str
) -> bool:
    """Whether ``status`` holds something else than ``condition`` (``None``: no condition) under
    ``type_``; ``lastTransitionTime`` is not compared."""
    current = next(
        (
            c
            for c in (status or {}).get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == type_
        ),
        None,
    )
    return bool(_without_time(current) != _without_time(condition))


def with_condition(
    status: Mapping[str, Any] | None, condition: Mapping[str, Any] | None, type_: str
) -> list[dict[str, Any]]:
    """The conditions of ``status`` with the one of ``type_`` replaced by ``condition`` (removed
    when ``None``); the others keep their order."""
    out = [
        dict(c)
        for c in (status or {}).get("conditions") or []
        if isinstance(c, Mapping) and c.get("type") != type_
    ]
    if condition is not None:
        out.append(dict(condition))
    return out
