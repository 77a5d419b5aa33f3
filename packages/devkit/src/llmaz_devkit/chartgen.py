"""Generate the umbrella chart's values, schema, RBAC and webhook rules from one source.

Sources (never edited by hand in the chart):

* :class:`ChartValues` below — the chart-only keys — with the operator's own settings nested as
  ``operator.config`` (:class:`llmaz.operator.config.OperatorConfig`);
* :data:`llmaz.operator.rbac.RULES` — the operator's ClusterRole;
* :data:`llmaz.operator.admission.WEBHOOKS` — the Mutating and Validating webhook configurations.

Outputs: ``charts/llmaz/values.yaml`` (defaults with ``# --`` comments), ``values.schema.json``
(strict: ``additionalProperties: false`` everywhere except the pass-through values of the
dependency charts), ``templates/operator/clusterrole.yaml``, ``templates/webhook/_webhooks.tpl`` and
the values reference page ``docs/reference/helm-values.md``.

Usage (from a checkout)::

    python -m llmaz_devkit.chartgen                 # write the generated files
    python -m llmaz_devkit.chartgen --check         # fail with a diff when the committed files drift
    python -m llmaz_devkit.chartgen --assemble DIR  # copy the chart to DIR with its dependencies (tests)

``--assemble`` is for offline tests: charts published inside Go modules (LWS, Envoy Gateway) are
copied from the Go module cache, the others get an empty, clearly named stand-in chart so Helm's
dependency check passes while they stay disabled.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.alias_generators import to_camel

from llmaz.loader.layout import IMAGE_REPOSITORY
from llmaz.operator.admission import WEBHOOKS
from llmaz.operator.config import OperatorConfig
from llmaz.operator.rbac import RULES
from llmaz_devkit import generated
from llmaz_devkit.repo import repo_root

CHART_DIR = Path("charts/llmaz")
LWS_VERSION = "v0.9.0"
"""The LeaderWorkerSet release the chart depends on (Chart.yaml pins its chart version 0.9.0)."""
DOCS_PAGE = Path("docs/reference/helm-values.md")
GENERATED_BY = "llmaz_devkit.chartgen"

Name = Annotated[str, StringConstraints(min_length=1, max_length=63)]
OptionalName = Annotated[str, StringConstraints(max_length=63)]
Text = Annotated[str, StringConstraints(max_length=256)]
ImageRef = Annotated[str, StringConstraints(max_length=256, pattern=r"^[a-z0-9][a-z0-9._/:-]*$")]
Digest = Annotated[str, StringConstraints(pattern=r"^(sha256:[a-f0-9]{64})?$")]
Requirement = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9]")]

# Operator settings the chart writes itself, so they are not values: ``backends`` comes from the
# llmaz-compatible ``backendRuntime`` values, and the leader-election Lease is named after the release
# in its namespace (two releases never share a Lease).
CHART_FILLED_CONFIG_KEYS: tuple[tuple[str, ...], ...] = (
    ("backends",),
    ("leaderElection", "leaseName"),
    ("leaderElection", "leaseNamespace"),
)


def _pop_path(node: dict[str, Any], path: tuple[str, ...], *, schema: bool) -> None:
    for key in path[:-1]:
        node = node["properties"][key] if schema else node[key]
    (node["properties"] if schema else node).pop(path[-1], None)


class _Values(BaseModel):
    """Base of the chart-only value groups: camelCase keys, unknown keys rejected."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class _PassThrough(BaseModel):
    """Values handed to a dependency chart unchanged; only ``enabled`` belongs to this chart."""

    model_config = ConfigDict(extra="allow")

    enabled: bool = Field(default=False, description="Install this dependency chart with llmaz.")


class Crds(_Values):
    enabled: bool = Field(
        default=True,
        description="Install and upgrade the llmaz CRDs (OpenModel, Playground, Service, BackendRuntime).",
    )
    keep: bool = Field(
        default=True,
        description="Keep the CRDs (and so every model and playground) when the release is uninstalled.",
    )
    global_: dict[str, Any] | None = Field(
        default=None, alias="global", description="Helm copies the global values here (crds is a subchart)."
    )


class Image(_Values):
    repository: ImageRef = Field(
        default=IMAGE_REPOSITORY,
        description=(
            "The one llmaz image: operator (`llmaz operator run`) and model loader (`llmaz load-model`)."
        ),
    )
    tag: Text = Field(default="", description="Image tag; empty means the chart's appVersion.")
    digest: Digest = Field(
        default="", description="Image digest (`sha256:...`); when set it wins over the tag."
    )
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="Image pull policy of the operator and its init containers."
    )


class LocalObjectReference(_Values):
    name: Name


class ServiceAccount(_Values):
    create: bool = Field(default=True, description="Create the operator's ServiceAccount.")
    name: OptionalName = Field(
        default="", description="ServiceAccount name; empty means the release fullname."
    )
    annotations: dict[str, Text] = Field(
        default_factory=dict, description="Annotations of the ServiceAccount (e.g. cloud IAM role bindings)."
    )


class PodDisruptionBudget(_Values):
    enabled: bool = Field(
        default=True,
        description="With more than one replica, a PodDisruptionBudget keeps one operator running in drains.",
    )


class ExtraPlugins(_Values):
    packages: list[Requirement] = Field(
        default_factory=list,
        max_length=32,
        description=(
            "NOT FOR PRODUCTION. Extra plugin distributions (pip requirements, e.g. "
            "`llmaz-backend-foo==1.2`) an init container installs into a volume on the operator's "
            "Python path at every pod start. Build a derived image for production."
        ),
    )
    index_url: Text = Field(default="", description="Package index for the init container; empty means PyPI.")


class Operator(_Values):
    replicas: int = Field(
        default=1,
        ge=0,
        le=5,
        description="Operator replicas; more than one turns leader election on (standbys write nothing).",
    )
    config: OperatorConfig = Field(
        default_factory=OperatorConfig,
        description=(
            "The operator's settings (`llmaz operator run --config`), written to a ConfigMap. Backend "
            "image overrides come from `backendRuntime`; the Lease is named after the release, in its "
            "namespace; the model loader image defaults to `image`."
        ),
    )
    resources: dict[str, dict[str, Text]] = Field(
        default_factory=lambda: {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"memory": "512Mi"},
        },
        description="Resources of the operator container.",
    )
    node_selector: dict[str, Text] = Field(
        default_factory=dict, description="Node selector of the operator pods."
    )
    tolerations: list[dict[str, Any]] = Field(
        default_factory=list, description="Tolerations of the operator pods."
    )
    affinity: dict[str, Any] = Field(default_factory=dict, description="Affinity of the operator pods.")
    topology_spread_constraints: list[dict[str, Any]] = Field(
        default_factory=list, description="Topology spread constraints of the operator pods."
    )
    priority_class_name: OptionalName = Field(default="", description="PriorityClass of the operator pods.")
    pod_annotations: dict[str, Text] = Field(
        default_factory=dict, description="Extra annotations of the pods."
    )
    pod_labels: dict[str, Text] = Field(
        default_factory=dict, description="Extra labels of the pods (never part of the selector)."
    )
    termination_grace_period_seconds: int = Field(
        default=30, ge=0, le=3600, description="Time the operator gets to finish in-flight reconciles."
    )
    service_account: ServiceAccount = Field(default_factory=ServiceAccount)
    pod_disruption_budget: PodDisruptionBudget = Field(default_factory=PodDisruptionBudget)
    extra_plugins: ExtraPlugins = Field(default_factory=ExtraPlugins)


class BackendImage(_Values):
    repository: ImageRef | None = Field(default=None, description="Engine image repository.")
    tag: Text | None = Field(default=None, description="Engine image tag.")


class BackendRuntimeValues(_Values):
    image: BackendImage = Field(default_factory=BackendImage)


class IssuerRef(_Values):
    name: OptionalName = Field(
        default="",
        description="Existing cert-manager issuer; empty means the chart creates a self-signed Issuer.",
    )
    kind: Literal["Issuer", "ClusterIssuer"] = Field(default="Issuer", description="Kind of the issuer.")
    group: Text = Field(default="cert-manager.io", description="API group of the issuer.")


class CertManager(_Values):
    enabled: bool = Field(
        default=False, description="Let cert-manager issue the webhook certificate and inject the CA bundle."
    )
    issuer_ref: IssuerRef = Field(default_factory=IssuerRef)


class WebhookValues(_Values):
    failure_policy: Literal["Fail", "Ignore"] = Field(
        default="Fail", description="What the API server does when the webhook cannot be reached."
    )
    timeout_seconds: int = Field(default=10, ge=1, le=30, description="Webhook call timeout.")
    cert_validity_days: int = Field(
        default=3650,
        ge=1,
        le=36500,
        description="Validity of the chart-generated CA and certificate (kept across upgrades).",
    )
    cert_manager: CertManager = Field(default_factory=CertManager)


class ServiceMonitor(_Values):
    interval: Text = Field(default="30s", description="Scrape interval.")
    labels: dict[str, Text] = Field(
        default_factory=dict,
        description="Extra labels so your Prometheus' serviceMonitorSelector picks it up.",
    )


class Dashboards(_Values):
    enabled: bool = Field(
        default=False,
        description="Ship Grafana dashboards (operator, engines) as ConfigMaps for the Grafana sidecar.",
    )
    label: str = Field(
        default="grafana_dashboard",
        description="Label the Grafana sidecar watches (kube-prometheus-stack: grafana_dashboard).",
    )
    label_value: str = Field(default="1", description="Value of that label.")


class Prometheus(_Values):
    enabled: bool = Field(
        default=False,
        description=(
            "Create a ServiceMonitor for the operator's metrics (needs the Prometheus Operator CRDs)."
        ),
    )
    service_monitor: ServiceMonitor = Field(default_factory=ServiceMonitor)


class NetworkPolicy(_Values):
    enabled: bool = Field(
        default=False,
        description=(
            "Restrict the operator pods: ingress only to the webhook and metrics ports, egress only to "
            "DNS and the API server ports (plus HTTPS when extra plugins are installed)."
        ),
    )
    metrics_from: list[dict[str, Any]] = Field(
        default_factory=list,
        description="NetworkPolicy peers allowed to scrape metrics; empty means any pod in any namespace.",
    )
    api_server_ports: list[int] = Field(
        default_factory=lambda: [443, 6443], description="Ports the operator may reach the API server on."
    )


class Gateway(_Values):
    create: bool = Field(
        default=False,
        description=(
            "Create the Gateway the operator's routes attach to (named "
            "`operator.config.integrations.gatewayName`, in the release namespace, served by Envoy "
            "Gateway). Its Envoy Service is named `<fullname>-gateway` through an EnvoyProxy, and Open "
            "WebUI is pointed at it, whatever the release is called."
        ),
    )
    class_name: OptionalName = Field(
        default="",
        description=(
            "GatewayClass of that Gateway; empty: the chart creates `<fullname>-<namespace>` for Envoy "
            "Gateway's controller."
        ),
    )
    port: int = Field(default=80, ge=1, le=65535, description="HTTP listener port of the Gateway.")


class LeaderWorkerSet(_Values):
    enabled: bool = Field(
        default=True,
        description=(
            "Install the LeaderWorkerSet chart (`lws` values); turn off when LWS is already installed."
        ),
    )


class ChartValues(_Values):
    """Every value of the ``llmaz`` chart."""

    name_override: OptionalName = Field(default="", description="Replaces the chart name in object names.")
    fullname_override: OptionalName = Field(default="", description="Replaces `<release>-<chart>` in names.")
    crds: Crds = Field(default_factory=Crds)
    image: Image = Field(default_factory=Image)
    image_pull_secrets: list[LocalObjectReference] = Field(
        default_factory=list, description="Pull secrets of the operator pods."
    )
    operator: Operator = Field(default_factory=Operator)
    backend_runtime: dict[Name, BackendRuntimeValues] = Field(
        default_factory=dict,
        description=(
            "Image overrides per backend plugin (`vllm`, `sglang`, `llamacpp`, `ollama`, `tgi`, "
            "`tensorrt-llm` or a third-party name) for the BackendRuntime the operator applies."
        ),
    )
    webhook: WebhookValues = Field(default_factory=WebhookValues)
    prometheus: Prometheus = Field(default_factory=Prometheus)
    dashboards: Dashboards = Field(default_factory=Dashboards)
    network_policy: NetworkPolicy = Field(default_factory=NetworkPolicy)
    extra_objects: list[Any] = Field(
        default_factory=list,
        description="Extra manifests (objects or template strings) rendered with the release.",
    )
    gateway: Gateway = Field(default_factory=Gateway)
    leader_worker_set: LeaderWorkerSet = Field(default_factory=LeaderWorkerSet)
    lws: dict[str, Any] = Field(
        default_factory=lambda: {
            "image": {"manager": {"tag": LWS_VERSION, "pullPolicy": "IfNotPresent"}},
            "podSecurityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        },
        description=(
            "Values of the LeaderWorkerSet chart. The defaults pin its image to the chart's version "
            "(the published chart says `main`) and add the seccomp profile Pod Security restricted needs."
        ),
    )
    envoy_gateway: _PassThrough = Field(
        default_factory=_PassThrough,
        alias="envoy-gateway",
        description="Envoy Gateway chart (`gateway-helm`).",
    )
    envoy_ai_gateway: _PassThrough = Field(
        default_factory=_PassThrough,
        alias="envoy-ai-gateway",
        description=(
            "Envoy AI Gateway chart (`ai-gateway-helm`), installed with its CRD chart. Needs "
            "`envoy-gateway` set up as an extension of it: see `values.global.yaml`."
        ),
    )
    envoy_ai_gateway_crds: dict[str, Any] = Field(
        default_factory=dict,
        alias="envoy-ai-gateway-crds",
        description=(
            "Values of Envoy AI Gateway's CRD chart (`ai-gateway-crds-helm`), installed with "
            "`envoy-ai-gateway`."
        ),
    )
    open_webui: _PassThrough = Field(
        default_factory=_PassThrough, alias="open-webui", description="Open WebUI chart (`open-webui`)."
    )
    global_: dict[str, Any] = Field(
        default_factory=dict,
        alias="global",
        description="Helm global values, shared with every dependency chart.",
    )


# --------------------------------------------------------------------------------------------------
# values.schema.json


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target = copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]])
            extra = {k: v for k, v in node.items() if k != "$ref"}
            return _inline({**target, **extra}, defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def values_schema() -> dict[str, Any]:
    """The strict JSON schema of the chart values (every ``$ref`` inlined, no titles)."""
    raw = ChartValues.model_json_schema(by_alias=True)
    schema: dict[str, Any] = _inline(raw, raw.get("$defs", {}))
    config = schema["properties"]["operator"]["properties"]["config"]
    for path in CHART_FILLED_CONFIG_KEYS:
        _pop_path(config, path, schema=True)
    schema["properties"]["operator"].pop("default", None)
    _drop_defaults(schema)
    return {"$schema": "http://json-schema.org/draft-07/schema#", **schema}


def _drop_defaults(node: Any) -> None:
    """Defaults live in values.yaml; in the schema they would only be a second copy to drift."""
    if isinstance(node, dict):
        node.pop("default", None)
        for value in node.values():
            _drop_defaults(value)
    elif isinstance(node, list):
        for value in node:
            _drop_defaults(value)


# --------------------------------------------------------------------------------------------------
# values.yaml with `# --` comments (helm-docs style)


def default_values() -> dict[str, Any]:
    values = ChartValues().model_dump(by_alias=True, exclude_none=True)
    for path in CHART_FILLED_CONFIG_KEYS:
        _pop_path(values["operator"]["config"], path, schema=False)
    return values


def _descriptions(schema: dict[str, Any]) -> dict[tuple[str, ...], str]:
    """Description of every property path of the schema."""
    out: dict[tuple[str, ...], str] = {}

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, sub in node.get("properties", {}).items():
            if sub.get("description"):
                out[(*path, key)] = sub["description"]
            walk(sub, (*path, key))

    walk(schema, ())
    return out


def _scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _emit(
    values: dict[str, Any], docs: dict[tuple[str, ...], str], path: tuple[str, ...], indent: int
) -> list[str]:
    lines: list[str] = []
    pad = "  " * indent
    for key, value in values.items():
        here = (*path, key)
        if here in docs:
            text = docs[here]
            lines += [
                f"{pad}# -- {line}" if i == 0 else f"{pad}# {line}"
                for i, line in enumerate(_wrap(text, 96 - len(pad)))
            ]
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{key}:")
            lines += _emit(value, docs, here, indent + 1)
        else:
            lines.append(f"{pad}{key}: {_scalar(value)}")
    return lines


def _wrap(text: str, width: int) -> list[str]:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return [*lines, line] if line else lines


def values_yaml(schema: dict[str, Any]) -> str:
    head = [
        f"# Generated by {GENERATED_BY} from llmaz_devkit.chartgen.ChartValues and llmaz.operator.config.",
        "# Do not edit: change the models and run `python -m llmaz_devkit.chartgen`. Users override these",
        "# defaults with their own file (see values.global.yaml) and `-f`.",
    ]
    return "\n".join(head + _emit(default_values(), _descriptions(schema), (), 0)) + "\n"


# --------------------------------------------------------------------------------------------------
# Templates generated from data


def clusterrole_template() -> str:
    lines = [
        f"# Generated by {GENERATED_BY} from llmaz.operator.rbac.RULES. Do not edit.",
        "apiVersion: rbac.authorization.k8s.io/v1",
        "kind: ClusterRole",
        "metadata:",
        '  name: {{ include "llmaz.clusterScopedName" . }}',
        "  labels:",
        '    {{- include "llmaz.labels" . | nindent 4 }}',
        "rules:",
    ]
    for rule in RULES:
        lines.append(f"  # {rule.why}")
        block = yaml.safe_dump([rule.to_dict()], default_flow_style=None, sort_keys=False, width=200)
        lines += ["  " + line for line in block.strip().splitlines()]
    return "\n".join(lines) + "\n"


def webhooks_template() -> str:
    """A named template with the Mutating and Validating webhook configurations.

    The caller passes ``.root``, ``.caBundle`` (empty with cert-manager) and ``.annotations``.
    """
    lines = [
        f"{{{{/* Generated by {GENERATED_BY} from llmaz.operator.admission.WEBHOOKS. Do not edit. */}}}}",
        '{{- define "llmaz.webhookConfigurations" -}}',
        "{{- $root := .root -}}",
    ]
    first = True
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        hooks = [h for h in WEBHOOKS if h.configuration_kind == kind]
        if not hooks:
            continue
        if not first:
            lines.append("---")
        first = False
        lines += [
            "apiVersion: admissionregistration.k8s.io/v1",
            f"kind: {kind}",
            "metadata:",
            '  name: {{ include "llmaz.clusterScopedName" $root }}',
            "  labels:",
            '    {{- include "llmaz.labels" $root | nindent 4 }}',
            "  {{- with .annotations }}",
            "  annotations:",
            "    {{- toYaml . | nindent 4 }}",
            "  {{- end }}",
            "webhooks:",
        ]
        for hook in hooks:
            lines += [
                f"  - name: {hook.name}",
                "    admissionReviewVersions: [v1]",
                "    sideEffects: None",
                "    failurePolicy: {{ $root.Values.webhook.failurePolicy }}",
                "    timeoutSeconds: {{ $root.Values.webhook.timeoutSeconds }}",
                "    clientConfig:",
                "      service:",
                '        name: {{ include "llmaz.webhookServiceName" $root }}',
                "        namespace: {{ $root.Release.Namespace }}",
                f"        path: {hook.path}",
                "        port: 443",
                "      {{- with .caBundle }}",
                "      caBundle: {{ . }}",
                "      {{- end }}",
                "    rules:",
                f"      - apiGroups: [{json.dumps(hook.api_group)}]",
                f"        apiVersions: [{hook.api_version}]",
                f"        resources: [{hook.resource}]",
                f"        operations: [{', '.join(hook.operations)}]",
                "        scope: '*'",
            ]
    lines.append("{{- end -}}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# Values reference page


def _type_of(node: dict[str, Any]) -> str:
    if "anyOf" in node:
        return " or ".join(_type_of(n) for n in node["anyOf"])
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {_type_of(node.get('items', {}))}"
    return str(kind)


def docs_page(schema: dict[str, Any]) -> str:
    defaults = default_values()
    rows: list[str] = []

    def default_at(path: tuple[str, ...]) -> Any:
        node: Any = defaults
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, sub in node.get("properties", {}).items():
            here = (*path, key)
            if sub.get("properties") and sub.get("additionalProperties") is False:
                walk(sub, here)
                continue
            value = default_at(here)
            shown = "" if value is None else f"`{_scalar(value)}`"
            desc = (sub.get("description") or "").replace("|", "\\|").replace("\n", " ")
            if (
                sub.get("additionalProperties") is not False
                and sub.get("type") == "object"
                and sub.get("properties")
            ):
                desc += " Other keys are passed to the dependency chart."
            rows.append(f"| `{'.'.join(here)}` | {_type_of(sub)} | {shown} | {desc.strip()} |")
            if sub.get("properties") and sub.get("additionalProperties") is not False:
                walk(sub, here)

    walk(schema, ())
    head = f"""# Helm values reference

<!-- Generated by {GENERATED_BY} from ChartValues and llmaz.operator.config. Do not edit. -->

Every value of the `llmaz` chart. The chart's `values.schema.json` is generated from the same pydantic
models, with `additionalProperties: false`, so `helm install` rejects a misspelt key instead of
ignoring it. The keys under `operator.config` are the settings of `llmaz operator run --config`; the
chart writes them to a ConfigMap. Three settings of that file are not keys here, because the chart
sets them: `backends` comes from `backendRuntime`, and `leaderElection.leaseName` and
`.leaseNamespace` are the release's full name and namespace. Keys of the dependency charts (`lws`,
`envoy-gateway`, `envoy-ai-gateway`, `envoy-ai-gateway-crds`, `open-webui`) are passed through
unchecked.

See [the chart page](../getting-started/chart.md) for how the values fit together.

| Key | Type | Default | Description |
|---|---|---|---|
"""
    return head + "\n".join(rows) + "\n"


# --------------------------------------------------------------------------------------------------
# Drift check


def generate() -> dict[Path, str]:
    schema = values_schema()
    return {
        CHART_DIR / "values.yaml": values_yaml(schema),
        CHART_DIR / "values.schema.json": json.dumps(schema, indent=2) + "\n",
        CHART_DIR / "templates" / "operator" / "clusterrole.yaml": clusterrole_template(),
        CHART_DIR / "templates" / "webhook" / "_webhooks.tpl": webhooks_template(),
        DOCS_PAGE: docs_page(schema),
    }


def check(root: Path, files: dict[Path, str]) -> list[str]:
    """Differences between the generated files and the tree at ``root`` (empty when in sync)."""
    return generated.drift(root, files)


# --------------------------------------------------------------------------------------------------
# Assembling the chart with its dependencies for offline tests

GO_MODULE_CHARTS: dict[str, tuple[str, str]] = {
    # dependency name -> (Go module, chart directory inside the module)
    "lws": ("sigs.k8s.io/lws", "charts/lws"),
    "gateway-helm": ("github.com/envoyproxy/gateway", "charts/gateway-helm"),
}
"""Dependency charts that are published inside Go modules, so tests can take them offline. The
module's version is the dependency's version in Chart.yaml (with a leading ``v``): one home."""


def go_module_of(name: str, version: str) -> str:
    """``module@version`` of the Go module holding the dependency chart ``name`` at the chart
    ``version`` Chart.yaml pins."""
    return f"{GO_MODULE_CHARTS[name][0]}@{version if version.startswith('v') else 'v' + version}"


STAND_IN_DESCRIPTION = "Stand-in for an offline test: the real chart is not reachable here. Keep it disabled."


def _go_mod_dir(module: str, gomodcache: Path | None) -> Path:
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-modcacherw"}
    if gomodcache is not None:
        env["GOMODCACHE"] = str(gomodcache)
    out = subprocess.run(
        ["go", "mod", "download", "-json", module], check=False, capture_output=True, text=True, env=env
    )
    info = json.loads(out.stdout or "{}")
    if out.returncode != 0 or "Dir" not in info:
        raise RuntimeError(f"go mod download {module} failed: {info.get('Error') or out.stderr.strip()}")
    return Path(info["Dir"])


def assemble(dest: Path, gomodcache: Path | None = None, *, source: Path | None = None) -> Path:
    """Copy the chart to ``dest/llmaz`` with every dependency under ``charts/``; returns the chart dir.

    LWS and Envoy Gateway come from their Go modules (``go mod download``, a cache hit once the Go
    tools are built); the dependencies that cannot be had offline get an empty stand-in chart with
    the real name and version, so they must stay disabled in tests.
    """
    src = source or (repo_root() / CHART_DIR)
    chart = dest / "llmaz"
    shutil.copytree(src, chart, ignore=shutil.ignore_patterns("tests", "__snapshot__"))
    meta = yaml.safe_load((src / "Chart.yaml").read_text())
    for dep in meta.get("dependencies", []):
        name, version = dep["name"], str(dep["version"])
        target = chart / "charts" / name
        if target.exists() or dep.get("repository", "").startswith("file://") or "repository" not in dep:
            continue
        if name in GO_MODULE_CHARTS:
            sub = GO_MODULE_CHARTS[name][1]
            shutil.copytree(_go_mod_dir(go_module_of(name, version), gomodcache) / sub, target)
            _set_chart_version(target, version)
            tmpl = target / "values.tmpl.yaml"
            if tmpl.is_file():  # Envoy Gateway fills its image in at release time
                text = tmpl.read_text()
                text = text.replace("${GatewayImage}", f"docker.io/envoyproxy/gateway:{version}")
                text = text.replace("${GatewayImagePullPolicy}", "IfNotPresent")
                (target / "values.yaml").write_text(text)
                tmpl.unlink()
        else:
            target.mkdir(parents=True)
            (target / "Chart.yaml").write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "v2",
                        "name": name,
                        "version": version,
                        "description": STAND_IN_DESCRIPTION,
                    }
                )
            )
    return chart


def _set_chart_version(chart: Path, version: str) -> None:
    path = chart / "Chart.yaml"
    text = re.sub(r"(?m)^version:.*$", f"version: {version}", path.read_text())
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m llmaz_devkit.chartgen", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="fail with a diff when committed files drift")
    parser.add_argument("--assemble", type=Path, metavar="DIR", help="copy the chart with its dependencies")
    parser.add_argument("--gomodcache", type=Path, help="Go module cache for --assemble")
    args = parser.parse_args(argv)
    if args.assemble:
        print(assemble(args.assemble, args.gomodcache))
        return 0
    return generated.check_or_write(
        repo_root(),
        generate(),
        check=args.check,
        what="generated chart files",
        command="python -m llmaz_devkit.chartgen",
    )


if __name__ == "__main__":
    raise SystemExit(main())
