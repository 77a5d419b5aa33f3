"""Conformance suites for plugin packages: subclass, set one class variable, and run pytest.

::

    from llmaz.testing.conformance import BackendConformanceTests
    from llmaz_backend_vllm import VLLMBackend

    class TestVLLMConformance(BackendConformanceTests):
        backend_class = VLLMBackend

The suites check what the renderer relies on: a valid BackendRuntime, a ``default`` config, only
known placeholders, one HTTP port used consistently by args, probes and the drain hook, the
model-name flag, speculative decoding with the draft model, multi-host recipes on LWS variables,
and that the package's entry point loads and registers the class.
"""

from __future__ import annotations

import itertools
import re
from importlib import metadata
from typing import Any, ClassVar

import pytest

from llmaz.api import BackendRuntime, OpenModel, Playground, RecommendedConfig
from llmaz.api.conventions import DRAFT_MODEL_PATH, MODEL_NAME, MODEL_PATH, is_dns_label
from llmaz.plugins import (
    BACKEND_RUNTIME_LABELS,
    DEFAULT_CONFIG,
    ENTRY_POINT_GROUP,
    KNOWN_VARIABLES,
    SPECULATIVE_CONFIG,
    Autoscaler,
    AutoscalingInput,
    AutoscalingOutput,
    Backend,
    PluginManager,
)
from llmaz.plugins.backend import DEFAULT_GRACE_PERIOD_SECONDS, LWS_ENV, PLACEHOLDER

__all__ = [
    "AutoscalerConformanceTests",
    "BackendConformanceTests",
    "rendered_commands",
    "sample_autoscaling_inputs",
]

_ANY_BRACES = re.compile(r"\{\{(.*?)\}\}")
_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_REASON = re.compile(r"^[A-Z][A-Za-z0-9]*$")


def _variables(texts: list[str]) -> list[str]:
    """Every ``{{ ... }}`` in ``texts``; malformed ones are returned verbatim so checks fail on them."""
    found: list[str] = []
    for text in texts:
        for match in _ANY_BRACES.finditer(text):
            whole = match.group(0)
            ok = PLACEHOLDER.fullmatch(whole)
            found.append(ok.group(1) if ok else whole)
    return found


def rendered_commands(backend: Backend) -> dict[str, tuple[list[str], list[str]]]:
    """Every container command and args the backend renders, by where they go: ``config <name>``
    (its command, ``[]`` for the image's entrypoint, with that recommended config's args) and, for a
    multi-host backend, ``multi-host leader`` and ``multi-host worker``."""
    command = backend.command() or []
    found = {f"config {c.name}": (list(command), list(c.args or [])) for c in backend.recommended_configs()}
    recipe = backend.multi_host_recipe()
    if recipe is not None:
        found["multi-host leader"] = (list(recipe.leader_command), list(recipe.leader_args))
        found["multi-host worker"] = (list(recipe.worker_command), list(recipe.worker_args))
    return found


def _probe_ports(probe: dict[str, Any] | None) -> list[Any]:
    if not probe:
        return []
    return [probe[h]["port"] for h in ("httpGet", "tcpSocket", "grpc") if h in probe and "port" in probe[h]]


def _entry_point(name: str) -> metadata.EntryPoint | None:
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep
    return None


def _loaded_manager(entry_point: str) -> PluginManager:
    others = {ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)} - {entry_point}
    manager = PluginManager(autoload=True, disabled=others, trace=False, environ={})
    manager.load()
    return manager


class BackendConformanceTests:
    """Inherit and set :attr:`backend_class` (and :attr:`entry_point` when it differs from the name)."""

    backend_class: ClassVar[type[Backend]]
    entry_point: ClassVar[str | None] = None
    """Entry-point name in group ``llmaz``; defaults to the backend name."""

    @pytest.fixture
    def backend(self) -> Backend:
        return self.backend_class()

    @pytest.fixture
    def runtime(self, backend: Backend) -> BackendRuntime:
        return backend.backend_runtime()

    @pytest.fixture
    def configs(self, backend: Backend) -> dict[str, RecommendedConfig]:
        return {c.name: c for c in backend.recommended_configs()}

    # --- the object ---------------------------------------------------------------------------
    def test_name_is_a_dns_label(self, backend: Backend) -> None:
        assert is_dns_label(backend.name), backend.name

    def test_backend_runtime_is_valid_and_round_trips(
        self, backend: Backend, runtime: BackendRuntime
    ) -> None:
        assert runtime.name == backend.name
        assert runtime.spec.image == backend.image
        assert runtime.spec.version == backend.version
        assert BackendRuntime.from_manifest(runtime.to_manifest()) == runtime

    def test_labels(self, runtime: BackendRuntime) -> None:
        assert runtime.metadata.labels == BACKEND_RUNTIME_LABELS

    def test_image_and_version_overrides(self, backend: Backend) -> None:
        runtime = backend.backend_runtime(image="registry.example/mirror", version="test-tag")
        assert (runtime.spec.image, runtime.spec.version) == ("registry.example/mirror", "test-tag")

    def test_image_has_no_tag(self, backend: Backend) -> None:
        last = backend.image.rsplit("/", 1)[-1]
        assert ":" not in last, "put the tag in `version`"
        assert "@" not in backend.image, "put the digest in `version`"

    # --- configs and placeholders ----------------------------------------------------------------
    def test_default_config_exists(self, configs: dict[str, RecommendedConfig]) -> None:
        assert DEFAULT_CONFIG in configs

    def test_config_names_are_unique(self, backend: Backend) -> None:
        names = [c.name for c in backend.recommended_configs()]
        assert len(names) == len(set(names)), names

    def test_every_placeholder_is_known(self, backend: Backend) -> None:
        texts = [word for parts in rendered_commands(backend).values() for part in parts for word in part]
        unknown = sorted(set(_variables(texts)) - KNOWN_VARIABLES)
        assert not unknown, f"unknown or malformed placeholders {unknown}; known: {sorted(KNOWN_VARIABLES)}"

    def test_command_env_and_probes_are_not_templated(self, runtime: BackendRuntime) -> None:
        spec = runtime.spec.model_dump(mode="json", exclude={"recommended_configs"})
        assert not _variables([str(spec)]), "only recommended-config args are templated"

    def test_default_config_needs_no_flavor_params(self, configs: dict[str, RecommendedConfig]) -> None:
        used = set(_variables(configs[DEFAULT_CONFIG].args or []))
        assert used <= {MODEL_PATH, MODEL_NAME}, f"default config must render for any flavor: {used}"

    def test_model_path_is_used(self, configs: dict[str, RecommendedConfig]) -> None:
        used = set(_variables(configs[DEFAULT_CONFIG].args or []))
        assert used & {MODEL_PATH, MODEL_NAME}, "the default config never says which model to serve"

    def test_model_name_flag_in_default_args(
        self, backend: Backend, configs: dict[str, RecommendedConfig]
    ) -> None:
        args = configs[DEFAULT_CONFIG].args or []
        pairs = list(itertools.pairwise(args))
        if backend.model_name_flag is None:
            # Without a declared flag, no flag may carry the model name either (the declaration is
            # what docs and the supported-engines table tell users about the OpenAI model id).
            named = [a for a, b in pairs if a.startswith("-") and _variables([b]) == [MODEL_NAME]]
            assert not named, f"args pass {{{{ .ModelName }}}} via {named} but model_name_flag is None"
            return
        assert any(a == backend.model_name_flag and _variables([b]) == [MODEL_NAME] for a, b in pairs), (
            f"default args lack `{backend.model_name_flag} {{{{ .ModelName }}}}`: {args}"
        )

    # --- ports, probes and drain -----------------------------------------------------------------
    def test_port_is_used_by_the_server(self, backend: Backend, runtime: BackendRuntime) -> None:
        default = next(c for c in runtime.spec.recommended_configs or [] if c.name == DEFAULT_CONFIG)
        port = str(backend.port)
        words = [w for a in default.args or [] for w in a.split()]
        words += [e.value or "" for e in runtime.spec.envs or []]
        # A whole word: the port itself, ``--port=8080`` or ``host:8080`` ("18080" does not count).
        assert any(w == port or re.search(rf"[=:]{port}$", w) for w in words), (
            f"port {backend.port} appears neither in default args nor envs"
        )

    def test_no_conflicting_port_flag(self, backend: Backend, configs: dict[str, RecommendedConfig]) -> None:
        for config in configs.values():
            args = config.args or []
            for flag, value in itertools.pairwise(args):
                if flag == "--port":
                    assert value == str(backend.port), f"config {config.name} serves on {value}"

    def test_probes_target_the_server_port(self, backend: Backend, runtime: BackendRuntime) -> None:
        spec = runtime.spec
        for probe in (spec.startup_probe, spec.readiness_probe, spec.liveness_probe):
            for port in _probe_ports(probe):
                assert port in (backend.port, "http"), f"probe on port {port}, server on {backend.port}"

    def test_probes_have_one_handler(self, runtime: BackendRuntime) -> None:
        spec = runtime.spec
        for probe in (spec.startup_probe, spec.readiness_probe, spec.liveness_probe):
            if probe:
                handlers = [h for h in ("httpGet", "tcpSocket", "exec", "grpc") if h in probe]
                assert len(handlers) == 1, probe

    def test_prestop_drains_on_the_real_metrics_port(self, backend: Backend, runtime: BackendRuntime) -> None:
        lifecycle = runtime.spec.lifecycle
        if not lifecycle or "preStop" not in lifecycle:
            # No drain: the engine must then declare no drain metrics (it drains on SIGTERM itself).
            assert not backend.drain_metrics, "drain_metrics declared but no preStop hook produced"
            return
        script = " ".join(lifecycle["preStop"]["exec"]["command"])
        assert f":{backend.effective_metrics_port}{backend.metrics_path}" in script
        for metric in backend.drain_metrics:
            assert metric in script

    def test_drain_finishes_before_the_grace_period(self, backend: Backend) -> None:
        assert 0 < backend.drain_timeout_seconds <= DEFAULT_GRACE_PERIOD_SECONDS - 10

    # --- capabilities ----------------------------------------------------------------------------
    def test_speculative_decoding(self, backend: Backend, configs: dict[str, RecommendedConfig]) -> None:
        assert (SPECULATIVE_CONFIG in configs) == backend.supports_speculative_decoding
        for name, config in configs.items():
            uses_draft = DRAFT_MODEL_PATH in _variables(config.args or [])
            assert uses_draft == (name == SPECULATIVE_CONFIG), f"config {name}: DraftModelPath misuse"

    def test_device_count_entrypoint(self, backend: Backend, configs: dict[str, RecommendedConfig]) -> None:
        """DRA mode: with a parallelism flag, the default config's command can be wrapped and the
        wrapper passes the flag exactly once, after the engine's own args."""
        command = backend.command()
        args = list(configs[DEFAULT_CONFIG].args or [])
        wrapped = backend.device_count_entrypoint(command, args)
        if backend.tensor_parallel_flag is None or not command:
            # no flag to pass, or an image entrypoint that cannot be wrapped: no wrapper (DRA mode
            # then refuses flavors with different accelerator counts for this backend)
            assert wrapped is None, "a wrapper without a tensor_parallel_flag or a command"
            return
        assert wrapped is not None
        new_command, new_args = wrapped
        assert new_command[:2] == ["/bin/sh", "-c"]
        assert new_args[: len(command)] == command
        assert backend.tensor_parallel_flag not in new_args
        assert f'"$@" {backend.tensor_parallel_flag} "$n"' in new_command[2]

    def test_multi_host_recipe(self, backend: Backend, configs: dict[str, RecommendedConfig]) -> None:
        recipe = backend.multi_host_recipe()
        assert (recipe is not None) == backend.supports_multi_host
        if recipe is None:
            # Single-host engine: the capability flag above already says so; no config may look
            # like a multi-host recipe (LWS env references) either.
            for config in configs.values():
                assert not _K8S_VAR.findall(" ".join(config.args or [])), f"{config.name} uses LWS env"
            return
        assert recipe.config_name in configs, "the recipe's config must be a recommended config"
        worker = " ".join([*recipe.worker_command, *recipe.worker_args])
        leader = " ".join([*recipe.leader_command, *recipe.leader_args])
        assert "$(LWS_LEADER_ADDRESS)" in worker, "workers must find the leader through LWS"
        refs = set(_K8S_VAR.findall(worker + " " + leader))
        assert refs <= LWS_ENV, f"unknown $(VAR) references {sorted(refs - LWS_ENV)}"
        assert "TP" in _variables([leader]), "the leader must set tensor parallelism from {{ .TP }}"
        assert str(backend.port) in leader, "the leader must serve HTTP on the backend port"

    # --- packaging -------------------------------------------------------------------------------
    def test_entry_point_loads_and_registers_the_backend(self, backend: Backend) -> None:
        name = self.entry_point or backend.name
        ep = _entry_point(name)
        assert ep is not None, f"no entry point {name!r} in group {ENTRY_POINT_GROUP!r}"
        manager = _loaded_manager(name)
        assert not manager.errors, [str(e) for e in manager.errors]
        assert isinstance(manager.get_backend(backend.name), self.backend_class)


def sample_autoscaling_inputs() -> list[AutoscalingInput]:
    """Representative inputs: plain, elastic with a trigger, elastic without, flavors with params."""
    model = OpenModel.from_manifest(
        {
            "apiVersion": "llmaz.io/v1alpha1",
            "kind": "OpenModel",
            "metadata": {"name": "sample"},
            "spec": {
                "familyName": "sample",
                "source": {"modelHub": {"modelID": "org/sample"}},
                "inferenceConfig": {
                    "flavors": [
                        {
                            "name": "a100",
                            "limits": {"nvidia.com/gpu": 8},
                            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
                            "params": {"INSTANCE-TYPE": "p4d.24xlarge", "CAPACITY-TYPE": "spot,on-demand"},
                        },
                        {
                            "name": "l4",
                            "limits": {"nvidia.com/gpu": 1},
                            "params": {"INSTANCE-TYPE": "g6.xlarge"},
                        },
                    ]
                },
            },
        }
    )

    def playground(elastic: dict[str, Any] | None) -> Playground:
        spec: dict[str, Any] = {"modelClaim": {"modelName": "sample"}}
        if elastic is not None:
            spec["elasticConfig"] = elastic
        return Playground.from_manifest(
            {
                "apiVersion": "inference.llmaz.io/v1alpha1",
                "kind": "Playground",
                "metadata": {"name": "sample", "namespace": "team-a"},
                "spec": spec,
            }
        )

    cpu_metric = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}},
    }
    flavors = list(model.spec.inference_config.flavors or []) if model.spec.inference_config else []
    return [
        AutoscalingInput(playground=playground(None), models=[model]),
        AutoscalingInput(
            playground=playground(
                {"minReplicas": 1, "maxReplicas": 4, "scaleTrigger": {"hpa": {"metrics": [cpu_metric]}}}
            ),
            models=[model],
            flavors=flavors,
        ),
        AutoscalingInput(playground=playground({"maxReplicas": 3}), models=[model]),
        AutoscalingInput(playground=playground(None), models=[model], flavors=flavors),
    ]


class AutoscalerConformanceTests:
    """Inherit and set :attr:`autoscaler_class`; override :meth:`inputs` to add cases."""

    autoscaler_class: ClassVar[type[Autoscaler]]
    entry_point: ClassVar[str | None] = None

    @pytest.fixture
    def autoscaler(self) -> Autoscaler:
        return self.autoscaler_class()

    def inputs(self) -> list[AutoscalingInput]:
        return sample_autoscaling_inputs()

    def _outputs(self, autoscaler: Autoscaler) -> list[tuple[AutoscalingInput, AutoscalingOutput]]:
        return [(request, autoscaler.render(request)) for request in self.inputs()]

    def test_name_is_a_dns_label(self, autoscaler: Autoscaler) -> None:
        assert is_dns_label(autoscaler.name), autoscaler.name

    def test_render_returns_an_output(self, autoscaler: Autoscaler) -> None:
        for _inp, out in self._outputs(autoscaler):
            assert isinstance(out, AutoscalingOutput)

    def test_objects_are_manifests_of_managed_kinds(self, autoscaler: Autoscaler) -> None:
        for request, out in self._outputs(autoscaler):
            for obj in out.objects:
                assert obj.get("apiVersion")
                assert obj.get("kind")
                assert obj.get("metadata", {}).get("name")
                assert (obj["apiVersion"], obj["kind"]) in autoscaler.managed_kinds, (
                    "declare every kind you render in managed_kinds, so stale objects get deleted"
                )
                namespace = request.playground.metadata.namespace
                assert obj["metadata"].get("namespace") == namespace

    def test_render_is_deterministic(self, autoscaler: Autoscaler) -> None:
        for request in self.inputs():
            assert autoscaler.render(request) == autoscaler.render(request)

    def test_pod_metadata_is_strings(self, autoscaler: Autoscaler) -> None:
        for _inp, out in self._outputs(autoscaler):
            for mapping in (out.pod_labels, out.pod_annotations):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())

    def test_node_affinity_hints_name_claimed_flavors(self, autoscaler: Autoscaler) -> None:
        for request, out in self._outputs(autoscaler):
            claimed = {f.name for f in request.flavors}
            assert set(out.node_affinity_hints.per_flavor) <= claimed
            for reqs in out.node_affinity_hints.per_flavor.values():
                for req in reqs:
                    assert {"key", "operator"} <= set(req)

    def test_problem_reasons_are_condition_reasons(self, autoscaler: Autoscaler) -> None:
        for _inp, out in self._outputs(autoscaler):
            for problem in out.problems:
                assert _REASON.match(problem.reason)
                assert problem.message

    def test_entry_point_loads_and_registers_the_autoscaler(self, autoscaler: Autoscaler) -> None:
        name = self.entry_point or autoscaler.name
        assert _entry_point(name) is not None, f"no entry point {name!r} in group {ENTRY_POINT_GROUP!r}"
        manager = _loaded_manager(name)
        assert not manager.errors, [str(e) for e in manager.errors]
        assert isinstance(manager.get_autoscaler(autoscaler.name), self.autoscaler_class)
