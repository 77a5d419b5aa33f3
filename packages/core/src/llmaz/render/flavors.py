"""Flavors: which accelerators a model may run on, turned into node affinity and resource counts.

Claimed flavors (``modelClaim(s).inferenceFlavors``, else all of the main model's flavors, in
order) become a *required* node affinity with one OR'ed term per flavor's nodeSelector, plus
*preferred* terms weighted by priority, so the stock kube-scheduler and Karpenter both honour the
fallback order. Only flavors compatible with the selected one (same accelerator limits and
``TP``/``PP``/``NODES`` params) are in the affinity: a pod sized for one flavor must not land on
a node of another size. Flavors that differ are reached by the operator re-rendering with the next
``flavor``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from llmaz.api import Flavor, OpenModel, quantity
from llmaz.render.errors import FlavorNotFound

PREFERRED_TOP_WEIGHT = 100
PREFERRED_WEIGHT_STEP = 10


def claimed_flavors(
    model: OpenModel, explicit: Sequence[str] | None, *, field: str
) -> tuple[list[Flavor], bool]:
    """Flavors of the main model in claim order, and whether the claim listed them explicitly."""
    own = list(model.spec.inference_config.flavors or []) if model.spec.inference_config else []
    if not explicit:
        seen: set[str] = set()
        ordered = []
        for f in own:
            if f.name not in seen:
                seen.add(f.name)
                ordered.append(f)
        return ordered, False
    by_name: dict[str, Flavor] = {}
    for f in own:
        by_name.setdefault(f.name, f)
    out: list[Flavor] = []
    for i, name in enumerate(explicit):
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise FlavorNotFound(
                f"{field}[{i}]",
                f"flavor {name!r} is not a flavor of OpenModel {model.name!r} (its flavors: {known})",
            )
        if all(f.name != name for f in out):
            out.append(by_name[name])
    return out, True


def select_flavor(flavors: Sequence[Flavor], name: str | None, *, field: str) -> Flavor | None:
    """The flavor whose accelerator counts and params apply: ``name``, else the first claimed."""
    if name is None:
        return flavors[0] if flavors else None
    for f in flavors:
        if f.name == name:
            return f
    raise FlavorNotFound(
        field,
        f"selected flavor {name!r} is not claimed (claimed: {', '.join(f.name for f in flavors) or 'none'})",
    )


SHAPE_PARAMS = ("TP", "PP", "NODES")
"""Params that change the pod itself (args, group size). Other params, such as INSTANCE-TYPE, are
placement hints and do not make two flavors incompatible."""


def _signature(f: Flavor) -> tuple[Any, ...]:
    limits = tuple(sorted((k, quantity.to_str(v)) for k, v in (f.limits or {}).items()))
    params = tuple(sorted((k, v) for k, v in (f.params or {}).items() if k in SHAPE_PARAMS))
    return limits, params


def compatible(flavors: Sequence[Flavor], selected: Flavor | None) -> list[Flavor]:
    """Claimed flavors a pod rendered for ``selected`` can run on, in priority order."""
    if selected is None:
        return []
    sig = _signature(selected)
    return [f for f in flavors if _signature(f) == sig]


def _term(f: Flavor) -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": k, "operator": "In", "values": [v]} for k, v in sorted((f.node_selector or {}).items())
        ]
    }


def node_affinity(flavors: Sequence[Flavor]) -> dict[str, Any] | None:
    """``nodeAffinity`` for pods that may run on any of ``flavors`` (priority order)."""
    with_selector = [f for f in flavors if f.node_selector]
    if not with_selector:
        return None
    affinity: dict[str, Any] = {}
    if len(with_selector) == len(flavors):
        terms: list[dict[str, Any]] = []
        for f in with_selector:
            term = _term(f)
            if term not in terms:
                terms.append(term)
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if len(flavors) > 1:
        preferred: list[dict[str, Any]] = []
        for rank, f in enumerate(with_selector):
            term = _term(f)
            if any(p["preference"] == term for p in preferred):
                continue
            weight = max(1, PREFERRED_TOP_WEIGHT - PREFERRED_WEIGHT_STEP * rank)
            preferred.append({"weight": weight, "preference": term})
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return affinity


def _contradicts(expressions: Sequence[dict[str, Any]]) -> bool:
    """True when two ``In`` requirements on one key share no value (the term matches no node)."""
    allowed: dict[str, set[str]] = {}
    for e in expressions:
        if e.get("operator") != "In":
            continue
        values = set(e.get("values") or [])
        key = e.get("key", "")
        if key in allowed:
            allowed[key] &= values
            if not allowed[key]:
                return True
        else:
            allowed[key] = values
    return False


def merge_node_affinity(pod_spec: dict[str, Any], ours: dict[str, Any] | None) -> None:
    """AND our node affinity with the one already in ``pod_spec`` (user-written templates).

    Idempotent: merging the same affinity twice changes nothing, so a Playground's Service (whose
    templates already carry the flavor affinity) renders to the same LWS as a hand-written one.
    """
    if not ours:
        return
    affinity = pod_spec.setdefault("affinity", {})
    node = affinity.setdefault("nodeAffinity", {})
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    if req_key in ours:
        existing = (node.get(req_key) or {}).get("nodeSelectorTerms") or []
        our_terms = ours[req_key]["nodeSelectorTerms"]
        if not existing:
            node[req_key] = {"nodeSelectorTerms": copy.deepcopy(our_terms)}
        else:
            combined: list[dict[str, Any]] = []
            impossible: list[dict[str, Any]] = []
            for user_term in existing:
                user_exprs = list(user_term.get("matchExpressions") or [])
                for term in our_terms:
                    exprs = user_exprs + [e for e in term["matchExpressions"] if e not in user_exprs]
                    merged = {**copy.deepcopy(user_term), "matchExpressions": copy.deepcopy(exprs)}
                    target = impossible if _contradicts(exprs) else combined
                    if merged not in target:
                        target.append(merged)
            # When every combination is impossible, keep them: the pods stay Pending and say why.
            node[req_key] = {"nodeSelectorTerms": combined or impossible}
    pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
    if pref_key in ours:
        current = list(node.get(pref_key) or [])
        seen = [p.get("preference") for p in current]
        for p in ours[pref_key]:
            if p["preference"] not in seen:
                current.append(copy.deepcopy(p))
                seen.append(p["preference"])
        node[pref_key] = current
