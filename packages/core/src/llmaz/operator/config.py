"""The operator's configuration: one pydantic model, read from ``--config FILE`` (YAML) and written
by the Helm chart from its ``operator.config`` values.

This model is the single source of the operator settings: the chart's ``values.schema.json`` and the
values reference page are generated from it, so a key the operator does not know is rejected by
``helm install`` as well as by ``llmaz operator run --config``.

Pure data: no kopf, no Kubernetes client (import-linter keeps it so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from llmaz.api._base import ApiModel, Name, ShortString
from llmaz.render.cache import SharedCache
from llmaz.render.dra import DraSettings
from llmaz.render.endpoint_picker import ENDPOINT_PICKER_IMAGE
from llmaz.render.gateway import GatewayRef
from llmaz.render.inference_pool import DEFAULT_ENDPOINT_PICKER_PORT


class BackendOverride(ApiModel):
    """Overrides for the BackendRuntime the operator applies for one installed backend plugin."""

    image: ShortString | None = Field(default=None, description="Engine image repository.")
    version: ShortString | None = Field(default=None, description="Engine image tag.")


class LeaderElection(ApiModel):
    """Leader election on a coordination.k8s.io Lease; standbys write nothing."""

    enabled: bool = Field(default=False, description="Elect a leader (needed with more than one replica).")
    lease_name: Name = Field(default="llmaz-operator", description="Name of the Lease object.")
    lease_namespace: Name | None = Field(
        default=None,
        description="Namespace of the Lease; defaults to the operator's own namespace (POD_NAMESPACE).",
    )
    lease_duration_seconds: int = Field(default=15, ge=2, le=300, description="How long a lease is valid.")
    renew_deadline_seconds: int = Field(default=10, ge=1, le=300, description="Leader gives up after this.")
    retry_period_seconds: int = Field(default=2, ge=1, le=60, description="How often candidates retry.")

    @model_validator(mode="after")
    def _timings_in_order(self) -> LeaderElection:
        """leaseDuration > renewDeadline > retryPeriod, as client-go requires: a leader stops
        writing at its renew deadline, and a standby takes the Lease when its duration has passed;
        a deadline at or past the duration lets the two write at once, and a retry period at or past
        the deadline makes a healthy leader refuse its own writes between renewals."""
        if self.renew_deadline_seconds >= self.lease_duration_seconds:
            raise ValueError(
                f"renewDeadlineSeconds ({self.renew_deadline_seconds}) must be less than "
                f"leaseDurationSeconds ({self.lease_duration_seconds}): a leader past its deadline "
                "would still write while a standby takes the Lease"
            )
        if self.retry_period_seconds >= self.renew_deadline_seconds:
            raise ValueError(
                f"retryPeriodSeconds ({self.retry_period_seconds}) must be less than "
                f"renewDeadlineSeconds ({self.renew_deadline_seconds}): the leader would miss its "
                "deadline between two renewals"
            )
        return self


class Webhook(ApiModel):
    """Admission webhooks for what CEL cannot check; served over TLS from files."""

    enabled: bool = Field(default=False, description="Serve the admission webhooks.")
    port: int = Field(default=9443, ge=1, le=65535, description="HTTPS port of the webhook server.")
    cert_dir: ShortString = Field(
        default="/etc/llmaz/webhook-certs",
        description="Directory holding tls.crt and tls.key (reloaded when they change).",
    )


class FlavorFallback(ApiModel):
    """Moving a workload to the next claimed flavor when its pods cannot be scheduled."""

    unschedulable_seconds: int = Field(
        default=120,
        ge=0,
        le=86400,
        description=(
            "How long a replica's pods may stay Unschedulable on one flavor before the next flavor is "
            "tried (0 disables fallback). Per object: annotation llmaz.io/flavor-fallback-seconds."
        ),
    )
    retry_all_seconds: int = Field(
        default=600,
        ge=10,
        le=86400,
        description="After every flavor failed, retry from the first one this often.",
    )


class ModelLoader(ApiModel):
    """The init container that downloads model weights."""

    image: ShortString | None = Field(
        default=None, description="Loader image; empty means the image the operator itself runs."
    )
    shared_cache: SharedCache | None = Field(
        default=None,
        description=(
            "Cache models per node in a host path or PVC instead of one emptyDir per pod, so replicas "
            "on a node download once (docs: concepts/model-loader, Shared per-node cache)."
        ),
    )
    preheat_namespace: Name | None = Field(
        default=None,
        description=(
            "Namespace of the loader Jobs that preheat models labelled llmaz.io/model-preheat (and "
            "of their Secrets and, with claimName, the cache PVC); empty means the operator's own "
            "namespace (POD_NAMESPACE)."
        ),
    )


class Integrations(ApiModel):
    """Objects the operator renders next to each served model, one switch per kind (all off).

    A single Playground/Service opts out with the annotation ``llmaz.io/disable-integrations``
    (comma-separated ``ai-gateway``, ``http-route``, ``inference-pool``, ``pod-monitor`` or ``all``).
    """

    ai_gateway: bool = Field(
        default=False,
        description=(
            "Envoy AI Gateway: an AIServiceBackend and Backend per model, one AIGatewayRoute per Gateway."
        ),
    )
    http_route: bool = Field(
        default=False,
        description="A Gateway API HTTPRoute per model (when Envoy AI Gateway is not installed).",
    )
    gateway_name: Name = Field(default="llmaz-gateway", description="Gateway the routes attach to.")
    gateway_namespace: Name | None = Field(
        default=None, description="Namespace of that Gateway; empty means each route's own namespace."
    )
    inference_pool: bool = Field(
        default=False,
        description=(
            "Gateway API Inference Extension v1: an InferencePool per model (with an "
            "InferenceObjective and InferenceModelRewrite when its annotations ask), and the "
            "routes above send the model's requests to it."
        ),
    )
    endpoint_picker_port: int = Field(
        default=DEFAULT_ENDPOINT_PICKER_PORT,
        ge=1,
        le=65535,
        description="gRPC port of each pool's <name>-epp Service.",
    )
    endpoint_picker_fail_open: bool = Field(
        default=False, description="Route requests even when the endpoint picker does not answer."
    )
    endpoint_picker_image: str = Field(
        default=ENDPOINT_PICKER_IMAGE,
        max_length=512,
        description=(
            "Image of the endpoint picker the operator deploys for each pool (<name>-epp: Deployment, "
            "Service, ServiceAccount, Role, RoleBinding); empty: deploy none (bring your own)."
        ),
    )
    pod_monitor: bool = Field(
        default=False,
        description="A Prometheus Operator PodMonitor per model on its engine's metrics endpoint.",
    )
    monitor_labels: dict[Name, ShortString] = Field(
        default_factory=dict,
        description="Extra labels on PodMonitors (to match a Prometheus podMonitorSelector).",
    )
    scrape_interval: ShortString = Field(default="30s", description="Scrape interval of the PodMonitors.")

    @staticmethod
    def setting_of(integration: str) -> str:
        """The setting (camelCase, as in the config file) that switches ``integration`` on, e.g.
        ``aiGateway`` for ``ai-gateway``."""
        head, *rest = integration.split("-")
        return head + "".join(part.title() for part in rest)

    @property
    def any_on(self) -> bool:
        """Whether any integration is switched on (a workload annotation can only turn one off)."""
        return self.ai_gateway or self.http_route or self.inference_pool or self.pod_monitor

    def render_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`llmaz.render.integrations.render_integrations`."""
        return {
            "gateway": GatewayRef(self.gateway_name, self.gateway_namespace),
            "ai_gateway": self.ai_gateway,
            "http_route": self.http_route,
            "inference_pool": self.inference_pool,
            "endpoint_picker_port": self.endpoint_picker_port,
            "endpoint_picker_fail_open": self.endpoint_picker_fail_open,
            "endpoint_picker_image": self.endpoint_picker_image or None,
            "pod_monitor": self.pod_monitor,
            "monitor_labels": dict(self.monitor_labels),
            "scrape_interval": self.scrape_interval,
        }


class OperatorConfig(ApiModel):
    """Settings of ``llmaz operator run`` (file given by ``--config``; flags override it)."""

    namespaces: list[Name] = Field(
        default_factory=list, max_length=256, description="Namespaces to watch; empty means all namespaces."
    )
    metrics_port: int = Field(default=8080, ge=1, le=65535, description="Prometheus /metrics port.")
    health_port: int = Field(default=8081, ge=1, le=65535, description="/healthz and /readyz port.")
    resync_seconds: int = Field(
        default=600,
        ge=10,
        le=86400,
        description="Slow resync of every object; a resync that finds nothing different writes nothing.",
    )
    workers: int = Field(
        default=32, ge=1, le=1024, description="Objects reconciled (and API calls made) at the same time."
    )
    backends: dict[Name, BackendOverride] = Field(
        default_factory=dict,
        description="Image/version overrides per backend plugin name for the BackendRuntimes it applies.",
    )
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    webhook: Webhook = Field(default_factory=Webhook)
    flavor_fallback: FlavorFallback = Field(default_factory=FlavorFallback)
    model_loader: ModelLoader = Field(default_factory=ModelLoader)
    scheduler_name: str = Field(
        default="",
        max_length=253,
        description=(
            "schedulerName of every inference pod template that names none (llmaz (Go)'s global "
            "scheduler-name), e.g. a second scheduler; empty: the cluster's default scheduler."
        ),
    )
    dra: DraSettings = Field(default_factory=DraSettings)
    integrations: Integrations = Field(default_factory=Integrations)


class ConfigError(ValueError):
    """The operator configuration file cannot be read or is invalid (message names file and field)."""


def load_config(path: Path | None) -> OperatorConfig:
    """Read ``path`` (YAML); ``None`` gives the defaults. Errors name the file and the field."""
    if path is None:
        return OperatorConfig()
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"{path}: cannot read: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if data is None:
        return OperatorConfig()
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    try:
        return OperatorConfig.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '<root>'}: {e['msg']}" for e in err.errors()
        )
        raise ConfigError(f"{path}: {problems}") from err
