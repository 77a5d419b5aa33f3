"""Validate rendered objects against their real schemas (for tests; needs the ``test`` extras).

* Kubernetes built-in kinds (``v1 Service``, ``autoscaling/v2 HorizontalPodAutoscaler``...) against
  the OpenAPI (swagger.json) of the pinned Kubernetes version, from ``tools/k8s-openapi.sh``.
* ``LeaderWorkerSet`` against the CRD schema of the pinned LWS module, fetched with
  ``go mod download`` into the shared Go module cache.
* llmaz kinds against the :mod:`llmaz.api` models.

Nothing is committed: both files live in ``~/.cache/llmaz/go-tools`` (override with
``LLMAZ_K8S_OPENAPI`` / ``LLMAZ_LWS_CRD``). When a file cannot be had, :class:`SchemaUnavailable`
is raised with the reason; tests fail on it (the repo's tools fetch both files, so a missing one
is a broken install, not a reason to skip).

Schemas are made strict on purpose: every object schema with ``properties`` rejects unknown fields
(the API server would silently prune them, hiding a render bug).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from llmaz.errors import LlmazError
from llmaz.operator.config import Integrations
from llmaz.render.endpoint_picker import INFERENCE_EXTENSION_VERSION
from llmaz_devkit.repo import chart_dependency_version, repo_root

__all__ = [
    "INTEGRATION_CRDS",
    "LWS_VERSIONS",
    "CrdSource",
    "SchemaUnavailable",
    "gateway",
    "k8s_openapi_path",
    "lws_crd_path",
    "module_file",
    "validate_object",
    "validator_for",
]

LWS_VERSIONS = ("v0.10.0", "v0.9.0")
"""LWS module versions tried in order (the Go proxy has at times refused to serve v0.10.0)."""
LWS_CRD = "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml"

_BUILTIN = {
    ("v1", "Service"): "io.k8s.api.core.v1.Service",
    ("v1", "ConfigMap"): "io.k8s.api.core.v1.ConfigMap",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    ("apps/v1", "Deployment"): "io.k8s.api.apps.v1.Deployment",
    ("v1", "ServiceAccount"): "io.k8s.api.core.v1.ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "Role"): "io.k8s.api.rbac.v1.Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "io.k8s.api.rbac.v1.RoleBinding",
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): "io.k8s.api.resource.v1.ResourceClaimTemplate",
}


class SchemaUnavailable(LlmazError, RuntimeError):
    """A schema file could not be found or fetched."""


def _cache_root() -> Path:
    return Path(os.environ.get("GO_TOOLS_CACHE", Path.home() / ".cache" / "llmaz" / "go-tools"))


def k8s_openapi_path() -> Path:
    """Path of the Kubernetes swagger.json of the pinned version (fetched on first use)."""
    env = os.environ.get("LLMAZ_K8S_OPENAPI")
    if env:
        return Path(env)
    try:
        out = subprocess.run(
            ["bash", str(repo_root() / "tools" / "k8s-openapi.sh")],
            check=True,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SchemaUnavailable(f"tools/k8s-openapi.sh failed: {exc}") from exc
    return Path(out.stdout.strip().splitlines()[-1])


def module_file(module: str, versions: Sequence[str], relpath: str) -> Path:
    """A file of a Go module, from the first of ``versions`` the module proxy serves (downloaded
    into the shared Go module cache on first use; nothing is copied into the repository)."""
    gomod = _cache_root() / "gomod"
    errors = []
    for version in versions:
        ready = gomod / f"{module}@{version}" / relpath
        if ready.exists():
            return ready
        env_vars = {**os.environ, "GOMODCACHE": str(gomod), "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
        try:
            out = subprocess.run(
                ["go", "mod", "download", "-json", f"{module}@{version}"],
                check=False,
                capture_output=True,
                text=True,
                timeout=600,
                env=env_vars,
                cwd=str(_cache_root()) if _cache_root().exists() else None,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            errors.append(f"{version}: {exc}")
            continue
        try:
            info = json.loads(out.stdout or "{}")
        except json.JSONDecodeError:
            info = {}
        if info.get("Dir") and (Path(info["Dir"]) / relpath).exists():
            return Path(info["Dir"]) / relpath
        errors.append(f"{version}: {info.get('Error') or out.stderr.strip()}")
    raise SchemaUnavailable(f"{module} {relpath} unavailable: " + "; ".join(errors))


@dataclasses.dataclass(frozen=True)
class CrdSource:
    """Where the real CRD of an external kind is: a file of a Go module, at pinned versions."""

    module: str
    versions: tuple[str, ...]
    path: str

    def fetch(self) -> Path:
        return module_file(self.module, self.versions, self.path)


_GWAPI = ("sigs.k8s.io/gateway-api", ("v1.6.3",), "config/crd/standard/gateway.networking.k8s.io_{}.yaml")
_GIE = (
    "sigs.k8s.io/gateway-api-inference-extension",
    (INFERENCE_EXTENSION_VERSION,),
    "config/crd/bases/inference.networking.{}.yaml",
)
_GIE_V0 = (  # what earlier llmaz releases wrote (the operator removes it)
    "sigs.k8s.io/gateway-api-inference-extension",
    ("v0.5.1",),
    "config/crd/bases/inference.networking.x-k8s.io_{}.yaml",
)
_AIGW = (  # the Envoy AI Gateway the chart installs
    "github.com/envoyproxy/ai-gateway",
    (chart_dependency_version("ai-gateway-crds-helm"),),
    "manifests/charts/ai-gateway-crds-helm/templates/aigateway.envoyproxy.io_{}.yaml",
)
_EG = (  # the Envoy Gateway the chart installs (its CRDs sit in a subchart of its chart since v1.6)
    "github.com/envoyproxy/gateway",
    (chart_dependency_version("gateway-helm"),),
    "charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_{}.yaml",
)
_PROM = (
    "github.com/prometheus-operator/prometheus-operator",
    ("v0.85.0",),
    "example/prometheus-operator-crd/monitoring.coreos.com_{}.yaml",
)


def _src(spec: tuple[str, tuple[str, ...], str], plural: str) -> CrdSource:
    return CrdSource(spec[0], spec[1], spec[2].format(plural))


INTEGRATION_CRDS: dict[tuple[str, str], CrdSource] = {
    ("gateway.networking.k8s.io/v1", "GatewayClass"): _src(_GWAPI, "gatewayclasses"),
    ("gateway.networking.k8s.io/v1", "Gateway"): _src(_GWAPI, "gateways"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): _src(_GWAPI, "httproutes"),
    ("inference.networking.k8s.io/v1", "InferencePool"): _src(_GIE, "k8s.io_inferencepools"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceObjective"): _src(
        _GIE, "x-k8s.io_inferenceobjectives"
    ),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceModelRewrite"): _src(
        _GIE, "x-k8s.io_inferencemodelrewrites"
    ),
    ("inference.networking.x-k8s.io/v1alpha2", "InferencePool"): _src(_GIE_V0, "inferencepools"),
    ("inference.networking.x-k8s.io/v1alpha2", "InferenceModel"): _src(_GIE_V0, "inferencemodels"),
    ("gateway.envoyproxy.io/v1alpha1", "Backend"): _src(_EG, "backends"),
    ("gateway.envoyproxy.io/v1alpha1", "EnvoyProxy"): _src(_EG, "envoyproxies"),
    ("aigateway.envoyproxy.io/v1alpha1", "AIGatewayRoute"): _src(_AIGW, "aigatewayroutes"),
    ("aigateway.envoyproxy.io/v1alpha1", "AIServiceBackend"): _src(_AIGW, "aiservicebackends"),
    ("monitoring.coreos.com/v1", "PodMonitor"): _src(_PROM, "podmonitors"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _src(_PROM, "servicemonitors"),
    ("keda.sh/v1alpha1", "ScaledObject"): CrdSource(
        "github.com/kedacore/keda/v2", ("v2.16.1",), "config/crd/bases/keda.sh_scaledobjects.yaml"
    ),
}
"""The pinned real CRDs of the kinds llmaz's integrations and chart emit (Gateway API, Inference
Extension, Envoy Gateway, Envoy AI Gateway, Prometheus Operator, KEDA). The Go module proxy refuses every
``github.com/envoyproxy/ai-gateway`` version so far: its two entries raise :class:`SchemaUnavailable`."""


@functools.lru_cache(maxsize=16)
def _crd_validator(api_version: str, kind: str) -> Any:
    import jsonschema

    source = INTEGRATION_CRDS[(api_version, kind)]
    crd = yaml.safe_load(source.fetch().read_text(encoding="utf-8"))
    wanted = api_version.rsplit("/", 1)[-1]
    version = next((v for v in crd["spec"]["versions"] if v["name"] == wanted), None)
    if version is None:
        raise SchemaUnavailable(f"{source.module} {source.path} serves no version {wanted}")
    schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def gateway(namespace: str, class_name: str) -> dict[str, Any]:
    """A Gateway API Gateway with one HTTP listener, named as the operator's default
    ``integrations.gatewayName``. No gateway controller runs in tests or benchmarks: the operator
    only checks that it exists."""
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": Integrations().gateway_name, "namespace": namespace},
        "spec": {
            "gatewayClassName": class_name,
            "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}],
        },
    }


def lws_crd_path() -> Path:
    """Path of the LeaderWorkerSet CRD of the pinned module version (first of :data:`LWS_VERSIONS`
    that the module proxy serves)."""
    env = os.environ.get("LLMAZ_LWS_CRD")
    if env:
        return Path(env)
    return module_file("sigs.k8s.io/lws", LWS_VERSIONS, LWS_CRD)


def _strict(node: Any) -> Any:
    """Recursively forbid unknown properties where a schema lists its properties."""
    if isinstance(node, dict):
        out = {k: _strict(v) for k, v in node.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_strict(v) for v in node]
    return node


_INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
_QUANTITY = {"anyOf": [{"type": "integer"}, {"type": "number"}, {"type": "string"}]}


@functools.lru_cache(maxsize=1)
def _k8s_definitions() -> dict[str, Any]:
    path = k8s_openapi_path()
    try:
        swagger = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SchemaUnavailable(f"{path}: {exc}") from exc
    definitions: dict[str, Any] = _strict(swagger["definitions"])
    # swagger 2 spells these as strings with a format; JSON also accepts numbers for them.
    definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = dict(_INT_OR_STRING)
    definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] = dict(_QUANTITY)
    return definitions


@functools.lru_cache(maxsize=8)
def _k8s_validator(definition: str) -> Any:
    import jsonschema

    definitions = _k8s_definitions()
    if definition not in definitions:
        raise SchemaUnavailable(f"no definition {definition} in the Kubernetes OpenAPI")
    schema = {"$ref": f"#/definitions/{definition}", "definitions": definitions}
    return jsonschema.Draft4Validator(schema)


@functools.lru_cache(maxsize=1)
def _lws_validator() -> Any:
    import jsonschema

    path = lws_crd_path()
    crd = yaml.safe_load(path.read_text(encoding="utf-8"))
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    # metadata is validated by the API server, not by the CRD schema: keep it open.
    schema["properties"]["metadata"] = {"type": "object"}
    return jsonschema.Draft7Validator(schema)


def validator_for(api_version: str, kind: str) -> Any:
    """A ``jsonschema`` validator for a kind, or :class:`SchemaUnavailable`."""
    if (api_version, kind) == ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"):
        return _lws_validator()
    if (api_version, kind) in INTEGRATION_CRDS:
        return _crd_validator(api_version, kind)
    definition = _BUILTIN.get((api_version, kind))
    if definition is None:
        raise SchemaUnavailable(f"no schema known for {api_version} {kind}")
    return _k8s_validator(definition)


def validate_object(obj: dict[str, Any]) -> list[str]:
    """Every schema problem of one object as ``<path>: <message>`` (empty when valid)."""
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    from llmaz.api import kind_for

    model = kind_for(api_version, kind)
    if model is not None:
        from pydantic import ValidationError

        from llmaz.api.validation import validate_manifest

        try:
            model.from_manifest(obj)
        except ValidationError as exc:
            return [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        # The CRD's CEL rules too: what the API server would reject must never be rendered.
        return [f"{f.path}: {f.message} (rule {f.rule_id})" for f in validate_manifest(obj)]
    validator = validator_for(api_version, kind)
    problems = []
    for error in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in error.absolute_path)
        problems.append(f"{path}: {error.message}")
    return problems
