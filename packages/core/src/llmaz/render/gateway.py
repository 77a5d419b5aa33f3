"""Gateway objects for served models: Envoy AI Gateway, with a Gateway API HTTPRoute fallback.

Envoy AI Gateway (``aigateway.envoyproxy.io/v1alpha1``):

* per workload an ``AIServiceBackend`` and the Envoy Gateway ``Backend`` it must point at, whose
  endpoint is the workload's ``<name>-lb`` Service;
* per Gateway and namespace ONE ``AIGatewayRoute`` with one rule per model, matched on the
  :data:`MODEL_HEADER` header that the AI Gateway fills from the request body's ``model``. Each rule
  carries the OpenModel's ``ownedBy`` and ``createdAt`` for the gateway's ``/v1/models`` answer.

:func:`render_ai_gateway_route` is a pure function of the set of workloads, so removing one workload
from the set removes its rule and nothing else.

Without Envoy AI Gateway, :func:`render_http_route` gives a plain Gateway API ``HTTPRoute`` per
workload, matched on the same header (the client sets it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llmaz.api.conventions import MANAGED_BY, MANAGER
from llmaz.render.errors import RenderError
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
    "TooManyModels",
    "ai_gateway_route_name",
    "render_ai_gateway_route",
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
MAX_ROUTE_RULES = 128
"""Envoy AI Gateway accepts at most this many rules in one AIGatewayRoute."""
SCHEMA = {"name": "OpenAI"}


class TooManyModels(RenderError):
    """More distinct models in one namespace than one AIGatewayRoute can hold."""

    condition_reason = "TooManyModels"


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


def ai_gateway_route_name(gateway: GatewayRef) -> str:
    """Name of the shared route of ``gateway`` in each namespace (``llmaz-<gateway>``)."""
    return f"llmaz-{gateway.name}"[:253]


def _header_match(model: str) -> dict[str, Any]:
    return {"headers": [{"type": "Exact", "name": MODEL_HEADER, "value": model}]}


def render_ai_gateway_route(
    gateway: GatewayRef, namespace: str, workloads: Iterable[Workload]
) -> dict[str, Any] | None:
    """The ONE ``AIGatewayRoute`` of ``gateway`` in ``namespace``: a rule per model, sorted by name.

    Workloads of other namespaces and those with ``ai-gateway`` disabled are ignored. Workloads
    serving the same model share its rule (traffic is split between their backends). Returns
    ``None`` when no workload is left: the caller deletes the route.

    :raises TooManyModels: more than :data:`MAX_ROUTE_RULES` distinct models.
    """
    by_model: dict[str, list[Workload]] = {}
    for w in workloads:
        if w.namespace == namespace and w.enabled("ai-gateway"):
            by_model.setdefault(w.model_name, []).append(w)
    if not by_model:
        return None
    if len(by_model) > MAX_ROUTE_RULES:
        raise TooManyModels(
            "spec.rules",
            f"{len(by_model)} models in namespace {namespace!r} exceed the {MAX_ROUTE_RULES} rules one "
            f"AIGatewayRoute of Gateway {gateway.name!r} can hold; spread them over namespaces",
            kind="AIGatewayRoute",
            name=ai_gateway_route_name(gateway),
        )
    rules = []
    for model in sorted(by_model):
        members = sorted(by_model[model], key=lambda w: w.name)
        first = members[0]
        rule: dict[str, Any] = {
            "matches": [_header_match(model)],
            "backendRefs": [{"name": _backend_name(w)} for w in members],
            "modelsOwnedBy": first.owned_by,
        }
        if first.created_at is not None:
            rule["modelsCreatedAt"] = first.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        rules.append(rule)
    labels = {MANAGED_BY: MANAGER, LABEL_GATEWAY: gateway.name}
    return {
        "apiVersion": AIGATEWAY_API_VERSION,
        "kind": "AIGatewayRoute",
        "metadata": metadata(ai_gateway_route_name(gateway), namespace, labels),
        "spec": {
            "parentRefs": [gateway.parent_ref(namespace)],
            "schema": dict(SCHEMA),
            "rules": rules,
        },
    }


def render_http_route(gateway: GatewayRef, w: Workload) -> dict[str, Any] | None:
    """A Gateway API ``HTTPRoute`` sending requests whose :data:`MODEL_HEADER` names the model to
    ``<name>-lb``; ``None`` when ``http-route`` is disabled for the workload."""
    if not w.enabled("http-route"):
        return None
    return {
        "apiVersion": GATEWAY_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": metadata(w.name, w.namespace, w.labels()),
        "spec": {
            "parentRefs": [gateway.parent_ref(w.namespace)],
            "rules": [
                {
                    "matches": [_header_match(w.model_name)],
                    "backendRefs": [{"kind": "Service", "name": w.lb_service, "port": w.port}],
                }
            ],
        },
    }
