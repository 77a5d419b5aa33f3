"""Every conformance check can fail: one deliberately broken sample plugin per check.

A conformance suite whose checks never fail proves nothing about the plugins that pass it. Here a
sound sample backend (and autoscaler) passes every check, and for each check at least one variant
of it, broken in exactly the way the check is about (a readiness probe on the wrong port, a
speculative config without the draft model, a drain hook polling the wrong port...), fails it.
``test_every_check_has_a_failing_sample`` keeps it that way when checks are added.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any, ClassVar

import pytest

from llmaz.api import BackendRuntime, RecommendedConfig
from llmaz.plugins import (
    MULTI_HOST_CONFIG,
    SPECULATIVE_CONFIG,
    Autoscaler,
    AutoscalingInput,
    AutoscalingOutput,
    AutoscalingProblem,
    Backend,
    MultiHostRecipe,
    placeholder,
)
from llmaz.testing.conformance import AutoscalerConformanceTests, BackendConformanceTests
from llmaz_backend_vllm import VLLMBackend

# --- a sound backend and its broken variants --------------------------------------------------


class Sound(Backend):
    name: ClassVar[str] = "sound"
    image: ClassVar[str] = "registry.example:5000/team/sound"
    version: ClassVar[str] = "1.0"
    model_name_flag: ClassVar[str | None] = "--served-model-name"
    drain_metrics: ClassVar[tuple[str, ...]] = ("sound_requests_in_flight",)
    supports_speculative_decoding: ClassVar[bool] = True
    supports_multi_host: ClassVar[bool] = True

    def serve_args(self) -> list[str]:
        return ["--model", placeholder("ModelPath"), *self.model_name_args(), "--port", str(self.port)]

    def default_args(self) -> list[str]:
        return self.serve_args()

    def speculative_args(self) -> list[str]:
        return [*self.serve_args(), "--draft-model", placeholder("DraftModelPath")]

    def recommended_configs(self) -> list[RecommendedConfig]:
        return [
            RecommendedConfig(name="default", args=self.default_args()),
            RecommendedConfig(name=SPECULATIVE_CONFIG, args=self.speculative_args()),
            RecommendedConfig(name=MULTI_HOST_CONFIG, args=[*self.serve_args(), "--tp", placeholder("TP")]),
        ]

    def leader_args(self) -> list[str]:
        return [*self.serve_args(), "--tp", placeholder("TP"), "--rank", "$(LWS_WORKER_INDEX)"]

    def worker_args(self) -> list[str]:
        return ["--leader", "$(LWS_LEADER_ADDRESS):7000", "--rank", "$(LWS_WORKER_INDEX)"]

    def multi_host_recipe(self) -> MultiHostRecipe | None:
        return MultiHostRecipe(
            leader_command=["sound"],
            leader_args=self.leader_args(),
            worker_command=["sound-worker"],
            worker_args=self.worker_args(),
        )


def _relabelled(runtime: BackendRuntime, labels: dict[str, str]) -> BackendRuntime:
    manifest = runtime.to_manifest()
    manifest["metadata"]["labels"] = labels
    return BackendRuntime.from_manifest(manifest)


class BadName(Sound):
    name: ClassVar[str] = "Sound_Engine"


class RuntimeWithOtherImage(Sound):
    def backend_runtime(
        self, image: str | None = None, version: str | None = None, *, check_rules: bool = True
    ) -> BackendRuntime:
        return super().backend_runtime(
            image=image or "registry.example/other", version=version, check_rules=check_rules
        )


class RuntimeWithoutLabels(Sound):
    def backend_runtime(
        self, image: str | None = None, version: str | None = None, *, check_rules: bool = True
    ) -> BackendRuntime:
        return _relabelled(super().backend_runtime(image, version, check_rules=check_rules), {"team": "a"})


class IgnoresOverrides(Sound):
    def backend_runtime(
        self, image: str | None = None, version: str | None = None, *, check_rules: bool = True
    ) -> BackendRuntime:
        return super().backend_runtime(check_rules=check_rules)


class TaggedImage(Sound):
    image: ClassVar[str] = "registry.example/sound:1.0"


class NoDefaultConfig(Sound):
    def recommended_configs(self) -> list[RecommendedConfig]:
        return [c for c in super().recommended_configs() if c.name != "default"]


class DuplicateConfig(Sound):
    def recommended_configs(self) -> list[RecommendedConfig]:
        configs = super().recommended_configs()
        return [*configs, configs[0]]


class UnknownPlaceholder(Sound):
    def default_args(self) -> list[str]:
        return [*self.serve_args(), "--tokenizer", "{{ .TokenizerPath }}"]


class MalformedPlaceholder(Sound):
    def default_args(self) -> list[str]:
        return [*self.serve_args(), "--tokenizer", "{{ModelPath}}"]


class TemplatedCommand(Sound):
    def command(self) -> list[str]:
        return ["sound", placeholder("ModelPath")]


class DefaultNeedsFlavorParams(Sound):
    def default_args(self) -> list[str]:
        return [*self.serve_args(), "--tp", placeholder("TP")]


class DefaultServesNoModel(Sound):
    model_name_flag: ClassVar[str | None] = None

    def default_args(self) -> list[str]:
        return ["--port", str(self.port)]


class DeclaredNameFlagMissing(Sound):
    def default_args(self) -> list[str]:
        return ["--model", placeholder("ModelPath"), "--port", str(self.port)]


class UndeclaredNameFlag(Sound):
    model_name_flag: ClassVar[str | None] = None

    def default_args(self) -> list[str]:
        return [*self.serve_args(), "--alias", placeholder("ModelName")]


class ServesOnAnotherPort(Sound):
    port: ClassVar[int] = 9000

    def serve_args(self) -> list[str]:
        # "19000" contains "9000" but is another port.
        return ["--model", placeholder("ModelPath"), *self.model_name_args(), "--port", "19000"]


class ConflictingPortFlag(Sound):
    def speculative_args(self) -> list[str]:
        return [*super().speculative_args(), "--port", "8000"]


class ReadinessProbeOnWrongPort(Sound):
    def readiness_probe(self) -> dict[str, Any] | None:
        return {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5}


class ProbeWithTwoHandlers(Sound):
    def liveness_probe(self) -> dict[str, Any] | None:
        return {"httpGet": {"path": "/health", "port": self.port}, "exec": {"command": ["true"]}}


class DrainOnWrongPort(Sound):
    """llmaz bug 19: the preStop hook polled port 8000 while the server listened on 8080."""

    def drain_script(self) -> str | None:
        script = super().drain_script()
        return script.replace(f":{self.port}/", ":8000/") if script else None


class DrainOnOtherMetric(Sound):
    def drain_script(self) -> str | None:
        script = super().drain_script()
        return script.replace("sound_requests_in_flight", "sound_requests_total") if script else None


class DrainMetricsWithoutHook(Sound):
    def lifecycle(self) -> dict[str, Any] | None:
        return None


class DrainOutlastsGracePeriod(Sound):
    drain_timeout_seconds: ClassVar[int] = 125


class SpeculativeWithoutDraftModel(Sound):
    def speculative_args(self) -> list[str]:
        return [*self.serve_args(), "--num-speculative-tokens", "5"]


class DraftModelInDefault(Sound):
    def default_args(self) -> list[str]:
        return [*self.serve_args(), "--draft-model", placeholder("DraftModelPath")]


class SpeculativeConfigUndeclared(Sound):
    supports_speculative_decoding: ClassVar[bool] = False


class MultiHostFlagWithoutRecipe(Sound):
    def multi_host_recipe(self) -> MultiHostRecipe | None:
        return None


class WorkersWithoutLeaderAddress(Sound):
    def worker_args(self) -> list[str]:
        return ["--leader", "sound-0:7000"]


class UnknownLwsVariable(Sound):
    def worker_args(self) -> list[str]:
        return ["--leader", "$(LWS_LEADER_ADDRESS):7000", "--rank", "$(LWS_RANK)"]


class LeaderWithoutTensorParallelism(Sound):
    def leader_args(self) -> list[str]:
        return [*self.serve_args(), "--rank", "$(LWS_WORKER_INDEX)"]


class LeaderOnAnotherPort(Sound):
    def leader_args(self) -> list[str]:
        return ["--model", placeholder("ModelPath"), "--port", "40000", "--tp", placeholder("TP")]


class RecipeConfigMissing(Sound):
    def recommended_configs(self) -> list[RecommendedConfig]:
        return [c for c in super().recommended_configs() if c.name != MULTI_HOST_CONFIG]


class SingleHostConfigUsesLwsEnv(Sound):
    supports_multi_host: ClassVar[bool] = False

    def multi_host_recipe(self) -> MultiHostRecipe | None:
        return None

    def speculative_args(self) -> list[str]:
        return [*super().speculative_args(), "--rank", "$(LWS_WORKER_INDEX)"]


class WrapperWithoutFlag(Sound):
    """Wraps its entrypoint although it has no flag to pass the device count with."""

    def command(self) -> list[str] | None:
        return ["sound-serve"]

    def device_count_entrypoint(
        self, command: list[str] | None, args: list[str]
    ) -> tuple[list[str], list[str]] | None:
        return ["/bin/sh", "-c", 'exec "$@"', "sh"], [*(command or []), *args]


class WrapperKeepsOldFlag(Sound):
    """A hand-written wrapper that leaves the flag in the args: the engine would get it twice."""

    tensor_parallel_flag: ClassVar[str | None] = "--tp"

    def command(self) -> list[str] | None:
        return ["sound-serve"]

    def device_count_entrypoint(
        self, command: list[str] | None, args: list[str]
    ) -> tuple[list[str], list[str]] | None:
        wrapped = super().device_count_entrypoint(command, args)
        assert wrapped is not None
        return wrapped[0], [*wrapped[1], "--tp", "1"]


BROKEN_BACKENDS: list[tuple[str, type[Backend]]] = [
    ("test_name_is_a_dns_label", BadName),
    ("test_backend_runtime_is_valid_and_round_trips", RuntimeWithOtherImage),
    ("test_labels", RuntimeWithoutLabels),
    ("test_image_and_version_overrides", IgnoresOverrides),
    ("test_image_has_no_tag", TaggedImage),
    ("test_default_config_exists", NoDefaultConfig),
    ("test_config_names_are_unique", DuplicateConfig),
    ("test_every_placeholder_is_known", UnknownPlaceholder),
    ("test_every_placeholder_is_known", MalformedPlaceholder),
    ("test_command_env_and_probes_are_not_templated", TemplatedCommand),
    ("test_default_config_needs_no_flavor_params", DefaultNeedsFlavorParams),
    ("test_model_path_is_used", DefaultServesNoModel),
    ("test_model_name_flag_in_default_args", DeclaredNameFlagMissing),
    ("test_model_name_flag_in_default_args", UndeclaredNameFlag),
    ("test_port_is_used_by_the_server", ServesOnAnotherPort),
    ("test_no_conflicting_port_flag", ConflictingPortFlag),
    ("test_probes_target_the_server_port", ReadinessProbeOnWrongPort),
    ("test_probes_have_one_handler", ProbeWithTwoHandlers),
    ("test_prestop_drains_on_the_real_metrics_port", DrainOnWrongPort),
    ("test_prestop_drains_on_the_real_metrics_port", DrainOnOtherMetric),
    ("test_prestop_drains_on_the_real_metrics_port", DrainMetricsWithoutHook),
    ("test_drain_finishes_before_the_grace_period", DrainOutlastsGracePeriod),
    ("test_speculative_decoding", SpeculativeWithoutDraftModel),
    ("test_speculative_decoding", DraftModelInDefault),
    ("test_speculative_decoding", SpeculativeConfigUndeclared),
    ("test_device_count_entrypoint", WrapperWithoutFlag),
    ("test_device_count_entrypoint", WrapperKeepsOldFlag),
    ("test_multi_host_recipe", MultiHostFlagWithoutRecipe),
    ("test_multi_host_recipe", WorkersWithoutLeaderAddress),
    ("test_multi_host_recipe", UnknownLwsVariable),
    ("test_multi_host_recipe", LeaderWithoutTensorParallelism),
    ("test_multi_host_recipe", LeaderOnAnotherPort),
    ("test_multi_host_recipe", RecipeConfigMissing),
    ("test_multi_host_recipe", SingleHostConfigUsesLwsEnv),
    # Sound itself has no entry point in group `llmaz`, so the packaging check fails for it.
    ("test_entry_point_loads_and_registers_the_backend", Sound),
]

ENTRY_POINT_CHECKS = {
    "test_entry_point_loads_and_registers_the_backend",
    "test_entry_point_loads_and_registers_the_autoscaler",
}


def _checks(suite: type) -> list[str]:
    return sorted(n for n in dir(suite) if n.startswith("test_") and callable(getattr(suite, n)))


def run_backend_check(check: str, backend_class: type[Backend], entry_point: str | None = None) -> None:
    """Run one check of :class:`BackendConformanceTests` as pytest would, fixtures included."""
    suite = type(
        "Suite", (BackendConformanceTests,), {"backend_class": backend_class, "entry_point": entry_point}
    )
    method = getattr(suite(), check)
    backend = backend_class()
    fixtures: dict[str, Any] = {}
    params = inspect.signature(method).parameters
    if "backend" in params:
        fixtures["backend"] = backend
    if "runtime" in params:
        fixtures["runtime"] = backend.backend_runtime()
    if "configs" in params:
        fixtures["configs"] = {c.name: c for c in backend.recommended_configs()}
    method(**fixtures)


@pytest.mark.parametrize(
    "check", [c for c in _checks(BackendConformanceTests) if c not in ENTRY_POINT_CHECKS]
)
def test_the_sound_backend_passes(check: str) -> None:
    run_backend_check(check, Sound)


def test_the_entry_point_check_passes_for_an_installed_backend() -> None:
    run_backend_check("test_entry_point_loads_and_registers_the_backend", VLLMBackend, "vllm")


@pytest.mark.parametrize(
    ("check", "broken"), BROKEN_BACKENDS, ids=[f"{c}-{b.__name__}" for c, b in BROKEN_BACKENDS]
)
def test_the_check_catches_the_broken_backend(check: str, broken: type[Backend]) -> None:
    with pytest.raises(AssertionError):
        run_backend_check(check, broken)


# --- a sound autoscaler and its broken variants ------------------------------------------------


class Calm(Autoscaler):
    name: ClassVar[str] = "calm"
    managed_kinds: ClassVar[tuple[tuple[str, str], ...]] = (("v1", "ConfigMap"),)

    def objects(self, request: AutoscalingInput) -> list[dict[str, Any]]:
        meta = {"name": request.playground.name, "namespace": request.playground.metadata.namespace}
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}]

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        out = AutoscalingOutput(pod_labels={"calm": "yes"}, pod_annotations={"calm/reason": "test"})
        if request.playground.spec.elastic_config is not None:
            out.objects = self.objects(request)
        for flavor in request.flavors[:1]:
            out.node_affinity_hints.per_flavor[flavor.name] = [{"key": "calm", "operator": "Exists"}]
        if not request.flavors:
            out.problems.append(AutoscalingProblem("NoFlavors", "nothing to hint"))
        return out


class BadAutoscalerName(Calm):
    name: ClassVar[str] = "Calm!"


class ReturnsADict(Calm):
    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        return {"objects": []}  # type: ignore[return-value]


class UndeclaredKind(Calm):
    managed_kinds: ClassVar[tuple[tuple[str, str], ...]] = ()


class ObjectInAnotherNamespace(Calm):
    def objects(self, request: AutoscalingInput) -> list[dict[str, Any]]:
        return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}}]


class Restless(Calm):
    counter = itertools.count()

    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        out = super().render(request)
        out.pod_annotations["calm/generation"] = str(next(self.counter))
        return out


class NumericLabel(Calm):
    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        out = super().render(request)
        out.pod_labels["replicas"] = 3  # type: ignore[assignment]
        return out


class HintForUnclaimedFlavor(Calm):
    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        out = super().render(request)
        out.node_affinity_hints.per_flavor["h100"] = [{"key": "calm", "operator": "Exists"}]
        return out


class SentenceAsReason(Calm):
    def render(self, request: AutoscalingInput) -> AutoscalingOutput:
        out = super().render(request)
        out.problems.append(AutoscalingProblem("no scale trigger", "elasticConfig without trigger"))
        return out


BROKEN_AUTOSCALERS: list[tuple[str, type[Autoscaler]]] = [
    ("test_name_is_a_dns_label", BadAutoscalerName),
    ("test_render_returns_an_output", ReturnsADict),
    ("test_objects_are_manifests_of_managed_kinds", UndeclaredKind),
    ("test_objects_are_manifests_of_managed_kinds", ObjectInAnotherNamespace),
    ("test_render_is_deterministic", Restless),
    ("test_pod_metadata_is_strings", NumericLabel),
    ("test_node_affinity_hints_name_claimed_flavors", HintForUnclaimedFlavor),
    ("test_problem_reasons_are_condition_reasons", SentenceAsReason),
    ("test_entry_point_loads_and_registers_the_autoscaler", Calm),
]


def run_autoscaler_check(
    check: str, autoscaler_class: type[Autoscaler], entry_point: str | None = None
) -> None:
    suite = type(
        "Suite",
        (AutoscalerConformanceTests,),
        {"autoscaler_class": autoscaler_class, "entry_point": entry_point},
    )
    getattr(suite(), check)(autoscaler=autoscaler_class())


@pytest.mark.parametrize(
    "check", [c for c in _checks(AutoscalerConformanceTests) if c not in ENTRY_POINT_CHECKS]
)
def test_the_calm_autoscaler_passes(check: str) -> None:
    run_autoscaler_check(check, Calm)


@pytest.mark.parametrize(
    ("check", "broken"), BROKEN_AUTOSCALERS, ids=[f"{c}-{b.__name__}" for c, b in BROKEN_AUTOSCALERS]
)
def test_the_check_catches_the_broken_autoscaler(check: str, broken: type[Autoscaler]) -> None:
    with pytest.raises(AssertionError):
        run_autoscaler_check(check, broken)


@pytest.mark.parametrize(
    ("suite", "broken"),
    [(BackendConformanceTests, BROKEN_BACKENDS), (AutoscalerConformanceTests, BROKEN_AUTOSCALERS)],
    ids=["backend", "autoscaler"],
)
def test_every_check_has_a_failing_sample(suite: type, broken: list[tuple[str, type]]) -> None:
    assert sorted({check for check, _ in broken}) == _checks(suite)
