"""Integration objects (gateway routes, InferencePools, PodMonitors) applied per namespace.

The pure :func:`llmaz.render.integrations.render_integrations` decides what each namespace needs from
every served workload in it (Playgrounds, and inference Services no Playground controls); this module
observes what exists, applies what is missing or different with server-side apply, and deletes what
:func:`~llmaz.render.integrations.stale_objects` lists. Objects of one workload carry a controller
owner reference to it; the shared ``AIGatewayRoute`` carries a non-controller owner reference to
every workload with a rule in it, so the garbage collector removes it with the last one. A pass
holds little at once: it renders a slice of the workloads at a time and keeps what it wants as JSON
(:class:`_Wanted`), and judges each listed object as its page arrives (:class:`_Live`).

Reconciles run per namespace, coalesced: events of workloads and OpenModels mark a namespace dirty
and one task drains the dirty set, after the workloads' children are created. An endpoint picker
gaining or losing its available replica only rewrites its workload's condition from the
namespace's last pass (:func:`refresh_pickers`). A kind whose CRD is not installed is skipped (one warning per
process, re-checked at each resync). A workload whose annotations are invalid is left out and gets a
Warning Event (once per distinct message); nothing is written when nothing changed.

Each workload's status carries the outcome as the condition ``IntegrationsReady``
(:func:`llmaz.operator.status.integrations_condition`): ``False`` with the reason and what to do when
an object of it could not be applied (its CRD is missing, the Gateway in the settings is absent, the
endpoint picker of its InferencePool is absent or has no available replica, the API server refused
it, another object holds its name, its annotations are invalid), ``True`` when
every object is in place, absent when no integration applies. It is written only when it changes. A
namespace with a problem is passed over again after a growing delay (from ``min(30 s,
resyncSeconds)`` up to ``resyncSeconds``), so installing a CRD or creating the Gateway clears it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from llmaz.api import Playground, Service
from llmaz.api.inference import CONDITION_INTEGRATIONS_READY
from llmaz.operator.config import Integrations
from llmaz.operator.diff import contains
from llmaz.operator.engine import _digest, _event, models_by_name
from llmaz.operator.kube import KubeError, NameTaken, ObjectKey, resource_path
from llmaz.operator.runtime import (
    Indexes,
    Runtime,
    Snapshot,
    controller_ref,
    held_by_another,
    owner_reference,
    resource_version,
    uid_of,
)
from llmaz.operator.status import (
    REASON_CRD_NOT_INSTALLED,
    REASON_ENDPOINT_PICKER_NOT_FOUND,
    REASON_ENDPOINT_PICKER_NOT_READY,
    REASON_GATEWAY_NOT_FOUND,
    REASON_NAME_CONFLICT,
    REASON_REJECTED,
    IntegrationProblem,
    condition_differs,
    integrations_condition,
    with_condition,
)
from llmaz.render import RenderError
from llmaz.render.endpoint_picker import COMPONENT, LABEL_COMPONENT
from llmaz.render.gateway import GATEWAY_API_VERSION
from llmaz.render.inference_pool import INFERENCE_API_VERSION, RETIRED_KINDS
from llmaz.render.integrations import (
    KIND_SOURCES,
    LIST_SELECTORS,
    OBSERVED_KINDS,
    IntegrationObjects,
    render_integrations,
    stale_objects,
)
from llmaz.render.workload import (
    ANNOTATION_DISABLE_INTEGRATIONS,
    Workload,
    main_model_name,
    served_backend_name,
)

__all__ = ["IntegrationState", "queue_refresh", "reconcile_namespace", "refresh_pickers", "workloads_of"]

log = logging.getLogger("llmaz.operator.integrations")

COALESCE_SECONDS = 0.2
"""Events arriving within this window are handled by one namespace reconcile."""
MAX_PAUSE_SECONDS = 5.0
"""Longest wait between two passes (see :func:`_drain`)."""
MAX_DEFER_SECONDS = 120.0
"""Longest a pass waits for the workloads' child creates to drain (see :func:`_drain`). 30 s was
too short for 1000 Playgrounds created at once: their children take ~35 s here, and the pass that
began at 30 s held the rest back until 82 s."""
FIRST_RECHECK_SECONDS = 30.0
"""First delay before a namespace with an integration problem is passed over again (doubling up to
``resyncSeconds``)."""
ROUTE_KINDS = frozenset({"AIGatewayRoute", "HTTPRoute"})
"""Kinds that attach to the Gateway named in the settings."""
POOL_KIND = (INFERENCE_API_VERSION, "InferencePool")
"""A pool's endpoint picker is checked for ``IntegrationsReady``."""
PICKER_DEPLOYMENT = ("apps/v1", "Deployment")
"""The one Deployment among the integration objects: an endpoint picker."""
PASS = "Namespace"
"""``kind`` of a namespace's integration pass in ``llmaz_reconciles_total`` (and its duration and
errors)."""
REFRESH = "EndpointPicker"
"""``kind`` of a write of endpoint pickers' readiness (:func:`refresh_pickers`) in the same families."""
LIST_PAGE = 250
"""Objects per list request of a pass (see :class:`_Live` for what it keeps of them). Listed whole,
one kind at 1000 Playgrounds was decoded at once, managed fields and all, and Python's allocator kept
the memory the pass's peak had spread over."""
RENDER_SLICE = 100
"""Workloads a pass renders at a time (see :class:`_Wanted`)."""
REFUSED = frozenset({400, 403, 409, 422})
"""HTTP statuses of an apply the API server refused for the object itself (retrying cannot help)."""


@dataclass
class IntegrationState:
    """What the integration reconcile keeps between runs (in kopf's memo)."""

    dirty: set[str] = field(default_factory=set)
    """Namespaces waiting for a reconcile."""
    runner: asyncio.Task[Any] | None = None
    missing: set[tuple[str, str]] = field(default_factory=set)
    """Kinds whose CRD was not found (warned once; re-checked at each resync)."""
    warned: set[tuple[str, str]] = field(default_factory=set)
    reported: dict[str, str] = field(default_factory=dict)
    """Workload uid -> the error message last posted as an Event (posted again only when it changes)."""
    seen: dict[str, Any] = field(default_factory=dict)
    """Workload uid -> what the integrations read of it when last seen (see :meth:`relevant`)."""
    conditions: dict[str, Any] = field(default_factory=dict)
    """Workload uid -> the ``IntegrationsReady`` condition last computed (without its time)."""
    written: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Workload uid -> (digest of the condition written, resourceVersion the API server answered)."""
    rechecks: dict[str, asyncio.TimerHandle] = field(default_factory=dict)
    """Namespace -> a pass scheduled because the last one met a problem."""
    recheck_delay: dict[str, float] = field(default_factory=dict)
    pickers: set[tuple[str, str]] = field(default_factory=set)
    """Endpoint-picker Services ``(namespace, name)`` found to exist (looked up again only at the
    next resync: a pass of 1000 pools would otherwise make 1000 requests)."""
    available: dict[tuple[str, str], bool] = field(default_factory=dict)
    """Endpoint-picker Deployments ``(namespace, name)`` the operator deployed -> whether their watch
    last showed an available replica (see :meth:`picker_changed`)."""
    picker_pools: dict[tuple[str, str], _PickerOf] = field(default_factory=dict)
    """Endpoint-picker Deployments ``(namespace, name)`` the last pass of their namespace deployed ->
    their pool and its workload: a picker's change of availability is then written to that one
    workload's ``IntegrationsReady`` (:func:`refresh_pickers`) instead of passing over the namespace."""
    outcomes: dict[str, _Outcome] = field(default_factory=dict)
    """Namespace -> what its last pass found, per workload (kept current by :func:`refresh_pickers`)."""
    refresh: set[tuple[str, str]] = field(default_factory=set)
    """Endpoint-picker Deployments whose availability changed since it was last written."""
    refresher: asyncio.Task[Any] | None = None
    passing: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Held by a namespace pass and a refresh: never both at once (each writes conditions from the
    outcome the other may be replacing)."""
    quiet: set[str] = field(default_factory=set)
    """Namespaces left with nothing to do while every integration is switched off (see
    :func:`settled_quiet`): their passes are skipped until the next resync or an event that may
    need one (:meth:`may_need_pass`). At N = 1000 Playgrounds in one namespace, a pass parsed every
    Playground each time one was created (5 % of the operator's CPU with every switch off)."""

    def relevant(self, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """Whether a workload event can change integration objects: a deletion, the initial
        listing, or a change of its spec, annotations or owners (status updates are not)."""
        meta = body.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if event_type == "DELETED":
            for kept in (self.seen, self.reported, self.conditions, self.written):
                kept.pop(uid, None)
            return True
        fingerprint = (
            meta.get("generation"),
            dict(meta.get("annotations") or {}),
            list(meta.get("ownerReferences") or []),
            bool(meta.get("deletionTimestamp")),
        )
        if event_type is not None and self.seen.get(uid) == fingerprint:
            return False
        self.seen[uid] = fingerprint
        return True

    def picker_changed(self, event_type: str | None, body: Mapping[str, Any]) -> bool:
        """Whether an event of an endpoint-picker Deployment can change its pool's
        ``IntegrationsReady``: it was deleted (to be made again), or it gained or lost its available
        replica. Not its creation (the pass that made it said it is not ready yet), nor the listing
        at start-up (every namespace gets a pass then), nor a change that leaves it as it was."""
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if event_type == "DELETED":
            self.available.pop(key, None)
            return True
        now = picker_available(body)
        before = self.available.get(key)
        self.available[key] = now
        if event_type is None or (before is None and not now):
            return False
        return before != now

    def may_need_pass(self, body: Mapping[str, Any]) -> bool:
        """Whether a workload can need a pass although every switch is off: its opt-out annotation
        may be invalid (reported as ``IntegrationsReady=False``), or it carries that condition from
        when a switch was on (to be removed)."""
        meta = body.get("metadata") or {}
        if ANNOTATION_DISABLE_INTEGRATIONS in (meta.get("annotations") or {}):
            return True
        return any(
            c.get("type") == CONDITION_INTEGRATIONS_READY
            for c in (body.get("status") or {}).get("conditions") or []
        )

    def condition_lost(self, body: Mapping[str, Any]) -> bool:
        """Whether the workload's ``IntegrationsReady`` is not the one last computed: another writer
        replaced the status with an older copy, or our write met a newer version (HTTP 409)."""
        uid = str((body.get("metadata") or {}).get("uid", ""))
        if uid not in self.conditions:
            return False
        return condition_differs(body.get("status"), self.conditions[uid], CONDITION_INTEGRATIONS_READY)


# ------------------------------------------------------------------------------ workloads


def _parse(kind: type[Playground] | type[Service], snap: Snapshot) -> Playground | Service | None:
    try:
        return kind.model_validate({k: v for k, v in snap.items() if k != "status"})
    except ValidationError:
        return None  # an invalid object is reported by the workload reconcile


def workloads_of(
    rt: Runtime, idx: Indexes, namespace: str
) -> tuple[list[tuple[Snapshot, Workload]], list[tuple[Snapshot, RenderError]]]:
    """Served workloads of ``namespace`` with their snapshots, and those whose annotations are invalid.

    A Playground's own inference Service is not a workload of its own (the Playground is); a
    workload whose model does not exist (yet) is left out until the model appears.
    """
    models = models_by_name(rt, idx)
    candidates: list[tuple[Snapshot, Playground | Service]] = []
    for snap in idx.playgrounds_in(namespace):
        parsed = _parse(Playground, snap)
        if parsed is not None:
            candidates.append((snap, parsed))
    for snap in idx.services_in(namespace):
        refs = (snap.get("metadata") or {}).get("ownerReferences") or []
        if any(r.get("controller") and r.get("kind") == "Playground" for r in refs):
            continue
        parsed = _parse(Service, snap)
        if parsed is not None:
            candidates.append((snap, parsed))
    good: list[tuple[Snapshot, Workload]] = []
    bad: list[tuple[Snapshot, RenderError]] = []
    for snap, owner in candidates:
        meta = snap.get("metadata") or {}
        if (meta.get("namespace") or "") != namespace or meta.get("deletionTimestamp"):
            continue
        model = models.get(main_model_name(owner) or "")
        if model is None:
            continue
        backend_name = served_backend_name(owner)
        backend = rt.plugins.get_backend(backend_name) if backend_name else None
        w = Workload.of(owner, model, backend=backend)
        try:
            w.disabled()
        except RenderError as err:
            bad.append((snap, err))
            continue
        good.append((snap, w))
    return good, bad


# ------------------------------------------------------------------------------ API calls


@dataclass(frozen=True, slots=True)
class _Live:
    """What a pass needs of one listed object, judged when it is listed against the object the pass
    wants under its name: the listed object itself is not kept. At 1000 Playgrounds with every
    integration on, the 8000 listed objects were held as dicts until the pass ended (~26 MB before
    the API server's defaults), and Python's allocator kept most of what that peak had spread over
    (steady RSS 170 MB)."""

    uid: str
    held: str | None = None
    """Why another holds the name (:func:`held_by_another`), ``None`` when it is ours to apply."""
    in_place: bool = False
    """Whether it holds every field of the wanted object (nothing to apply)."""
    available: bool = False
    """An endpoint picker's Deployment with an available replica (:func:`picker_available`)."""


def _list(
    rt: Runtime,
    state: IntegrationState,
    api_version: str,
    kind: str,
    namespace: str,
    *,
    wanted: Mapping[ObjectKey, bytes],
    unwanted: list[dict[str, Any]],
) -> dict[ObjectKey, _Live]:
    """The objects of one kind in ``namespace``, ours and others' (so a name someone else holds is
    seen before an apply would take it over), each judged against the object ``wanted`` under its
    name; those not wanted are appended to ``unwanted`` as far as :func:`stale_objects` reads them.
    Nothing (and the kind remembered as missing) when its CRD is not installed (warned about by
    :func:`_missing` once an object of it is wanted). Read ``LIST_PAGE`` objects at a time."""
    if (api_version, kind) in state.missing:
        return {}
    query = {"limit": str(LIST_PAGE)}
    selector = LIST_SELECTORS.get((api_version, kind))
    if selector is not None:
        query["labelSelector"] = selector
    picker = (api_version, kind) == PICKER_DEPLOYMENT
    found: dict[ObjectKey, _Live] = {}
    while True:
        try:
            answer = rt.kube.request("GET", resource_path(api_version, kind, namespace), query=query) or {}
        except KubeError as err:
            if err.status != 404:
                raise
            state.missing.add((api_version, kind))
            return {}
        for item in answer.get("items") or []:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            key = ObjectKey.of(item)
            meta = item.get("metadata") or {}
            raw = wanted.get(key)
            if raw is None:
                labels = meta.get("labels") or {}
                unwanted.append(
                    {
                        "apiVersion": api_version,
                        "kind": kind,
                        "metadata": {"name": key.name, "namespace": key.namespace, "labels": labels},
                    }
                )
                found[key] = _Live(uid_of(item))
                continue
            obj = orjson.loads(raw)
            held = held_by_another(item, controller_ref(obj))
            found[key] = _Live(
                uid_of(item),
                held=held,
                in_place=held is None and contains(item, obj),
                available=picker and picker_available(item),
            )
        more = (answer.get("metadata") or {}).get("continue")
        if not more:
            return found
        query["continue"] = more


def _shared_reference(owner: Snapshot) -> dict[str, Any]:
    ref = owner_reference(owner)
    ref["controller"] = False
    ref["blockOwnerDeletion"] = False
    return ref


def _with_owners(obj: Mapping[str, Any], refs: list[dict[str, Any]]) -> dict[str, Any]:
    desired = dict(obj)
    meta = dict(desired.get("metadata") or {})
    meta["ownerReferences"] = refs
    desired["metadata"] = meta
    return desired


def _desired(result: IntegrationObjects, owners: Mapping[tuple[str, str], Snapshot]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in sorted(result.owned):
        ref = owner_reference(owners[key])
        out += [_with_owners(obj, [ref]) for obj in result.owned[key]]
    for route, names in zip(result.shared, result.shared_owners, strict=True):
        ns = str((route.get("metadata") or {}).get("namespace") or "")
        refs = [_shared_reference(owners[(ns, n)]) for n in sorted(names)]
        out.append(_with_owners(route, refs))
    return out


@dataclass
class _Wanted:
    """The objects a pass wants, each kept as its JSON until it is compared and applied, by owner.

    A namespace of 1000 Playgrounds with every integration on wants 8000 objects, ~15 MB as dicts
    held for the whole pass (a minute there) while the watches' events allocated around them;
    Python's allocator then kept most of the memory that peak had spread over. Rendered
    :data:`RENDER_SLICE` workloads at a time and kept as JSON, they take a third of that, and the
    dicts of one slice are gone before the next is rendered."""

    objects: dict[ObjectKey, bytes] = field(default_factory=dict)
    groups: dict[tuple[WorkloadKey, ...], list[ObjectKey]] = field(default_factory=dict)
    """Owners -> their objects in the order rendered (a picker's ServiceAccount before its
    Deployment)."""

    def add(self, objs: list[dict[str, Any]]) -> None:
        for obj in objs:
            key = ObjectKey.of(obj)
            self.objects[key] = orjson.dumps(obj)
            self.groups.setdefault(tuple(_owners(obj)), []).append(key)

    def keys(self) -> set[tuple[str, str, str, str]]:
        """The wanted objects' keys as :func:`~llmaz.render.integrations.stale_objects` takes them."""
        return {(k.api_version, k.kind, k.namespace, k.name) for k in self.objects}


def _render(
    rt: Runtime, good: list[tuple[Snapshot, Workload]], owners: Mapping[WorkloadKey, Snapshot]
) -> _Wanted:
    """What ``good`` (one namespace's workloads, whose snapshots are ``owners``) want, rendered a
    slice at a time for what each owns, then all together for the routes they share.

    :raises RenderError: a workload's Inference Extension annotation is invalid.
    """
    options = rt.config.integrations.render_options()
    workloads = sorted((w for _, w in good), key=lambda w: (w.namespace, w.name))
    wanted = _Wanted()
    for start in range(0, len(workloads), RENDER_SLICE):
        part = render_integrations(workloads[start : start + RENDER_SLICE], shared=False, **options)
        wanted.add(_desired(part, owners))
    wanted.add(_desired(render_integrations(workloads, owned=False, **options), owners))
    return wanted


async def _report(rt: Runtime, state: IntegrationState, owner: Snapshot, err: RenderError) -> None:
    """One Warning Event on the workload per distinct error."""
    uid = uid_of(owner)
    message = str(err)
    if state.reported.get(uid) == message:
        return
    log.warning("integrations of %s %s: %s", owner.get("kind"), owner["metadata"]["name"], message)
    try:
        await rt.kube.post_event_async(_event(rt, owner, err.condition_reason, message, warning=True))
    except KubeError as exc:
        log.warning("could not post Event for %s: %s", owner["metadata"]["name"], exc)
        return
    state.reported[uid] = message


WorkloadKey = tuple[str, str]


@dataclass
class _Outcome:
    """What one namespace pass achieved, per workload ``(namespace, name)``."""

    applied: dict[WorkloadKey, set[str]] = field(default_factory=dict)
    problems: dict[WorkloadKey, set[IntegrationProblem]] = field(default_factory=dict)
    pickers: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """Endpoint-picker Deployments ``(namespace, name)`` in place -> the InferencePool they serve."""

    def ok(self, owners: list[WorkloadKey], kind: str) -> None:
        for owner in owners:
            self.applied.setdefault(owner, set()).add(kind)

    def fail(self, owners: list[WorkloadKey], problem: IntegrationProblem) -> None:
        for owner in owners:
            self.problems.setdefault(owner, set()).add(problem)


@dataclass(frozen=True)
class _PickerOf:
    """A deployed endpoint picker's pool, and its workload as the pass that rendered the pool saw it
    (its identity and generation only: a refresh writes over the watch's copy of it)."""

    workload: Snapshot
    pool: dict[str, Any]

    @classmethod
    def of(cls, owner: Snapshot, pool: dict[str, Any]) -> _PickerOf:
        meta = owner.get("metadata") or {}
        kept = {k: meta[k] for k in ("name", "namespace", "uid", "generation") if k in meta}
        return cls({"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "metadata": kept}, pool)


def _owners(obj: Mapping[str, Any]) -> list[WorkloadKey]:
    meta = obj.get("metadata") or {}
    return [(str(meta.get("namespace") or ""), str(r["name"])) for r in meta.get("ownerReferences") or []]


def _missing(state: IntegrationState, api_version: str, kind: str) -> IntegrationProblem:
    """The problem of a wanted object whose CRD is not installed; the first time for its kind, a
    warning in the log (a kind no switched-on integration wants is not worth one: every pass lists
    all of them, to find what a switch turned off left behind)."""
    if (api_version, kind) not in state.warned:
        state.warned.add((api_version, kind))
        log.warning(
            "%s (%s) is not installed: integration objects of this kind are skipped", kind, api_version
        )
    return missing_crd(api_version, kind)


def missing_crd(api_version: str, kind: str) -> IntegrationProblem:
    """The problem of an object whose kind the cluster does not know, naming the fix."""
    integration, project = KIND_SOURCES[(api_version, kind)]
    setting = Integrations.setting_of(integration)
    return IntegrationProblem(
        REASON_CRD_NOT_INSTALLED,
        f"{kind} ({api_version}) is not installed in the cluster: install the {project} CRDs, or "
        f"switch integrations.{setting} off in the operator configuration",
    )


def _gateway_missing(rt: Runtime, namespace: str) -> IntegrationProblem | None:
    """The problem of routes whose Gateway (``integrations.gatewayName``) does not exist, if so."""
    settings = rt.config.integrations
    gw_namespace = settings.gateway_namespace or namespace
    path = resource_path(GATEWAY_API_VERSION, "Gateway", gw_namespace, settings.gateway_name)
    try:
        rt.kube.request("GET", path)
    except KubeError as err:
        if err.status != 404:
            raise
        return IntegrationProblem(
            REASON_GATEWAY_NOT_FOUND,
            f"Gateway {gw_namespace}/{settings.gateway_name} does not exist, so the routes attach to "
            "nothing: create it, or set integrations.gatewayName (and gatewayNamespace) in the "
            "operator configuration to an existing Gateway",
        )
    return None


def _name_conflict(key: ObjectKey, why: str) -> IntegrationProblem:
    """The problem of an object whose name someone else's object holds (``why``: whose it is)."""
    log.warning("%s %s/%s belongs to someone else; left alone", key.kind, key.namespace, key.name)
    return IntegrationProblem(
        REASON_NAME_CONFLICT,
        f"{key.kind} {key.namespace}/{key.name} exists and {why}: delete or rename that one, "
        "or rename this one",
    )


def _meanwhile(ref: Mapping[str, Any]) -> str:
    """What a pool's requests meet while its endpoint picker (``ref``) does not answer."""
    if ref.get("failureMode") == "FailOpen":
        return "the gateway sends the model's requests to any pod of the pool (failureMode FailOpen)"
    return "the gateway refuses every request for the model (failureMode FailClose)"


def _pool_and_picker(pool: Mapping[str, Any]) -> tuple[str, str, str, Mapping[str, Any]]:
    """``(namespace, pool name, endpoint picker name, endpointPickerRef)`` of an InferencePool."""
    meta = pool.get("metadata") or {}
    ref = (pool.get("spec") or {}).get("endpointPickerRef") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name")), str(ref.get("name")), ref


def _pool_brief(pool: Mapping[str, Any]) -> dict[str, Any]:
    """What a refresh reads of an InferencePool (its name, owner and ``endpointPickerRef``), kept
    past its pass instead of the whole rendered pool."""
    meta = pool.get("metadata") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "ownerReferences": [{"name": r["name"]} for r in meta.get("ownerReferences") or []],
        },
        "spec": {"endpointPickerRef": dict((pool.get("spec") or {}).get("endpointPickerRef") or {})},
    }


def picker_available(deployment: Mapping[str, Any] | None) -> bool:
    """Whether an endpoint picker's Deployment has an available replica."""
    return int(((deployment or {}).get("status") or {}).get("availableReplicas") or 0) >= 1


def _endpoint_picker_unready(available: bool, pool: Mapping[str, Any]) -> IntegrationProblem | None:
    """The problem of a pool whose endpoint picker, deployed by the operator, has no available
    replica (``available``: whether it has one), if so."""
    if available:
        return None
    namespace, name, picker, ref = _pool_and_picker(pool)
    return IntegrationProblem(
        REASON_ENDPOINT_PICKER_NOT_READY,
        f"Deployment {namespace}/{picker}, the endpoint picker of InferencePool {namespace}/{name}, "
        f"has no available replica yet, so {_meanwhile(ref)}: if this lasts, "
        f"kubectl describe deployment -n {namespace} {picker} says why",
    )


def _endpoint_picker_missing(
    rt: Runtime, state: IntegrationState, pool: Mapping[str, Any]
) -> IntegrationProblem | None:
    """The problem of an ``InferencePool`` whose endpoint-picker Service does not exist, if so."""
    namespace, name, service, ref = _pool_and_picker(pool)
    if (namespace, service) in state.pickers:
        return None
    try:
        rt.kube.request("GET", resource_path("v1", "Service", namespace, service))
    except KubeError as err:
        if err.status != 404:
            raise
        return IntegrationProblem(
            REASON_ENDPOINT_PICKER_NOT_FOUND,
            f"Service {namespace}/{service}, the endpoint picker of InferencePool {namespace}/{name}, "
            f"does not exist, so {_meanwhile(ref)}: deploy the Inference Extension's endpoint picker for the "
            f"pool (--pool-name {name}) behind a Service named {service}, or switch "
            "integrations.inferencePool off in the operator configuration",
        )
    state.pickers.add((namespace, service))
    return None


async def _apply_one(
    rt: Runtime, state: IntegrationState, obj: dict[str, Any], current: _Live | None, outcome: _Outcome
) -> bool:
    """Apply ``obj`` unless ``current`` (what the list found under its name, or ``None``) holds it
    already; whether it is in place. A problem is recorded in ``outcome`` for its owners; an error
    that may pass is raised."""
    key = ObjectKey.of(obj)
    owners = _owners(obj)
    if (key.api_version, key.kind) in state.missing:
        outcome.fail(owners, _missing(state, key.api_version, key.kind))
        return False
    if current is not None and current.held is not None:
        outcome.fail(owners, _name_conflict(key, current.held))
        return False
    if current is not None and current.in_place:
        return True
    try:
        if current is None and (key.api_version, key.kind) in LIST_SELECTORS:
            # not listed, yet maybe someone else's: created, applied only if ours after all
            await rt.kube.create_or_apply_async(
                obj, exists=False, held=functools.partial(held_by_another, owner=controller_ref(obj))
            )
        else:
            await rt.kube.apply_async(obj)
    except NameTaken as err:  # not listed (a kind listed by label), found by the create
        outcome.fail(owners, _name_conflict(key, err.why))
        return False
    except KubeError as err:
        if err.status == 404:
            state.missing.add((key.api_version, key.kind))  # CRD removed since the list
            outcome.fail(owners, _missing(state, key.api_version, key.kind))
            return False
        if err.status not in REFUSED:
            raise
        log.warning("the API server refused %s %s/%s: %s", key.kind, key.namespace, key.name, err.message)
        outcome.fail(
            owners,
            IntegrationProblem(
                REASON_REJECTED,
                f"the API server refused {key.kind} {key.namespace}/{key.name}: {err.message}",
            ),
        )
        return False
    log.info("applied %s %s/%s", key.kind, key.namespace, key.name)
    return True


async def _apply_all(
    rt: Runtime,
    state: IntegrationState,
    namespace: str,
    wanted: _Wanted,
    live: Mapping[ObjectKey, _Live],
) -> _Outcome:
    """Apply what differs; record per workload which kinds are in place and what went wrong.

    The objects of different owners are applied side by side (at most ``workers`` at once), those
    of one owner in order (a picker's ServiceAccount before its Deployment): one after the other,
    100 Playgrounds' 800 objects took 32 s (the benchmark with integrations on)."""
    outcome = _Outcome()
    routed: list[WorkloadKey] = []
    pools: list[dict[str, Any]] = []
    pickers: dict[tuple[WorkloadKey, ...], ObjectKey] = {}
    slots = asyncio.Semaphore(max(1, rt.config.workers))
    no_pools = POOL_KIND in state.missing  # no pool can exist: a picker would only crash-loop without it

    async def apply_group(keys: list[ObjectKey]) -> None:
        async with slots:
            for key in keys:
                obj = orjson.loads(wanted.objects[key])
                if (
                    no_pools
                    and ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_COMPONENT) == COMPONENT
                ):
                    continue
                if not await _apply_one(rt, state, obj, live.get(key), outcome):
                    continue
                owners = _owners(obj)
                outcome.ok(owners, key.kind)
                if key.kind in ROUTE_KINDS:
                    routed.extend(owners)
                if (key.api_version, key.kind) == POOL_KIND:
                    pools.append(_pool_brief(obj))
                elif (key.api_version, key.kind) == PICKER_DEPLOYMENT:
                    pickers[tuple(owners)] = key

    failed = [
        r
        for r in await asyncio.gather(
            *(apply_group(g) for g in wanted.groups.values()), return_exceptions=True
        )
        if isinstance(r, BaseException)
    ]
    if failed:
        raise failed[0]  # the pass is retried (every group ran to its end or its error)
    for pool in pools:
        deployed = pickers.get(tuple(_owners(pool)))
        if deployed is not None:  # ours: ready once a replica is available (as its watch last said)
            picker = (deployed.namespace, deployed.name)
            outcome.pickers[picker] = pool
            available = state.available.get(picker)
            if available is None:  # not watched, or not seen yet: as listed
                listed = live.get(deployed)
                available = listed is not None and listed.available
            problem = _endpoint_picker_unready(available, pool)
        else:  # the user's (or ours could not be applied): its Service must exist
            problem = await asyncio.to_thread(_endpoint_picker_missing, rt, state, pool)
        if problem is not None:
            outcome.fail(_owners(pool), problem)
    if routed:
        problem = await asyncio.to_thread(_gateway_missing, rt, namespace)
        if problem is not None:
            outcome.fail(routed, problem)
    return outcome


def _generation(snap: Snapshot) -> int:
    return int((snap.get("metadata") or {}).get("generation") or 0)


def _latest(rt: Runtime, snap: Snapshot) -> Snapshot | None:
    """``snap``'s workload as the watch shows it now (``snap`` itself without indexes; ``None``
    when it is gone or another object holds its name now)."""
    idx = rt.indexes
    if idx is None:
        return snap
    meta = snap.get("metadata") or {}
    find = idx.playground if snap.get("kind") == "Playground" else idx.service
    now = find(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    if now is None or uid_of(now) != uid_of(snap):
        return None
    return now


async def _write_conditions(
    rt: Runtime, state: IntegrationState, snaps: list[Snapshot], outcome: _Outcome
) -> None:
    """Patch each workload's ``IntegrationsReady`` where it differs from what this pass found.

    Each is compared with and written over the workload as the watch shows it now, not as the pass
    began: a pass takes seconds (lists, applies) in which the workloads' own reconciles write their
    status, and a write on the older resourceVersion only met a conflict (HTTP 409; 57 for 100
    Playgrounds created together, in the benchmark with integrations on). One deleted meanwhile is
    skipped, and so is one whose spec changed (the pass its change queued writes its condition)."""
    for listed in snaps:
        snap = _latest(rt, listed)
        if snap is None or _generation(snap) != _generation(listed):
            continue
        meta = snap.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name")))
        uid = uid_of(snap)
        cond = integrations_condition(
            outcome.applied.get(key, set()),
            outcome.problems.get(key, set()),
            _generation(snap),
            snap.get("status"),
            rt.clock(),
        )
        state.conditions[uid] = (
            None if cond is None else {k: v for k, v in cond.items() if k != "lastTransitionTime"}
        )
        if not condition_differs(snap.get("status"), cond, CONDITION_INTEGRATIONS_READY):
            continue
        digest = _digest(state.conditions[uid])
        cached = state.written.get(uid)
        if cached is not None and cached[0] == digest and resource_version(snap) < cached[1]:
            continue  # our own write, not yet seen by the watch
        conditions = with_condition(snap.get("status"), cond, CONDITION_INTEGRATIONS_READY)
        try:
            answer = await rt.kube.patch_status_async(
                snap["apiVersion"],
                snap["kind"],
                key[0],
                key[1],
                {"conditions": conditions},
                str(meta.get("resourceVersion") or ""),
            )
        except KubeError as err:
            if err.status not in {404, 409}:
                raise
            # deleted, or changed since it was read: its next event is compared with what we want
            log.info("%s %s/%s changed before its IntegrationsReady was written", snap["kind"], *key)
            continue
        state.written[uid] = (digest, resource_version(answer))
        if cond is not None:
            log.info(
                "%s %s/%s: IntegrationsReady=%s (%s)", snap["kind"], *key, cond["status"], cond["reason"]
            )


async def reconcile_namespace(rt: Runtime, state: IntegrationState, idx: Indexes, namespace: str) -> None:
    """Make the integration objects of ``namespace`` what the workloads and the settings ask for,
    and each workload's ``IntegrationsReady`` condition say how that went."""
    good, bad = workloads_of(rt, idx, namespace)
    snaps = [s for s, _ in good] + [s for s, _ in bad]
    outcome = _Outcome()
    for snap, err in bad:
        await _report(rt, state, snap, err)
        outcome.fail(
            [(namespace, str(snap["metadata"]["name"]))], IntegrationProblem(err.condition_reason, str(err))
        )
    bad_uids = {uid_of(s) for s, _ in bad}
    for snap, _ in good:
        uid = uid_of(snap)
        if uid not in bad_uids:
            state.reported.pop(uid, None)
    owners = {(w.namespace, w.name): snap for snap, w in good}
    try:
        wanted = _render(rt, good, owners)
    except RenderError as err:
        # a bad Inference Extension annotation: report it and keep what exists
        for snap, w in good:
            await _report(rt, state, snap, err)
            outcome.fail([(w.namespace, w.name)], IntegrationProblem(err.condition_reason, str(err)))
        await _write_conditions(rt, state, snaps, outcome)
        _schedule_recheck(rt, state, namespace, problems=True)
        _keep(state, namespace, None, {})
        return
    live: dict[ObjectKey, _Live] = {}
    unwanted: list[dict[str, Any]] = []
    for api_version, kind in OBSERVED_KINDS:
        listed = await asyncio.to_thread(
            _list, rt, state, api_version, kind, namespace, wanted=wanted.objects, unwanted=unwanted
        )
        live.update(listed)
    applied = await _apply_all(rt, state, namespace, wanted, live)
    outcome.applied.update(applied.applied)
    outcome.pickers.update(applied.pickers)
    for owner, found in applied.problems.items():
        outcome.problems.setdefault(owner, set()).update(found)
    for stale in stale_objects(unwanted, wanted.keys()):
        key = ObjectKey(*stale)
        if (key.api_version, key.kind) in RETIRED_KINDS and POOL_KIND in state.missing:
            continue  # the v0.5 pool still serves while the v1 one cannot be made: kept until it can
        await rt.kube.delete_async(key, live[key].uid)
        log.info("deleted %s %s/%s (no longer wanted)", key.kind, namespace, key.name)
    await _write_conditions(rt, state, snaps, outcome)
    _keep(state, namespace, outcome, owners)
    _schedule_recheck(rt, state, namespace, problems=bool(outcome.problems))
    if settled_quiet(rt, state, snaps, bool(live), outcome):
        state.quiet.add(namespace)


def _keep(
    state: IntegrationState,
    namespace: str,
    outcome: _Outcome | None,
    owners: Mapping[WorkloadKey, Snapshot],
) -> None:
    """Remember what a pass of ``namespace`` found, for :func:`refresh_pickers` (``None``: nothing
    to refresh from; a picker's change then queues a pass)."""
    for picker in [k for k in state.picker_pools if k[0] == namespace]:
        del state.picker_pools[picker]
    if outcome is None:
        state.outcomes.pop(namespace, None)
        return
    state.outcomes[namespace] = outcome
    for picker, pool in outcome.pickers.items():
        (owner,) = _owners(pool)
        state.picker_pools[picker] = _PickerOf.of(owners[owner], pool)


async def refresh_pickers(rt: Runtime, state: IntegrationState) -> None:
    """Write the ``IntegrationsReady`` of the workloads whose endpoint picker gained or lost its
    available replica since (:attr:`IntegrationState.refresh`), from their namespace's last pass
    with only the picker's readiness changed: no listing, no apply. With 500 Playgrounds in one
    namespace, each picker becoming available cost a pass over all of them (listing ~4000
    integration objects), 40 passes in all. A picker the last pass did not deploy, or whose
    namespace has a pass queued, gets a pass instead."""
    keys, state.refresh = state.refresh, set()
    idx = rt.indexes
    touched: dict[str, list[Snapshot]] = {}
    for picker in sorted(keys):
        namespace = picker[0]
        kept = state.picker_pools.get(picker)
        outcome = state.outcomes.get(namespace)
        if namespace in state.dirty:
            continue  # the queued pass reads it
        if kept is None or outcome is None or idx is None:
            mark(rt, state, namespace)
            continue
        (owner,) = _owners(kept.pool)
        problems = {
            p for p in outcome.problems.get(owner, set()) if p.reason != REASON_ENDPOINT_PICKER_NOT_READY
        }
        unready = _endpoint_picker_unready(state.available.get(picker, False), kept.pool)
        if unready is not None:
            problems.add(unready)
        if problems:
            outcome.problems[owner] = problems
        else:
            outcome.problems.pop(owner, None)
        touched.setdefault(namespace, []).append(kept.workload)
    for namespace, workloads in touched.items():
        outcome = state.outcomes[namespace]
        try:
            with rt.metrics.reconciling(REFRESH):
                await _write_conditions(rt, state, workloads, outcome)
        except (KubeError, OSError) as err:
            why = err.brief if isinstance(err, KubeError) else err
            log.warning("pickers' readiness in namespace %s not written (a pass follows): %s", namespace, why)
            mark(rt, state, namespace)
            continue
        _schedule_recheck(rt, state, namespace, problems=bool(outcome.problems))


def settled_quiet(
    rt: Runtime, state: IntegrationState, snaps: list[Snapshot], observed: bool, outcome: _Outcome
) -> bool:
    """Whether a namespace pass left nothing for the next one to do: every switch is off, no
    integration object of any kind exists there (``observed``: whether the pass listed any),
    nothing went wrong and no workload carries (or was last given) an ``IntegrationsReady``
    condition."""
    if rt.config.integrations.any_on or observed or outcome.problems or outcome.applied:
        return False
    return not any(state.conditions.get(uid_of(s)) is not None or state.may_need_pass(s) for s in snaps)


# ------------------------------------------------------------------------------ scheduling


def namespaces_of(idx: Indexes) -> set[str]:
    """Every namespace holding a Playground or inference Service."""
    return {
        str((s.get("metadata") or {}).get("namespace") or "") for s in [*idx.playgrounds(), *idx.services()]
    }


def mark(rt: Runtime, state: IntegrationState, *namespaces: str) -> None:
    """Queue namespace reconciles; one background task drains the queue (coalescing bursts)."""
    state.dirty.update(n for n in namespaces if n and n not in state.quiet)
    if state.runner is None or state.runner.done():
        state.runner = asyncio.ensure_future(_drain(rt, state))
        rt.tasks.add(state.runner)
        state.runner.add_done_callback(rt.tasks.discard)


def _schedule_recheck(rt: Runtime, state: IntegrationState, namespace: str, *, problems: bool) -> None:
    """After a pass with problems, pass over ``namespace`` again later (forgetting which CRDs were
    missing), with a delay that doubles up to ``resyncSeconds``; a clean pass resets the delay."""
    if not problems:
        state.recheck_delay.pop(namespace, None)
        handle = state.rechecks.pop(namespace, None)
        if handle is not None:
            handle.cancel()
        return
    if namespace in state.rechecks:
        return
    ceiling = float(rt.config.resync_seconds)
    delay = min(state.recheck_delay.get(namespace, min(FIRST_RECHECK_SECONDS, ceiling)), ceiling)
    state.recheck_delay[namespace] = min(delay * 2, ceiling)

    def fire() -> None:
        state.rechecks.pop(namespace, None)
        state.missing.clear()
        mark(rt, state, namespace)

    state.rechecks[namespace] = asyncio.get_running_loop().call_later(delay, fire)


async def _drain(rt: Runtime, state: IntegrationState) -> None:
    """Pass over the dirty namespaces one at a time until none is left. Before each pass, wait for
    the events of the next :data:`COALESCE_SECONDS`, and at least as long as the last pass took (at
    most :data:`MAX_PAUSE_SECONDS`): a pass lists every integration kind of its namespace, so while
    events keep coming (100 endpoint pickers becoming available over 20 s) back-to-back passes of a
    large namespace would keep a CPU busy; this way they take at most half of one.

    Then, while the workloads' children are being created, wait for that (at most
    :data:`MAX_DEFER_SECONDS`): the pods serve before the routes to them matter, and a pass applying
    thousands of integration objects meanwhile held back the children on the same API server (500
    Playgrounds: every child after 1.57 times the bulk client's time, against 1.04 without the
    integrations)."""
    failures = 0
    took = 0.0
    while state.dirty:
        await asyncio.sleep(max(COALESCE_SECONDS, min(took, MAX_PAUSE_SECONDS)))
        polls = round(MAX_DEFER_SECONDS / COALESCE_SECONDS)
        while rt.creates and polls > 0:
            await asyncio.sleep(COALESCE_SECONDS)
            polls -= 1
        namespace = sorted(state.dirty)[0]
        state.dirty.discard(namespace)
        idx = rt.indexes
        if idx is None:
            continue
        started = time.monotonic()
        try:
            async with state.passing:
                with rt.metrics.reconciling(PASS):
                    await reconcile_namespace(rt, state, idx, namespace)
        except (KubeError, OSError) as err:
            took = time.monotonic() - started
            failures += 1
            delay = min(60.0, 2.0**failures)
            why = err.brief if isinstance(err, KubeError) else err
            log.warning("integrations of namespace %s failed (retry in %.0fs): %s", namespace, delay, why)
            state.dirty.add(namespace)
            await asyncio.sleep(delay)
        else:
            took = time.monotonic() - started
            failures = 0


def queue_refresh(rt: Runtime, state: IntegrationState, picker: tuple[str, str]) -> None:
    """Queue the write of an endpoint picker's readiness (:func:`refresh_pickers`); one background
    task writes them, :data:`COALESCE_SECONDS` after the first, and never during a namespace pass."""
    state.refresh.add(picker)
    if state.refresher is None or state.refresher.done():
        state.refresher = asyncio.ensure_future(_refresh_queued(rt, state))
        rt.tasks.add(state.refresher)
        state.refresher.add_done_callback(rt.tasks.discard)


async def _refresh_queued(rt: Runtime, state: IntegrationState) -> None:
    while state.refresh:
        await asyncio.sleep(COALESCE_SECONDS)
        async with state.passing:
            await refresh_pickers(rt, state)


async def resync(rt: Runtime, state: IntegrationState) -> None:
    """Every ``resyncSeconds``: forget which CRDs were missing and reconcile every namespace."""
    while True:
        await asyncio.sleep(rt.config.resync_seconds)
        state.missing.clear()
        state.pickers.clear()
        state.quiet.clear()
        idx = rt.indexes
        if idx is not None:
            mark(rt, state, *namespaces_of(idx))
