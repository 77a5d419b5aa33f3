"""Children (LeaderWorkerSets, ``-lb`` Services, HPAs; a Playground's inference Service is handled
in :mod:`.service`): indexed by their controller's uid. A change of what the operator applied
(spec, labels, annotations) or a deletion reconciles the controller, so a deleted or hand-edited
child is repaired within seconds; a status-only change reconciles nothing, and neither does our
own apply coming back (:meth:`~llmaz.operator.runtime.Runtime.own_echo`). Only objects labelled
``app.kubernetes.io/managed-by=llmaz`` are watched (:data:`CHILD_SELECTOR`, sent to the API server)."""

from __future__ import annotations

from typing import Any

import kopf

from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.operator.engine import enqueue
from llmaz.operator.handlers._common import InputDigests, count_event, event_type, runtime
from llmaz.operator.kube import ObjectKey
from llmaz.operator.runtime import CHILD_KINDS, controller_uid, owned_index_id, pack

OWNER_GROUP = "inference.llmaz.io"
CHILD_SELECTOR = f"{MANAGED_BY}={MANAGER}"
"""Label selector of the watches of LeaderWorkerSets, core Services, HPAs and ResourceClaimTemplates
(:func:`llmaz.operator.handlers.lifecycle.configure`): the API server sends only llmaz's children.
A child whose label someone removes leaves the watch as a deletion, which reconciles its owner, and
the owner's write puts the label back."""


def written_by_users(api_version: str) -> bool:
    """Whether users write objects of this child kind too (inference Services), so its watch takes
    every object and only the handlers filter; the other child kinds are watched with
    :data:`CHILD_SELECTOR`."""
    return api_version.rpartition("/")[0] == OWNER_GROUP


def _owner(body: kopf.Body) -> tuple[str, str] | None:
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller") and str(ref.get("apiVersion", "")).startswith(OWNER_GROUP + "/"):
            return str(ref["kind"]), str(ref["name"])
    return None


def register(registry: kopf.OperatorRegistry) -> None:
    for api_version, kind, plural in CHILD_KINDS:
        if written_by_users(api_version):
            continue  # inference Services: indexed and handled in .service
        group, _, version = api_version.rpartition("/")
        _register_kind(registry, group, version, plural, owned_index_id(api_version, kind), kind)


def _register_kind(  # noqa: PLR0917
    registry: kopf.OperatorRegistry, group: str, version: str, plural: str, index_id: str, kind: str
) -> None:
    labels = {MANAGED_BY: MANAGER}

    @kopf.index(group, version, plural, id=index_id, labels=labels, registry=registry)
    async def by_owner(body: kopf.Body, **_: Any) -> dict[Any, Any]:
        uid = controller_uid(body)
        return {uid: pack(body)} if uid else {}

    inputs = InputDigests()

    @kopf.on.event(group, version, plural, id=f"llmaz-child-{kind}", labels=labels, registry=registry)
    async def child_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **kw: Any) -> None:
        count_event(memo, kw)
        kind_ = event_type(event)
        if not inputs.changed(event, body) or kind_ is None:
            # a status-only change (the LeaderWorkerSet controller updates its status many times
            # while pods start, and keeps going after every Playground is Available: at N = 1000
            # those reconciles were the operator's CPU after converging; issue 15) needs no repair,
            # and the initial listing is reconciled by the owners' own listing
            return
        rt = runtime(memo, kw)
        if kind_ == "DELETED":
            rt.applied.pop(ObjectKey.of(body), None)
            rt.contained.pop(ObjectKey.of(body), None)
        elif rt.own_echo(body):
            return  # our own apply coming back: the owner applied it and has nothing to repair
        owner = _owner(body)
        if owner is not None:
            enqueue(rt, owner[0], body.metadata.namespace or "", owner[1])
