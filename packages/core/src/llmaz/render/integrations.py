"""Every integration object for a set of workloads, switched on per kind and off per workload.

:func:`render_integrations` is the one render the operator uses: it gets served workloads
(Playgrounds and inference Services) and the switches from ``OperatorConfig.integrations``, and
returns the objects owned by one workload and the shared ``AIGatewayRoute`` objects (per Gateway
and namespace, each owned by every workload that has a rule in it); the operator renders what a
namespace's workloads own a slice of them at a time, and what they share once. A kind switched
off renders nothing, so objects of :data:`MANAGED_KINDS` the operator finds but the result lacks
are stale.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.render.endpoint_picker import (
    COMPONENT,
    ENDPOINT_PICKER_IMAGE,
    LABEL_COMPONENT,
    render_endpoint_picker,
)
from llmaz.render.gateway import (
    AIGATEWAY_API_VERSION,
    ENVOY_GATEWAY_API_VERSION,
    GATEWAY_API_VERSION,
    GatewayRef,
    render_ai_gateway_routes,
    render_ai_service_backend,
    render_http_route,
)
from llmaz.render.inference_pool import (
    DEFAULT_ENDPOINT_PICKER_PORT,
    INFERENCE_API_VERSION,
    INFERENCE_X_API_VERSION,
    RETIRED_KINDS,
    render_inference_pool,
)
from llmaz.render.monitoring import MONITORING_API_VERSION, render_pod_monitor
from llmaz.render.workload import Workload

__all__ = [
    "KIND_SOURCES",
    "LIST_SELECTORS",
    "MANAGED_KINDS",
    "OBSERVED_KINDS",
    "PICKER_KINDS",
    "IntegrationObjects",
    "ObjectKey",
    "object_key",
    "render_integrations",
    "stale_objects",
]

PICKER_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
)
"""Built-in kinds of the endpoint pickers the operator deploys (:mod:`llmaz.render.endpoint_picker`)."""
LIST_SELECTORS: Mapping[tuple[str, str], str] = dict.fromkeys(PICKER_KINDS, f"{LABEL_COMPONENT}={COMPONENT}")
"""Kinds listed with a label selector (a namespace holds many Services, Deployments, ... not
llmaz's integrations'): an object of such a kind not listed may still exist under someone else,
so it is created (never applied over) the first time."""

KIND_SOURCES: Mapping[tuple[str, str], tuple[str, str]] = {
    (ENVOY_GATEWAY_API_VERSION, "Backend"): ("ai-gateway", "Envoy Gateway"),
    (AIGATEWAY_API_VERSION, "AIServiceBackend"): ("ai-gateway", "Envoy AI Gateway"),
    (AIGATEWAY_API_VERSION, "AIGatewayRoute"): ("ai-gateway", "Envoy AI Gateway"),
    (GATEWAY_API_VERSION, "HTTPRoute"): ("http-route", "Gateway API"),
    (INFERENCE_API_VERSION, "InferencePool"): ("inference-pool", "Gateway API Inference Extension"),
    (INFERENCE_X_API_VERSION, "InferenceObjective"): ("inference-pool", "Gateway API Inference Extension"),
    (INFERENCE_X_API_VERSION, "InferenceModelRewrite"): (
        "inference-pool",
        "Gateway API Inference Extension",
    ),
    (MONITORING_API_VERSION, "PodMonitor"): ("pod-monitor", "Prometheus Operator"),
    **dict.fromkeys(PICKER_KINDS, ("inference-pool", "Kubernetes")),
}
"""``(apiVersion, kind)`` -> (the integration that renders it, as named in
``llmaz.io/disable-integrations``; the project whose CRD defines it)."""

MANAGED_KINDS: tuple[tuple[str, str], ...] = tuple(KIND_SOURCES)
"""Kinds the integrations render; labelled ``app.kubernetes.io/managed-by: llmaz``."""
OBSERVED_KINDS: tuple[tuple[str, str], ...] = MANAGED_KINDS + RETIRED_KINDS
"""Kinds the operator lists per namespace: what it renders, and what earlier releases rendered
(always stale, so removed where found labelled as ours)."""


@dataclass(frozen=True)
class IntegrationObjects:
    """The desired integration objects.

    :param owned: ``(namespace, workload name)`` -> objects owned by that workload only.
    :param shared: ``AIGatewayRoute`` objects, each with the workloads that have a rule in it in
        ``shared_owners`` (same index): owner references to all of them let the garbage collector
        delete a route only when its last workload is gone.
    """

    owned: Mapping[tuple[str, str], tuple[dict[str, Any], ...]] = field(default_factory=dict)
    shared: tuple[dict[str, Any], ...] = ()
    shared_owners: tuple[tuple[str, ...], ...] = ()

    def all_objects(self) -> list[dict[str, Any]]:
        out = [obj for key in sorted(self.owned) for obj in self.owned[key]]
        return out + list(self.shared)

    def keys(self) -> set[ObjectKey]:
        """Every object's :func:`object_key`."""
        return {object_key(obj) for obj in self.all_objects()}


def render_integrations(
    workloads: Iterable[Workload],
    *,
    gateway: GatewayRef,
    ai_gateway: bool = False,
    http_route: bool = False,
    inference_pool: bool = False,
    endpoint_picker_port: int = DEFAULT_ENDPOINT_PICKER_PORT,
    endpoint_picker_fail_open: bool = False,
    endpoint_picker_image: str | None = ENDPOINT_PICKER_IMAGE,
    pod_monitor: bool = False,
    monitor_labels: Mapping[str, str] | None = None,
    scrape_interval: str = "30s",
    owned: bool = True,
    shared: bool = True,
) -> IntegrationObjects:
    """Integration objects of ``workloads``, one kind per switch (all off by default); with
    ``inference_pool``, each pool's endpoint picker too unless ``endpoint_picker_image`` is ``None``.

    ``owned=False`` leaves out the objects each workload owns, ``shared=False`` the shared
    ``AIGatewayRoute`` objects: a namespace's workloads can then be rendered a slice at a time for
    what they own, and all together once for what they share.

    :raises RenderError: a workload's annotations are invalid (the error names the workload,
        the annotation and the accepted values).
    """
    items = sorted(workloads, key=lambda w: (w.namespace, w.name))
    own: dict[tuple[str, str], tuple[dict[str, Any], ...]] = {}
    for w in items if owned else ():
        objs: list[dict[str, Any]] = []
        if ai_gateway and w.enabled("ai-gateway"):
            objs.extend(render_ai_service_backend(w))
        if http_route:
            route = render_http_route(gateway, w, pools=inference_pool)
            if route is not None:
                objs.append(route)
        if inference_pool:
            objs.extend(
                render_inference_pool(
                    w, endpoint_picker_port=endpoint_picker_port, fail_open=endpoint_picker_fail_open
                )
            )
            if endpoint_picker_image:
                objs.extend(
                    render_endpoint_picker(w, image=endpoint_picker_image, grpc_port=endpoint_picker_port)
                )
        if pod_monitor:
            monitor = render_pod_monitor(w, interval=scrape_interval, extra_labels=monitor_labels)
            if monitor is not None:
                objs.append(monitor)
        own[(w.namespace, w.name)] = tuple(objs)
    routes: list[dict[str, Any]] = []
    owners: list[tuple[str, ...]] = []
    if ai_gateway and shared:
        for namespace in sorted({w.namespace for w in items}):
            for route, members in render_ai_gateway_routes(gateway, namespace, items, pools=inference_pool):
                routes.append(route)
                owners.append(tuple(w.name for w in members))
    return IntegrationObjects(owned=own, shared=tuple(routes), shared_owners=tuple(owners))


ObjectKey = tuple[str, str, str, str]
"""``(apiVersion, kind, namespace, name)`` of an object."""


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion")),
        str(obj.get("kind")),
        str(meta.get("namespace", "")),
        str(meta.get("name")),
    )


def stale_objects(
    observed: Iterable[Mapping[str, Any]], desired: IntegrationObjects | Collection[ObjectKey]
) -> list[ObjectKey]:
    """Objects the operator must delete: those of :data:`OBSERVED_KINDS` labelled as managed by
    llmaz that the latest :func:`render_integrations` no longer produces (a switch turned off, an
    annotation added, a workload gone, a kind retired), sorted. Objects not managed by llmaz are
    never listed. ``desired`` is that result, or the keys of every object it has
    (:meth:`IntegrationObjects.keys`; of each part when a namespace was rendered in parts).
    """
    wanted = desired.keys() if isinstance(desired, IntegrationObjects) else desired
    out = set()
    for obj in observed:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        key = object_key(obj)
        if (key[0], key[1]) in OBSERVED_KINDS and labels.get(MANAGED_BY) == MANAGER and key not in wanted:
            out.add(key)
    return sorted(out)
