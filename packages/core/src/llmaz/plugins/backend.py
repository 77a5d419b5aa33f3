"""The :class:`Backend` base class: everything llmaz knows about one inference engine.

Engine knowledge (image, command, flags, probes, drain, metrics) lives only in subclasses of this
class, shipped as plugins. The host turns a backend into a ``BackendRuntime`` object with
:meth:`Backend.backend_runtime`; the renderer never looks at engine-specific fields.
"""

from __future__ import annotations

import re
import shlex
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from llmaz.api import BackendRuntime, EnvVar, RecommendedConfig
from llmaz.api.conventions import (
    DEFAULT_CONFIG,
    DEFAULT_GRACE_PERIOD_SECONDS,
    KNOWN_VARIABLES,
    MANAGED_BY,
    MANAGER,
    MODEL_NAME,
    MULTI_HOST_CONFIG,
    PLACEHOLDER,
    SPECULATIVE_CONFIG,
    placeholder,
)
from llmaz.plugins.devices import wrap_with_device_count
from llmaz.plugins.metrics import EngineMetrics

__all__ = [
    "BACKEND_RUNTIME_LABELS",
    "DEFAULT_CONFIG",
    "DEFAULT_GRACE_PERIOD_SECONDS",
    "KNOWN_VARIABLES",
    "LWS_ENV",
    "MULTI_HOST_CONFIG",
    "PLACEHOLDER",
    "SPECULATIVE_CONFIG",
    "Backend",
    "MultiHostRecipe",
    "placeholder",
]

LWS_ENV: frozenset[str] = frozenset({"LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"})
"""Environment variables LeaderWorkerSet sets in every pod of a group (used as ``$(NAME)``)."""

BACKEND_RUNTIME_LABELS: dict[str, str] = {
    "app.kubernetes.io/name": "backendruntime",
    "app.kubernetes.io/part-of": "llmaz",
    MANAGED_BY: MANAGER,
}
"""Labels on every BackendRuntime produced from a plugin."""


class MultiHostRecipe(BaseModel):
    """How one replica spans several pods (a LeaderWorkerSet group) for this engine.

    Args are templated like recommended-config args (``{{ .ModelPath }}``, ``{{ .TP }}`` ...) and may
    use Kubernetes ``$(VAR)`` expansion of the LWS environment: ``$(LWS_LEADER_ADDRESS)``,
    ``$(LWS_GROUP_SIZE)`` and ``$(LWS_WORKER_INDEX)``. The Playground's own args
    (``spec.backendRuntimeConfig.args``) are appended to both the leader's and the workers' args: a
    recipe whose command is a shell script (``sh -c SCRIPT``) must hand them on, with ``"$@"`` in
    the script and one word for ``$0`` after it (``[SCRIPT, "engine"]``), or they are lost.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    config_name: str = Field(
        default=MULTI_HOST_CONFIG, description="The recommended config this recipe belongs to."
    )
    leader_command: list[str] = Field(min_length=1)
    leader_args: list[str] = Field(default_factory=list)
    worker_command: list[str] = Field(min_length=1)
    worker_args: list[str] = Field(default_factory=list)
    worker_serves_http: bool = Field(
        default=False, description="Whether worker pods also answer HTTP (and so get the probes)."
    )
    group_size_param: str | None = Field(
        default=None,
        description="Flavor param holding the pods per group (e.g. PP); None: set by the Service.",
    )
    tensor_parallel_spans_group: bool = Field(
        default=False,
        description=(
            "Whether the engine's tensor-parallel degree counts the GPUs of the whole group "
            "(SGLang's --tp-size with --nnodes), so {{ .TP }} defaults to the GPUs of one pod times the "
            "pods per group; False: one pod's (vLLM, whose pipeline stages span the nodes)."
        ),
    )


class Backend(ABC):
    """One inference engine. Subclass it, set the class variables and implement the two methods.

    Required: :attr:`name`, :attr:`image`, :attr:`version`, :meth:`recommended_configs`. The rest has
    defaults that fit an engine serving an OpenAI-compatible API over HTTP on :attr:`port` with a
    ``/health`` endpoint.
    """

    # --- identity -------------------------------------------------------------------------------
    name: ClassVar[str]
    """BackendRuntime name, referenced by ``backendRuntimeConfig.backendName`` (a DNS label)."""
    image: ClassVar[str]
    """Default image repository, without the tag."""
    version: ClassVar[str]
    """Default image tag."""
    engine: ClassVar[str] = ""
    """Human name of the engine, for docs (``vLLM``)."""
    docs_url: ClassVar[str] = ""
    """Where the engine documents the flags used."""

    # --- serving --------------------------------------------------------------------------------
    port: ClassVar[int] = 8080
    """The HTTP port the server really listens on (the ``-lb`` Service targets it)."""
    metrics_port: ClassVar[int | None] = None
    """Port of the Prometheus endpoint; ``None`` means the same as :attr:`port`."""
    metrics_path: ClassVar[str | None] = "/metrics"
    """Path of the Prometheus endpoint; ``None`` when the engine exports no metrics."""
    key_metrics: ClassVar[EngineMetrics | None] = None
    """Names of the engine's key series (running/waiting requests, TTFT, tokens, KV cache), used by
    dashboards and metric autoscalers; ``None`` when the engine exports no Prometheus metrics."""
    model_name_flag: ClassVar[str | None] = None
    """Flag that makes the OpenAI model id equal the OpenModel name (``--served-model-name``)."""
    tensor_parallel_flag: ClassVar[str | None] = None
    """Flag that sets the tensor-parallel degree of a single-host server (``--tensor-parallel-size``).
    When set, a single-host render adds it with the selected flavor's ``TP`` param, defaulting to the
    number of accelerators the flavor gives one pod (only when that is more than one). In DRA mode,
    where the scheduler picks the flavor, the engine is started through a wrapper that counts the
    GPUs allocated to the container and passes that count (:meth:`device_count_entrypoint`)."""
    tensor_parallel_aliases: ClassVar[tuple[str, ...]] = ()
    """Other names the engine takes for :attr:`tensor_parallel_flag` (vLLM: ``-tp``). Args that set
    the degree under any of them, or with ``_`` for ``-`` (``--tensor_parallel_size``), get no
    flag added: the user's value stands."""

    # --- probes ---------------------------------------------------------------------------------
    health_path: ClassVar[str] = "/health"
    readiness_path: ClassVar[str | None] = None
    """Readiness path; ``None`` means :attr:`health_path`."""

    # --- graceful drain -------------------------------------------------------------------------
    drain_metrics: ClassVar[tuple[str, ...]] = ()
    """Prometheus gauges counting in-flight requests; the preStop hook waits until all are 0."""
    drain_timeout_seconds: ClassVar[int] = 100
    """Upper bound of the preStop wait; below :data:`DEFAULT_GRACE_PERIOD_SECONDS`."""

    # --- capabilities ---------------------------------------------------------------------------
    supports_speculative_decoding: ClassVar[bool] = False
    supports_multi_host: ClassVar[bool] = False

    # ------------------------------------------------------------------------------------------
    @property
    def effective_metrics_port(self) -> int:
        return self.metrics_port if self.metrics_port is not None else self.port

    def command(self) -> list[str] | None:
        """Container command; ``None`` keeps the image's entrypoint."""
        return None

    def envs(self) -> list[EnvVar]:
        """Container environment common to every config."""
        return []

    @abstractmethod
    def recommended_configs(self) -> list[RecommendedConfig]:
        """Named presets; must contain ``default``. Args use llmaz placeholders."""

    def model_name_args(self) -> list[str]:
        """The args that set the OpenAI model id to the OpenModel name (empty when unsupported)."""
        if self.model_name_flag is None:
            return []
        return [self.model_name_flag, placeholder(MODEL_NAME)]

    def multi_host_recipe(self) -> MultiHostRecipe | None:
        """How to run one replica over several pods, or ``None`` when unsupported."""
        return None

    def device_count_entrypoint(
        self, command: list[str] | None, args: list[str]
    ) -> tuple[list[str], list[str]] | None:
        """Command and args that start the engine with the parallelism of the GPUs it was given.

        Used in DRA mode, where the scheduler picks among flavors with different device counts.
        The default wraps ``command args`` in :func:`llmaz.plugins.devices.wrap_with_device_count`
        with :attr:`tensor_parallel_flag`; ``None`` when the engine has no such flag or the command is
        the image's entrypoint (unknown, so it cannot be wrapped).
        """
        if self.tensor_parallel_flag is None or not command:
            return None
        return wrap_with_device_count(command, args, self.tensor_parallel_flag, self.tensor_parallel_aliases)

    # --- probes -------------------------------------------------------------------------------
    def _http_get(self, path: str) -> dict[str, Any]:
        return {"path": path, "port": self.port}

    def startup_probe(self) -> dict[str, Any] | None:
        """Allows up to 5 minutes for the model to load before liveness kicks in."""
        return {"httpGet": self._http_get(self.health_path), "periodSeconds": 10, "failureThreshold": 30}

    def liveness_probe(self) -> dict[str, Any] | None:
        return {
            "httpGet": self._http_get(self.health_path),
            "initialDelaySeconds": 15,
            "periodSeconds": 10,
            "failureThreshold": 3,
        }

    def readiness_probe(self) -> dict[str, Any] | None:
        return {
            "httpGet": self._http_get(self.readiness_path or self.health_path),
            "initialDelaySeconds": 5,
            "periodSeconds": 5,
            "failureThreshold": 3,
        }

    # --- lifecycle ----------------------------------------------------------------------------
    def drain_script(self) -> str | None:
        """A POSIX shell script that waits until every :attr:`drain_metrics` gauge reads 0.

        It scrapes ``http://127.0.0.1:<metrics port><metrics path>`` (the port the server really
        listens on), stops early when the endpoint stops answering, and gives up after
        :attr:`drain_timeout_seconds`. Progress goes to PID 1's stdout so it shows in ``kubectl logs``.
        """
        if not self.drain_metrics or not self.metrics_path:
            return None
        url = f"http://127.0.0.1:{self.effective_metrics_port}{self.metrics_path}"
        pattern = "|".join(re.escape(m) for m in self.drain_metrics)
        awk = f"/^({pattern})[{{ ]/ {{ if ($NF + 0 > 0) busy = 1 }} END {{ print busy + 0 }}"
        return "\n".join(
            [
                f"url={shlex.quote(url)}",
                f"deadline=$(( $(date +%s) + {self.drain_timeout_seconds} ))",
                'log() { echo "llmaz preStop: $*" > /proc/1/fd/1 2>/dev/null || true; }',
                "scrape() {",
                '  if command -v curl >/dev/null 2>&1; then curl -fsS --max-time 3 "$url";',
                '  elif command -v wget >/dev/null 2>&1; then wget -q -T 3 -O - "$url";',
                "  else python3 -c 'import sys, urllib.request as u; "
                'sys.stdout.write(u.urlopen(sys.argv[1], timeout=3).read().decode())\' "$url"; fi',
                "}",
                "log 'draining in-flight requests'",
                'while [ "$(date +%s)" -lt "$deadline" ]; do',
                "  body=$(scrape) || { log 'metrics endpoint gone, nothing to drain'; exit 0; }",
                f"  busy=$(printf '%s\\n' \"$body\" | awk {shlex.quote(awk)})",
                "  if [ \"$busy\" = 0 ]; then log 'drained'; exit 0; fi",
                "  sleep 2",
                "done",
                "log 'drain timeout reached'",
            ]
        )

    def lifecycle(self) -> dict[str, Any] | None:
        """Container lifecycle: a preStop hook that drains in-flight requests, when possible."""
        script = self.drain_script()
        if script is None:
            return None
        return {"preStop": {"exec": {"command": ["/bin/sh", "-c", script]}}}

    # --- the BackendRuntime -------------------------------------------------------------------
    def backend_runtime(
        self, image: str | None = None, version: str | None = None, *, check_rules: bool = True
    ) -> BackendRuntime:
        """The ``BackendRuntime`` object of this engine, validated by the API model.

        :param image: overrides :attr:`image` (e.g. a mirror registry).
        :param version: overrides :attr:`version`.
        :param check_rules: also evaluate the CRD's CEL rules offline (see
            :meth:`~llmaz.api.Resource.from_manifest`); the operator, whose apply the API server
            checks against the same rules, passes False.
        :raises pydantic.ValidationError: when the backend produces an invalid object.
        """
        envs = self.envs()
        spec: dict[str, Any] = {
            "image": image or self.image,
            "version": version or self.version,
            "recommendedConfigs": [c.to_dict() for c in self.recommended_configs()],
        }
        optional: dict[str, Any] = {
            "command": self.command(),
            "envs": [e.to_dict() for e in envs] if envs else None,
            "lifecycle": self.lifecycle(),
            "startupProbe": self.startup_probe(),
            "livenessProbe": self.liveness_probe(),
            "readinessProbe": self.readiness_probe(),
        }
        spec.update({k: v for k, v in optional.items() if v is not None})
        return BackendRuntime.from_manifest(
            {
                "apiVersion": BackendRuntime.api_version_string(),
                "kind": BackendRuntime.kind_name(),
                "metadata": {"name": self.name, "labels": dict(BACKEND_RUNTIME_LABELS)},
                "spec": spec,
            },
            check_rules=check_rules,
        )
