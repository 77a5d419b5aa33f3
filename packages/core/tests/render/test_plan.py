"""``render.plan``: the one lookup path shared by ``llmaz render`` and the operator."""

from __future__ import annotations

import pytest

from llmaz.api import BackendRuntime, OpenModel, Playground, Service
from llmaz.plugins.manager import PluginManager
from llmaz.render import BackendRuntimeNotFound, InvalidFlavor, plan, plan_tree

MODEL = OpenModel.from_manifest(
    {
        "apiVersion": "llmaz.io/v1alpha1",
        "kind": "OpenModel",
        "metadata": {"name": "qwen"},
        "spec": {
            "familyName": "qwen",
            "source": {"modelHub": {"modelID": "Qwen/Qwen2-0.5B"}},
            "inferenceConfig": {"flavors": [{"name": "l4", "limits": {"nvidia.com/gpu": 1}}]},
        },
    }
)


def playground(**spec: object) -> Playground:
    return Playground.from_manifest(
        {
            "apiVersion": "inference.llmaz.io/v1alpha1",
            "kind": "Playground",
            "metadata": {"name": "qwen", "namespace": "ns"},
            "spec": {"replicas": 1, "modelClaim": {"modelName": "qwen"}, **spec},
        }
    )


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager.from_environment({})


def test_playground_plan_is_its_service_and_names_every_kind_it_may_prune(plugins: PluginManager) -> None:
    result = plan(playground(), {"qwen": MODEL}, {}, plugins)
    assert [(o["kind"], o["metadata"]["name"]) for o in result.objects] == [("Service", "qwen")]
    assert ("inference.llmaz.io/v1alpha1", "Service") in result.prune_kinds
    # no elasticConfig: no HPA, but the HPA kind is still managed so an old one is pruned
    assert ("autoscaling/v2", "HorizontalPodAutoscaler") in result.prune_kinds


def test_operator_plan_does_not_invent_a_missing_backend_runtime(plugins: PluginManager) -> None:
    with pytest.raises(BackendRuntimeNotFound) as err:
        plan(playground(), {"qwen": MODEL}, {}, plugins, plugin_runtimes=False)
    assert err.value.field == "spec.backendRuntimeConfig.backendName"
    runtime = plugins.get_backend("vllm")
    assert runtime is not None
    br: BackendRuntime = runtime.backend_runtime()
    assert plan(playground(), {"qwen": MODEL}, {"vllm": br}, plugins, plugin_runtimes=False).objects


def test_service_plan_is_lws_and_lb_and_tree_follows_the_playground(plugins: PluginManager) -> None:
    tree = plan_tree(playground(), {"qwen": MODEL}, {}, plugins)
    assert [(o["kind"], o["metadata"]["name"]) for o in tree] == [
        ("Service", "qwen"),
        ("LeaderWorkerSet", "qwen"),
        ("Service", "qwen-lb"),
    ]
    service = Service.from_manifest(tree[0])
    children = plan(service, {"qwen": MODEL})
    assert [o["kind"] for o in children.objects] == ["LeaderWorkerSet", "Service"]
    # The claim template kind is pruned too, so a workload leaving DRA mode loses its claim template.
    assert children.prune_kinds == (
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
        ("v1", "Service"),
        ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    )


def test_a_plugins_runtime_is_not_checked_against_the_cel_rules_on_every_render(
    plugins: PluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin manager checked each backend's BackendRuntime once when it loaded it; `llmaz render`
    re-checking it for every Playground cost ~1.6 ms of offline CEL each, four times the render."""
    import llmaz.api.validation

    checked: list[str] = []
    real = llmaz.api.validation.check_rules

    def counting(obj: object) -> None:
        checked.append(type(obj).__name__)
        real(obj)  # type: ignore[arg-type]

    monkeypatch.setattr(llmaz.api.validation, "check_rules", counting)
    tree = plan_tree(playground(), {"qwen": MODEL}, {}, plugins)
    assert [o["kind"] for o in tree] == ["Service", "LeaderWorkerSet", "Service"]
    assert "BackendRuntime" not in checked
    # the hook counts: loading the plugins with rules on does check them
    PluginManager.from_environment({})
    assert "BackendRuntime" in checked


def _with_flavor(flavor: dict[str, object]) -> OpenModel:
    spec = {**MODEL.to_manifest()["spec"], "inferenceConfig": {"flavors": [flavor]}}
    return OpenModel.from_manifest({**MODEL.to_manifest(), "spec": spec})


def test_playground_plan_holds_its_typed_service_whose_dump_is_the_manifest(plugins: PluginManager) -> None:
    multi_host = _with_flavor(
        {"name": "x2", "limits": {"nvidia.com/gpu": 8}, "params": {"TP": "8", "PP": "2"}}
    )
    result = plan(playground(), {"qwen": multi_host}, {}, plugins)
    assert isinstance(result.service, Service)
    assert result.service.spec.workload_template.size == 2
    assert result.objects[0] == result.service.to_manifest()
    # the manifest is what the API server would admit (schema and CEL rules)
    assert Service.from_manifest(result.objects[0]).spec.workload_template.leader_template is not None
    tree = plan_tree(playground(), {"qwen": multi_host}, {}, plugins)
    lws = tree[1]["spec"]["leaderWorkerTemplate"]
    assert (lws["size"], "leaderTemplate" in lws) == (2, True)


def test_group_size_beyond_a_leader_worker_set_is_a_flavor_error(plugins: PluginManager) -> None:
    """A flavor asking for more pods per replica than a LeaderWorkerSet group allows (1024) used to
    crash ``llmaz render`` with a pydantic traceback and be refused by the API server in the operator."""
    huge = _with_flavor(
        {"name": "huge", "limits": {"nvidia.com/gpu": 8}, "params": {"NODES": "2000", "PP": "2"}}
    )
    with pytest.raises(InvalidFlavor) as err:
        plan_tree(playground(), {"qwen": huge}, {}, plugins)
    assert err.value.field == "spec.modelClaim.inferenceFlavors"
    assert "NODES=2000" in err.value.reason
    assert "at most 1024" in err.value.reason


def _runner_args(
    plugins: PluginManager, flavor: dict, backend: str, args: list[str] | None = None
) -> list[str]:
    model = _with_flavor(flavor)
    brc: dict[str, object] = {"backendName": backend}
    if args:
        brc["args"] = args
    service = plan(playground(backendRuntimeConfig=brc), {"qwen": model}, {}, plugins).objects[0]
    container = service["spec"]["workloadTemplate"]["workerTemplate"]["spec"]["containers"][0]
    return list(container.get("args") or [])


@pytest.mark.parametrize(
    ("backend", "flag"),
    [
        ("vllm", "--tensor-parallel-size"),
        ("sglang", "--tp-size"),
        ("tgi", "--num-shard"),
        ("tensorrt-llm", "--tp_size"),
    ],
)
def test_single_host_tensor_parallel_defaults_to_the_flavor_gpu_count(
    plugins: PluginManager, backend: str, flag: str
) -> None:
    args = _runner_args(plugins, {"name": "a100x8", "limits": {"nvidia.com/gpu": 8}}, backend)
    assert args[args.index(flag) + 1] == "8"
    explicit = _runner_args(
        plugins, {"name": "a100x8", "limits": {"nvidia.com/gpu": 8}, "params": {"TP": "4"}}, backend
    )
    assert explicit[explicit.index(flag) + 1] == "4"
    # one GPU and no TP param: nothing added; a flag the user passed is never doubled
    assert flag not in _runner_args(plugins, {"name": "l4", "limits": {"nvidia.com/gpu": 1}}, backend)
    mine = _runner_args(plugins, {"name": "a100x8", "limits": {"nvidia.com/gpu": 8}}, backend, [flag, "2"])
    assert mine.count(flag) == 1
    assert mine[mine.index(flag) + 1] == "2"


@pytest.mark.parametrize(
    ("backend", "mine"),
    [
        ("vllm", ["-tp", "1"]),  # vLLM's short alias, as in Go llmaz's speculative-decoding config
        ("vllm", ["--tensor_parallel_size=1"]),  # vLLM takes '_' for '-'
        ("sglang", ["--tp", "1"]),  # argparse's abbreviation of --tp-size, which SGLang accepts
        ("sglang", ["--tensor-parallel-size", "1"]),
    ],
)
def test_a_degree_the_user_set_under_another_name_is_not_overridden(
    plugins: PluginManager, backend: str, mine: list[str]
) -> None:
    """An engine takes the last of two spellings of one option: an added ``--tensor-parallel-size
    8`` after the user's ``-tp 1`` would silently change the parallelism they chose."""
    flag = plugins.get_backend(backend).tensor_parallel_flag
    args = _runner_args(plugins, {"name": "a100x8", "limits": {"nvidia.com/gpu": 8}}, backend, mine)
    assert flag not in args
    assert args[-len(mine) :] == mine


def test_a_multi_host_sglang_tp_counts_every_gpu_of_the_group(plugins: PluginManager) -> None:
    """SGLang's ``--tp-size`` with ``--nnodes`` is the degree over all nodes (its docs: ``--tp 16
    --nnodes 2`` for two 8-GPU nodes); one pod's count would leave half the GPUs idle."""
    model = _with_flavor({"name": "a100x8x2", "limits": {"nvidia.com/gpu": 8}, "params": {"NODES": "2"}})
    tree = plan_tree(playground(backendRuntimeConfig={"backendName": "sglang"}), {"qwen": model}, {}, plugins)
    lws = next(o for o in tree if o["kind"] == "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    for template in (lwt["leaderTemplate"], lwt["workerTemplate"]):
        args = template["spec"]["containers"][0]["args"]
        assert args[args.index("--tp-size") + 1] == "16"


def test_backend_without_tensor_parallel_flag_gets_none(plugins: PluginManager) -> None:
    args = _runner_args(plugins, {"name": "a100x8", "limits": {"nvidia.com/gpu": 8}}, "llamacpp")
    assert "8" not in args
