"""Gateway objects for served models: Envoy AI Gateway, with a Gateway API HTTPRoute fallback.

Envoy AI Gateway (``aigateway.envoyproxy.io/v1alpha1``):

* per workload an ``AIServiceBackend`` and the Envoy Gateway ``Backend`` it must point at, whose
  endpoint is the workload's ``<name>-lb`` Service;
* per Gateway and namespace the ``AIGatewayRoute`` objects holding one rule per model, matched on
  the :data:`MODEL_HEADER` header that the AI Gateway fills from the request body's ``model``, at
  most :data:`MAX_ROUTE_RULES` rules to a route. Each rule carries the OpenModel's ``ownedBy`` and
  ``createdAt`` for the gateway's ``/v1/models`` answer.

:func:`render_ai_gateway_routes` is a pure function of the set of workloads: the models, sorted by
name, fill ``llmaz-<gateway>``, then ``llmaz-<gateway>-2`` and so on, so removing a workload removes
its rule and, where a later model moves up into a freed place, rewrites only the routes after it.

Without Envoy AI Gateway, :func:`render_http_route` gives a plain Gateway API ``HTTPRoute`` per
workload, matched on the same header (the client sets it).

With ``pools`` on (the ``inference-pool`` integration), a route sends a model's requests to the
workload's Inference Extension ``InferencePool`` instead, whose endpoint picker chooses the pod: the
HTTPRoute of every workload with a pool, and the ``AIGatewayRoute`` rule of a model served by ONE
workload with a pool (Envoy AI Gateway allows a single InferencePool per rule and no mix with
``AIServiceBackend`` references, so a model several workloads serve keeps splitting traffic between
their backends).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.render.inference_pool import pool_backend_ref
from llmaz.render.objects import metadata
from llmaz.render.workload import Workload

__all__ = [
    "AIGATEWAY_API_VERSION",
    "ENVOY_GATEWAY_API_VERSION",
    "GATEWAY_API_VERSION",
    "LABEL_GATEWAY",
    "MAX_ROUTE_RULES",
    "MODEL_HEADER",
    "GatewayRef",
    "ai_gateway_route_name",
    "render_ai_gateway_routes",
    "render_ai_service_backend",
    "render_http_route",
]

AIGATEWAY_API_VERSION = "aigateway.envoyproxy.io/v1alpha1"
ENVOY_GATEWAY_API_VERSION = "gateway.envoyproxy.io/v1alpha1"
GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"
GATEWAY_GROUP = "gateway.networking.k8s.io"
MODEL_HEADER = "x-ai-eg-model"
"""Header holding the model name: Envoy AI Gateway sets it from the request body."""
LABEL_GATEWAY = "llmaz.io/gateway"
"""Label on a shared AIGatewayRoute: the Gateway it attaches to."""
MAX_ROUTE_RULES = 15
"""Rules per AIGatewayRoute. Envoy AI Gateway turns each route into ONE Gateway API HTTPRoute with
a rule per route rule plus a catch-all of its own, and an HTTPRoute holds at most 16 rules: a 16th
model would make that HTTPRoute invalid while the AIGatewayRoute still reads Accepted (newer AI
Gateway CRDs cap ``spec.rules`` at 15 for that reason). More models go into further routes."""
SCHEMA = {"name": "OpenAI"}
"""The API an ``AIServiceBackend`` speaks. Routes carry no schema: the field was deprecated in Envoy
AI Gateway v0.3 and removed in v0.4, whose API server prunes it (and a route that never matches
what was applied would be applied again on every pass)."""


@dataclass(frozen=True)
class GatewayRef:
    """The Gateway routes attach to; ``namespace=None`` means the route's own namespace."""

    name: str
    namespace: str | None = None

    def parent_ref(self, route_namespace: str) -> dict[str, Any]:
        ref: dict[str, Any] = {"group": GATEWAY_GROUP, "kind": "Gateway", "name": self.name}
        if self.namespace and self.namespace != route_namespace:
            ref["namespace"] = self.namespace
        return ref


def _backend_name(w: Workload) -> str:
    return w.lb_service


def render_ai_service_backend(w: Workload) -> list[dict[str, Any]]:
    """The Envoy Gateway ``Backend`` (endpoint: ``<name>-lb``) and the ``AIServiceBackend`` on it."""
    labels = w.labels()
    name = _backend_name(w)
    backend = {
        "apiVersion": ENVOY_GATEWAY_API_VERSION,
        "kind": "Backend",
        "metadata": metadata(name, w.namespace, labels),
        "spec": {
            "endpoints": [
                {"fqdn": {"hostname": f"{w.lb_service}.{w.namespace}.svc.cluster.local", "port": w.port}}
            ]
        },
    }
    ai_backend = {
        "apiVersion": AIGATEWAY_API_VERSION,
        "kind": "AIServiceBackend",
        "metadata": metadata(name, w.namespace, labels),
        "spec": {
            "schema": dict(SCHEMA),
            "backendRef": {"group": "gateway.envoyproxy.io", "kind": "Backend", "name": name},
        },
    }
    return [backend, ai_backend]


def ai_gateway_route_name(gateway: GatewayRef, index: int = 0) -> str:
    """Name of the ``index``-th shared route of ``gateway`` in a namespace: ``llmaz-<gateway>``,
    then ``llmaz-<gateway>-2``, ``-3``..."""
    suffix = f"-{index + 1}" if index else ""
    return f"llmaz-{gateway.name}"[: 253 - len(suffix)] + suffix


def _header_match(model: str) -> dict[str, Any]:
    return {"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model}]}


def _via_pool(w: Workload, pools: bool) -> bool:
    return pools and w.enabled("inference-pool")


def render_ai_gateway_routes(
    gateway: GatewayRef, namespace: str, workloads: Iterable[Workload], *, pools: bool = False
) -> list[tuple[dict[str, Any], tuple[Workload, ...]]]:
    """The shared ``AIGatewayRoute`` objects of ``gateway`` in ``namespace``, each with the
    workloads that have a rule in it: one rule per model, models sorted by name, at most
    :data:`MAX_ROUTE_RULES` to a route (see :func:`ai_gateway_route_name`).

    Workloads of other namespaces and those with ``ai-gateway`` disabled are ignored. Workloads
    serving the same model share its rule (traffic is split between their backends); a model served
    by one workload with an InferencePool (``pools``) is routed to that pool. An empty list when no
    workload is left: the caller deletes the routes.
    """
    by_model: dict[str, list[Workload]] = {}
    for w in workloads:
        if w.namespace == namespace and w.enabled("ai-gateway"):
            by_model.setdefault(w.model_name, []).append(w)
    models = sorted(by_model)
    labels = {MANAGED_BY: MANAGER, LABEL_GATEWAY: gateway.name}
    routes = []
    for index, start in enumerate(range(0, len(models), MAX_ROUTE_RULES)):
        rules = []
        members: list[Workload] = []
        for model in models[start : start + MAX_ROUTE_RULES]:
            serving = sorted(by_model[model], key=lambda w: w.name)
            members += serving
            first = serving[0]
            if len(serving) == 1 and _via_pool(first, pools):
                refs = [pool_backend_ref(first)]
            else:
                refs = [{"name": _backend_name(w)} for w in serving]
            rule: dict[str, Any] = {
                "matches": [_header_match(model)],
                "backendRefs": refs,
                "modelsOwnedBy": first.owned_by,
            }
            if first.created_at is not None:
                rule["modelsCreatedAt"] = first.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
            rules.append(rule)
        route = {
            "apiVersion": AIGATEWAY_API_VERSION,
            "kind": "AIGatewayRoute",
            "metadata": metadata(ai_gateway_route_name(gateway, index), namespace, labels),
            "spec": {"parentRefs": [gateway.parent_ref(namespace)], "rules": rules},
        }
        routes.append((route, tuple(sorted(members, key=lambda w: w.name))))
    return routes


def render_http_route(gateway: GatewayRef, w: Workload, *, pools: bool = False) -> dict[str, Any] | None:
    """A Gateway API ``HTTPRoute`` sending requests whose :data:`MODEL_HEADER` names the model to
    ``<name>-lb``, or to the workload's ``InferencePool`` (``pools``, and the pool not disabled for
    it); ``None`` when ``http-route`` is disabled for the workload."""
    if not w.enabled("http-route"):
        return None
    if _via_pool(w, pools):
        backend = pool_backend_ref(w)
    else:
        backend = {"kind": "Service", "name": w.lb_service, "port": w.port}
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": metadata(w.name, w.namespace, w.labels()),
        "spec": {
            "parentRefs": [gateway.parent_ref(w.namespace)],
            "rules": [
                {
                    "matches": [_header_match(w.model_name)],
                    "backendRefs": [backend],
                }
            ],
        },
    }
