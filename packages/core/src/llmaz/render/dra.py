"""DRA mode: flavors as one ResourceClaim request with ``firstAvailable`` subrequests.

Where a cluster offers its GPUs through Dynamic Resource Allocation (``resource.k8s.io/v1``, GA in
the Kubernetes version llmaz pins), flavor fallback needs no operator move: the workload gets a
``ResourceClaimTemplate`` with one request whose subrequests are the claimed flavors in priority
order, each with its device class, device count and selector ("one A100, else two L4s"), and the
stock scheduler allocates the first subrequest that fits on a node. Pods reference the template
(``resourceClaims`` + the runner's ``resources.claims``) instead of carrying ``nvidia.com/gpu``
limits, and the engine is started through its backend's device-count wrapper
(:meth:`llmaz.plugins.Backend.device_count_entrypoint`) so its parallelism matches what was
allocated.

A workload is in DRA mode when the operator's ``dra.enabled`` is set, or when one of its claimed
flavors has the param ``DEVICE-CLASS``. Each flavor's device class is, in order: its param
``DEVICE-CLASS``, the operator's ``dra.flavorDeviceClasses[<flavor>]``, the operator's
``dra.deviceClass``. The param ``DEVICE-SELECTOR`` adds a CEL selector; ``DEVICE-COUNT`` sets the
count, which otherwise comes from the flavor's one extended-resource limit (``nvidia.com/gpu: 2``),
else 1.

:func:`render_dra` post-processes the result of :func:`llmaz.render.render_service`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from llmaz.api import Flavor, Service, quantity
from llmaz.api._base import ApiModel, Name, ShortString
from llmaz.api.conventions import ANNOTATION_SELECTED_FLAVOR, DNS_LABEL_PATTERN, MODEL_RUNNER
from llmaz.plugins.backend import Backend
from llmaz.render import flavors as flavor_mod
from llmaz.render.errors import InvalidFlavor, MultiHostUnsupported
from llmaz.render.models import Models, resolve_claims
from llmaz.render.objects import Rendered, find_container

RESOURCE_API_VERSION = "resource.k8s.io/v1"
CLAIM_TEMPLATE_KIND = "ResourceClaimTemplate"
CLAIM_NAME = "accelerators"
"""Name of the pod's resource claim, of the container's claim reference and of the request."""
PARAM_DEVICE_CLASS = "DEVICE-CLASS"
PARAM_DEVICE_SELECTOR = "DEVICE-SELECTOR"
PARAM_DEVICE_COUNT = "DEVICE-COUNT"
DRA_PARAMS = (PARAM_DEVICE_CLASS, PARAM_DEVICE_SELECTOR, PARAM_DEVICE_COUNT)
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)


class DraSettings(ApiModel):
    """Operator setting ``dra``: GPUs offered through Dynamic Resource Allocation device classes."""

    enabled: bool = Field(
        default=False,
        description=(
            "Render every workload with accelerators through DRA (a ResourceClaimTemplate with one "
            "firstAvailable subrequest per claimed flavor). Off: only models whose flavors set the "
            "param DEVICE-CLASS use DRA."
        ),
    )
    device_class: ShortString | None = Field(
        default=None,
        description="DeviceClass of flavors that name none (param DEVICE-CLASS or flavorDeviceClasses).",
    )
    flavor_device_classes: dict[Name, ShortString] = Field(
        default_factory=dict,
        description="DeviceClass per flavor name (overridden by the flavor's DEVICE-CLASS).",
    )


def uses_dra(flavors: Sequence[Flavor], settings: DraSettings | None) -> bool:
    """Whether a workload claiming ``flavors`` is rendered in DRA mode."""
    if not flavors:
        return False
    if settings is not None and settings.enabled:
        return True
    return any((f.params or {}).get(PARAM_DEVICE_CLASS) for f in flavors)


def claim_template_name(workload: str) -> str:
    """The ResourceClaimTemplate of a workload (one per Playground / Service)."""
    return f"{workload}-{CLAIM_NAME}"


def accelerator_keys(flavor: Flavor) -> list[str]:
    """Extended resources (``vendor/name``) among a flavor's limits: what DRA replaces."""
    return sorted(k for k in (flavor.limits or {}) if "/" in k)


def device_count(flavor: Flavor, field: str) -> int:
    """Devices one pod of ``flavor`` needs: ``DEVICE-COUNT``, else its accelerator limit, else 1."""
    raw = (flavor.params or {}).get(PARAM_DEVICE_COUNT)
    if raw is None:
        keys = accelerator_keys(flavor)
        if len(keys) > 1:
            raise InvalidFlavor(
                field,
                f"flavor {flavor.name!r} limits several accelerator kinds ({', '.join(keys)}); in DRA mode "
                f"set its param {PARAM_DEVICE_COUNT}",
            )
        if not keys:
            return 1
        raw = quantity.to_str((flavor.limits or {})[keys[0]])
    try:
        count = int(raw)
    except ValueError:
        raise InvalidFlavor(
            field, f"device count {raw!r} of flavor {flavor.name!r} is not a whole number"
        ) from None
    if count < 1:
        raise InvalidFlavor(field, f"device count {raw!r} of flavor {flavor.name!r} must be >= 1")
    return count


def device_class(flavor: Flavor, settings: DraSettings | None, field: str) -> str:
    """The DeviceClass of ``flavor`` (see the module docstring for the order)."""
    params = flavor.params or {}
    name = params.get(PARAM_DEVICE_CLASS)
    if not name and settings is not None:
        name = settings.flavor_device_classes.get(flavor.name) or settings.device_class
    if not name:
        raise InvalidFlavor(
            field,
            f"flavor {flavor.name!r} names no DRA device class: set its param {PARAM_DEVICE_CLASS}, or the "
            "operator's dra.flavorDeviceClasses / dra.deviceClass",
        )
    return name


def subrequests(flavors: Sequence[Flavor], settings: DraSettings | None, field: str) -> list[dict[str, Any]]:
    """One ``firstAvailable`` entry per flavor, in priority order."""
    out: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for f in flavors:
        if not _DNS_LABEL.match(f.name):
            raise InvalidFlavor(
                field, f"flavor name {f.name!r} is not a DNS label, so it cannot name a DRA subrequest"
            )
        cls = device_class(f, settings, field)
        selector = (f.params or {}).get(PARAM_DEVICE_SELECTOR)
        if not selector:
            if cls in seen:
                raise InvalidFlavor(
                    field,
                    f"flavors {seen[cls]!r} and {f.name!r} both use device class {cls!r} without a "
                    f"{PARAM_DEVICE_SELECTOR}: the scheduler could not tell their devices apart",
                )
            seen[cls] = f.name
        sub: dict[str, Any] = {
            "name": f.name,
            "deviceClassName": cls,
            "allocationMode": "ExactCount",
            "count": device_count(f, field),
        }
        if selector:
            sub["selectors"] = [{"cel": {"expression": selector}}]
        out.append(sub)
    return out


def claim_template(
    name: str, namespace: str | None, labels: Mapping[str, str], subs: list[dict[str, Any]]
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": claim_template_name(name)}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = dict(labels)
    return {
        "apiVersion": RESOURCE_API_VERSION,
        "kind": CLAIM_TEMPLATE_KIND,
        "metadata": meta,
        "spec": {"spec": {"devices": {"requests": [{"name": CLAIM_NAME, "firstAvailable": subs}]}}},
    }


def allocated_flavor(claim: Mapping[str, Any]) -> str | None:
    """The flavor the scheduler picked for a ResourceClaim made from our template (from its
    allocation result ``<request>/<subrequest>``), or ``None`` when not allocated yet."""
    results = (
        (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
    ) or []
    for r in results:
        request = str(r.get("request", ""))
        head, _, sub = request.partition("/")
        if head == CLAIM_NAME and sub:
            return sub
    return None


def _widen_required(
    node: dict[str, Any], old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> None:
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    old_terms = [t["matchExpressions"] for t in ((old or {}).get(key) or {}).get("nodeSelectorTerms", [])]
    new_terms = [t["matchExpressions"] for t in ((new or {}).get(key) or {}).get("nodeSelectorTerms", [])]
    existing = (node.get(key) or {}).get("nodeSelectorTerms") or []
    if not old_terms or not existing:
        return
    out: list[dict[str, Any]] = []
    for term in existing:
        exprs = list(term.get("matchExpressions") or [])
        ours = next((t for t in old_terms if all(e in exprs for e in t)), None)
        if ours is None:
            out.append(term)
            continue
        rest = [e for e in exprs if e not in ours]
        for extra in new_terms or [[]]:
            merged_exprs = rest + [e for e in extra if e not in rest]
            if not merged_exprs and not term.get("matchFields"):
                continue
            merged = {**copy.deepcopy(term), "matchExpressions": copy.deepcopy(merged_exprs)}
            if merged not in out:
                out.append(merged)
    if out:
        node[key] = {"nodeSelectorTerms": out}
    else:
        node.pop(key, None)


def _widen_preferred(
    node: dict[str, Any], old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> None:
    key = "preferredDuringSchedulingIgnoredDuringExecution"
    drop = list((old or {}).get(key) or [])
    current = [p for p in node.get(key) or [] if p not in drop]
    for p in (new or {}).get(key) or []:
        if p not in current:
            current.append(copy.deepcopy(p))
    if current:
        node[key] = current
    else:
        node.pop(key, None)


def _to_dra_pod(
    template: dict[str, Any],
    *,
    template_name: str,
    drop_keys: set[str],
    old_affinity: Mapping[str, Any] | None,
    new_affinity: Mapping[str, Any] | None,
    backend: Backend | None,
    needs_wrapper: bool,
    field: str,
) -> None:
    spec = template.setdefault("spec", {})
    runner = find_container(spec)
    if runner is None:
        return
    resources = runner.setdefault("resources", {})
    for part in ("limits", "requests"):
        kept = {k: v for k, v in (resources.get(part) or {}).items() if k not in drop_keys}
        if kept:
            resources[part] = kept
        else:
            resources.pop(part, None)
    claims = [c for c in resources.get("claims") or [] if c.get("name") != CLAIM_NAME]
    resources["claims"] = [*claims, {"name": CLAIM_NAME}]
    pod_claims = [c for c in spec.get("resourceClaims") or [] if c.get("name") != CLAIM_NAME]
    spec["resourceClaims"] = [*pod_claims, {"name": CLAIM_NAME, "resourceClaimTemplateName": template_name}]
    node = (spec.get("affinity") or {}).get("nodeAffinity")
    if node is not None:
        _widen_required(node, old_affinity, new_affinity)
        _widen_preferred(node, old_affinity, new_affinity)
        if not node:
            spec["affinity"].pop("nodeAffinity")
            if not spec["affinity"]:
                spec.pop("affinity")
    elif new_affinity and new_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"):
        pref = copy.deepcopy(new_affinity["preferredDuringSchedulingIgnoredDuringExecution"])
        spec.setdefault("affinity", {})["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": pref
        }
    wrapped = (
        backend.device_count_entrypoint(runner.get("command"), list(runner.get("args") or []))
        if backend is not None
        else None
    )
    if wrapped is not None:
        runner["command"], runner["args"] = wrapped
    elif needs_wrapper:
        who = f"backend {backend.name!r}" if backend is not None else "the workload's backend (unknown)"
        raise InvalidFlavor(
            field,
            f"the claimed flavors need different device counts, but {who} cannot start with the count "
            f"the scheduler allocates (no parallelism flag, or the {MODEL_RUNNER} container keeps the "
            "image's entrypoint); claim flavors with one device count",
        )


def render_dra(
    rendered: Rendered,
    service: Service,
    models: Models,
    settings: DraSettings | None,
    *,
    backend: Backend | None = None,
) -> Rendered:
    """``rendered`` (from :func:`llmaz.render.render_service` for ``service``) in DRA mode.

    Unchanged when the workload is not in DRA mode (:func:`uses_dra`), except that the
    ResourceClaimTemplate kind is always listed in ``prune_kinds``, so leaving DRA mode deletes it.

    :raises InvalidFlavor: a flavor has no device class or count, two flavors cannot be told apart,
        or the backend cannot follow different device counts.
    :raises MultiHostUnsupported: a replica spans several pods (not supported in DRA mode).
    """
    prune = (*rendered.prune_kinds, (RESOURCE_API_VERSION, CLAIM_TEMPLATE_KIND))
    claimed = resolve_claims(None, service.spec.model_claims, models)
    flavors = list(claimed.flavors)
    field = claimed.flavors_field
    if not uses_dra(flavors, settings):
        return Rendered(
            objects=rendered.objects,
            prune_kinds=prune,
            config_name=rendered.config_name,
            flavor=rendered.flavor,
            problems=rendered.problems,
        )
    subs = subrequests(flavors, settings, field)
    objects = [copy.deepcopy(o) for o in rendered.objects]
    lws = next(o for o in objects if o.get("kind") == "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    if int(lwt.get("size", 1)) > 1:
        raise MultiHostUnsupported(
            "spec.workloadTemplate.size",
            f"DRA mode serves single-pod replicas only; this workload has {lwt['size']} pods per replica",
        )
    name = lws["metadata"]["name"]
    namespace = lws["metadata"].get("namespace")
    annotations = service.metadata.annotations or {}
    selected = flavor_mod.select_flavor(
        flavors, rendered.flavor or annotations.get(ANNOTATION_SELECTED_FLAVOR), field=field
    )
    drop_keys = {k for f in flavors for k in accelerator_keys(f)}
    counts = {s["count"] for s in subs}
    for part in ("leaderTemplate", "workerTemplate"):
        if part in lwt:
            _to_dra_pod(
                lwt[part],
                template_name=claim_template_name(name),
                drop_keys=drop_keys,
                old_affinity=flavor_mod.node_affinity(flavor_mod.compatible(flavors, selected)),
                new_affinity=flavor_mod.node_affinity(flavors),
                backend=backend,
                needs_wrapper=len(counts) > 1,
                field=field,
            )
    template = claim_template(name, namespace, lws["metadata"].get("labels") or {}, subs)
    return Rendered(
        objects=(template, *objects),
        prune_kinds=prune,
        config_name=rendered.config_name,
        flavor=None,
        problems=rendered.problems,
    )
