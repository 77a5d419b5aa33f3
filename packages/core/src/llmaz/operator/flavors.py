"""Flavor fallback of a Playground: the operator's inputs to the pure
:func:`llmaz.render.fallback.decide_fallback`, and what to record in ``status.flavor``.

Pure: the pods, the previous status and ``now`` are arguments (no kopf, no client, no clock), so the
whole decision is unit-tested; :mod:`llmaz.operator.engine` renders, applies, posts the
``FlavorFallback`` Event and schedules the recheck.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmaz.api import OpenModel, Playground
from llmaz.operator.config import OperatorConfig
from llmaz.operator.status import format_time
from llmaz.render.diagnosis import diagnose, parse_time
from llmaz.render.dra import uses_dra
from llmaz.render.fallback import Action, FallbackDecision, decide_fallback, fallback_seconds
from llmaz.render.models import resolve_claims

__all__ = ["FlavorChoice", "choose_flavor"]


@dataclass(frozen=True)
class FlavorChoice:
    """The flavor to render a Playground with.

    :param decision: what :func:`decide_fallback` said.
    :param render_flavor: the ``flavor=`` to pass to :func:`llmaz.render.plan` (``None`` for the
        first claimed flavor, which is the default, so the Service carries no selection annotation).
    :param status: ``status.flavor`` (``selected``, ``tried``, ``selectedAt``).
    :param moved: the selection changed away from a flavor the workload was rendered for
        (a ``FlavorFallback`` Event).
    """

    decision: FallbackDecision
    render_flavor: str | None
    status: dict[str, Any]
    moved: bool


def choose_flavor(
    config: OperatorConfig,
    playground: Playground,
    models: Mapping[str, OpenModel],
    status: Mapping[str, Any] | None,
    *,
    pods: Sequence[Mapping[str, Any]],
    now: dt.datetime,
    created: str | None = None,
) -> FlavorChoice | None:
    """The flavor decision for ``playground``, or ``None`` when fallback does not apply: fewer than
    two claimed flavors, or DRA mode (the scheduler picks among the flavors itself).

    Only pods created since the current flavor was selected are held against it: pods of the
    previous flavor that the LeaderWorkerSet has not replaced yet do not count (a flavor chosen at
    the first look counts from ``created``, the Playground's ``creationTimestamp``). Any Ready pod,
    of whatever flavor, keeps the flavor where it is.

    :raises RenderError: a claimed model is missing, or the fallback annotation is invalid.
    """
    claimed = resolve_claims(playground.spec.model_claim, playground.spec.model_claims, models)
    flavors = list(claimed.flavors)
    if len(flavors) < 2 or uses_dra(flavors, config.dra):
        return None
    seconds = fallback_seconds(playground.metadata.annotations, config.flavor_fallback.unschedulable_seconds)
    old: Mapping[str, Any] = (status or {}).get("flavor") or {}
    current = old.get("selected")
    selected_since = parse_time(old.get("selectedAt"))
    desired = max(1, int(playground.spec.replicas or 0))
    everything = diagnose(pods, desired_replicas=desired, flavor=current, now=now)
    ours = [p for p in pods if _created_since(p, selected_since)]
    found = diagnose(ours, desired_replicas=desired, flavor=current, now=now)
    decision = decide_fallback(
        claimed=flavors,
        current=str(current) if current else None,
        tried=[str(t) for t in old.get("tried") or []],
        unschedulable_since=found.unschedulable_since,
        selected_since=selected_since,
        any_ready=everything.any_ready,
        fallback_seconds=seconds,
        retry_all_seconds=config.flavor_fallback.retry_all_seconds,
        now=now,
    )
    changed = decision.flavor != current
    if not changed and old.get("selectedAt"):
        selected_at = str(old["selectedAt"])
    elif current is None and created:
        selected_at = created  # the first flavor is selected since the Playground exists
    else:
        selected_at = format_time(now)
    return FlavorChoice(
        decision=decision,
        render_flavor=None if decision.flavor == flavors[0].name else decision.flavor,
        status={"selected": decision.flavor, "tried": list(decision.tried), "selectedAt": selected_at},
        moved=changed and current is not None and decision.action is Action.MOVE,
    )


def _created_since(pod: Mapping[str, Any], since: dt.datetime | None) -> bool:
    if since is None:
        return True
    created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
    return created is None or created >= since
