"""Integration objects: every change or deletion of a Playground, an inference Service or an
OpenModel queues a reconcile of the integration objects of the namespaces concerned
(:mod:`llmaz.operator.integrations`); start-up reconciles every namespace (so a setting switched
off removes what it created) and a resync of its own repeats that every ``resyncSeconds``. A status
update whose ``IntegrationsReady`` is not the one last computed (another writer put back an older
copy) queues its namespace too, and so does an endpoint picker the operator deployed being
deleted; one gaining or losing its available replica has its workload's ``IntegrationsReady``
written without a pass (its Deployments are watched, by label, while the operator deploys pickers:
:func:`watched_kinds`).

The events reach :func:`workload_event` and :func:`model_event` from the Playground, Service and
OpenModel handlers (:mod:`llmaz.operator.watch`'s) rather than through a watch of their own."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from llmaz.operator.handlers._common import MEMO_KEY, watched
from llmaz.operator.integrations import IntegrationState, mark, queue_refresh, resync
from llmaz.operator.runtime import IDX_PICKERS, Packed, Runtime
from llmaz.operator.watch import WatchedKind, keyed
from llmaz.render.endpoint_picker import COMPONENT, LABEL_COMPONENT

STATE_KEY = "llmaz_integrations"

log = logging.getLogger(__name__)


def state(rt: Runtime) -> IntegrationState:
    """The integrations' state of this operator (made on first use)."""
    if rt.integrations is None:
        rt.integrations = IntegrationState()
    return rt.integrations


def workload_event(rt: Runtime, change: str | None, body: Mapping[str, Any]) -> None:
    """A Playground's or Service's event (``change`` is its type, ``None`` for the listing): queue its
    namespace unless it is a status update that leaves ``IntegrationsReady`` as computed. Never
    raises: a failure here must not keep the calling handler from reconciling the object."""
    meta = body.get("metadata") or {}
    try:
        kept = state(rt)
        if not kept.relevant(change, body) and not kept.condition_lost(body):
            return
        namespace = meta.get("namespace") or ""
        if namespace in kept.quiet and kept.may_need_pass(body):
            kept.quiet.discard(namespace)
        mark(rt, kept, namespace)
    except Exception:
        log.exception("integrations: event of %s/%s not handled", meta.get("namespace"), meta.get("name"))


def model_event(rt: Runtime, change: str | None, body: Mapping[str, Any]) -> None:
    """An OpenModel's event (not the initial listing: the workloads' own listing covers every
    namespace): queue the namespaces of the Playgrounds and Services claiming it. Never raises."""
    if change is None:
        return
    name = str((body.get("metadata") or {}).get("name"))
    try:
        assert rt.indexes is not None
        mark(rt, state(rt), *{ns for _, ns, _ in rt.indexes.dependents("model", name)})
    except Exception:
        log.exception("integrations: event of OpenModel %s not handled", name)


def picker_event(rt: Runtime, change: str | None, body: Mapping[str, Any]) -> None:
    """An endpoint-picker Deployment's event, when its pool's readiness may have changed
    (:meth:`IntegrationState.picker_changed`): a deleted one queues its namespace (to be made
    again), one that gained or lost its available replica queues the write of its workload's
    ``IntegrationsReady`` (:func:`~llmaz.operator.integrations.refresh_pickers`). Never raises."""
    meta = body.get("metadata") or {}
    try:
        kept = state(rt)
        if not kept.picker_changed(change, body):
            return
        namespace = str(meta.get("namespace") or "")
        if change == "DELETED":
            mark(rt, kept, namespace)
        else:
            queue_refresh(rt, kept, (namespace, str(meta.get("name") or "")))
    except Exception:
        log.exception(
            "integrations: event of Deployment %s/%s not handled", meta.get("namespace"), meta.get("name")
        )


def _picker_key(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = body.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _picker_kept(body: Mapping[str, Any]) -> Packed:
    """What the index keeps of a picker Deployment: its name and uid, for a deletion found by
    relisting after a watch gap (its availability is :attr:`IntegrationState.available`'s)."""
    meta = body.get("metadata") or {}
    return Packed(
        {"metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}}
    )


def watched_kinds(rt: Runtime) -> list[WatchedKind]:
    """The endpoint pickers' Deployments (label ``llmaz.io/component=endpoint-picker``), while the
    operator deploys them (``integrations.inferencePool`` with an ``endpointPickerImage``): without
    the watch, a picker becoming available showed in ``IntegrationsReady`` only at the namespace's
    next recheck (30 s or more later), and one deleted or failing later only at the resync."""
    settings = rt.config.integrations
    if not (settings.inference_pool and settings.endpoint_picker_image):
        return []
    return [
        WatchedKind(
            api_version="apps/v1",
            kind="Deployment",
            selector=f"{LABEL_COMPONENT}={COMPONENT}",
            store_id=IDX_PICKERS,
            entries_of=keyed(_picker_key, _picker_kept),
            handler=lambda change, body: picker_event(rt, change, body),
            resource=watched("apps", "deployments"),
        )
    ]


def register(registry: kopf.OperatorRegistry) -> None:
    @kopf.on.startup(registry=registry)
    async def start_resync(memo: kopf.Memo, **_: Any) -> None:
        rt: Runtime = memo[MEMO_KEY]
        rt.spawn(resync(rt, state(rt)))
