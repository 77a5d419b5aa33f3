"""The Inference Extension endpoint picker of one workload's ``InferencePool``.

The gateway asks the endpoint picker (EPP, an Envoy ext-proc gRPC server) which pod of the pool
takes each request; it scrapes every pod's engine metrics (queue length, KV-cache use, loaded LoRA
adapters) for that. Per workload ``<name>``, all named :func:`endpoint_picker_name`:

* a ``ServiceAccount``, and a ``Role`` + ``RoleBinding`` letting it read pods, its pool, and the
  pool's objectives and model rewrites (what the Inference Extension's own chart grants);
* a ``Deployment`` of one picker (``Recreate``: a single active replica keeps its prefix-cache
  state coherent) started with ``--pool-name``/``--pool-namespace`` and the engine's metric names
  from the backend plugin (:attr:`~llmaz.plugins.backend.Backend.key_metrics`); unknown engines
  keep the picker's defaults, which are vLLM's;
* a ``Service`` on the gRPC port the pool names, and the picker's metrics port.

The picker's pods carry none of llmaz's model labels: they are not serving pods.
"""

from __future__ import annotations

import hashlib
from typing import Any

from llmaz.api.conventions import DNS_LABEL_MAX_LENGTH
from llmaz.render.objects import metadata
from llmaz.render.workload import Workload

__all__ = [
    "ENDPOINT_PICKER_IMAGE",
    "INFERENCE_EXTENSION_VERSION",
    "LABEL_COMPONENT",
    "LABEL_ENDPOINT_PICKER",
    "endpoint_picker_name",
    "render_endpoint_picker",
]

INFERENCE_EXTENSION_VERSION = "v1.3.0"
"""The Gateway API Inference Extension release whose API and endpoint picker llmaz uses."""
ENDPOINT_PICKER_IMAGE = f"registry.k8s.io/gateway-api-inference-extension/epp:{INFERENCE_EXTENSION_VERSION}"
LABEL_COMPONENT = "llmaz.io/component"
"""``endpoint-picker`` on every object of a picker: the operator lists them by it."""
COMPONENT = "endpoint-picker"
LABEL_ENDPOINT_PICKER = "llmaz.io/endpoint-picker"
"""On the picker's pods (the Service and Deployment select on it): the workload's name."""
HEALTH_PORT = 9003
METRICS_PORT = 9090
SUFFIX = "-epp"


def endpoint_picker_name(workload: str) -> str:
    """``<workload>-epp``, shortened with a hash of the full name when that is longer than a
    Service name may be (63)."""
    name = workload + SUFFIX
    if len(name) <= DNS_LABEL_MAX_LENGTH:
        return name
    digest = hashlib.sha256(workload.encode()).hexdigest()[:8]
    keep = DNS_LABEL_MAX_LENGTH - len(SUFFIX) - len(digest) - 1
    return f"{workload[:keep].rstrip('-')}-{digest}{SUFFIX}"


def _metric_args(w: Workload) -> list[str]:
    backend = w.backend
    if backend is None:
        return []
    args: list[str] = []
    if backend.metrics_path is not None:
        args += ["--model-server-metrics-port", str(backend.effective_metrics_port)]
        args += ["--model-server-metrics-path", backend.metrics_path]
    m = backend.key_metrics
    if m is None:
        return args
    for flag, series in (
        ("--total-queued-requests-metric", m.requests_waiting),
        ("--total-running-requests-metric", m.requests_running),
        ("--kv-cache-usage-percentage-metric", m.kv_cache_usage),
        ("--lora-info-metric", m.lora_info),
        ("--cache-info-metric", m.cache_info),
    ):
        args += [flag, series or ""]  # empty: the engine has no such series, the picker skips it
    return args


def render_endpoint_picker(
    w: Workload, *, image: str = ENDPOINT_PICKER_IMAGE, grpc_port: int = 9002
) -> list[dict[str, Any]]:
    """The endpoint picker objects of one workload's pool (empty when its pool is disabled)."""
    if not w.enabled("inference-pool"):
        return []
    name = endpoint_picker_name(w.name)
    labels = {**w.labels(), LABEL_COMPONENT: COMPONENT}
    selector = {LABEL_ENDPOINT_PICKER: w.name}
    read = ["get", "list", "watch"]
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(name, w.namespace, labels),
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata(name, w.namespace, labels),
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": read},
            {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": read},
            {
                "apiGroups": ["inference.networking.x-k8s.io"],
                "resources": ["inferencemodelrewrites", "inferenceobjectives"],
                "verbs": read,
            },
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(name, w.namespace, labels),
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": w.namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
    }
    args = [
        "--pool-name", w.name,
        "--pool-namespace", w.namespace,
        "--grpc-port", str(grpc_port),
        "--grpc-health-port", str(HEALTH_PORT),
        "--metrics-port", str(METRICS_PORT),
        "--zap-encoder", "json",
        "--tracing=false",
        "--metrics-endpoint-auth=false",
        *_metric_args(w),
    ]  # fmt: skip
    probe = {"grpc": {"port": HEALTH_PORT, "service": "inference-extension"}, "periodSeconds": 10}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(name, w.namespace, labels),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "serviceAccountName": name,
                    "terminationGracePeriodSeconds": 130,
                    "containers": [
                        {
                            "name": "epp",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "args": args,
                            "env": [
                                {
                                    "name": "NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                            ],
                            "ports": [
                                {"name": "grpc", "containerPort": grpc_port},
                                {"name": "grpc-health", "containerPort": HEALTH_PORT},
                                {"name": "metrics", "containerPort": METRICS_PORT},
                            ],
                            "livenessProbe": {**probe, "initialDelaySeconds": 5},
                            "readinessProbe": dict(probe),
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(name, w.namespace, labels),
        "spec": {
            "selector": dict(selector),
            "ports": [
                {"name": "grpc-ext-proc", "protocol": "TCP", "port": grpc_port},
                {"name": "http-metrics", "protocol": "TCP", "port": METRICS_PORT},
            ],
        },
    }
    return [account, role, binding, deployment, service]
