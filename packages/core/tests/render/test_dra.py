"""DRA mode: flavors as one ResourceClaim request with firstAvailable subrequests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from render_helpers import StandInBackend, hub, model, one, playground, runner, service, templates

from llmaz.api import Service
from llmaz.operator.config import OperatorConfig
from llmaz.plugins import Backend
from llmaz.plugins.devices import WRAPPER_NAME, device_count_script, strip_flag
from llmaz.render import (
    InvalidFlavor,
    MultiHostUnsupported,
    render_manifests,
    render_playground,
    render_service,
)
from llmaz.render.dra import (
    CLAIM_NAME,
    DraSettings,
    allocated_flavor,
    claim_template_name,
    render_dra,
    uses_dra,
)

A100: dict[str, Any] = {
    "name": "a100",
    "limits": {"nvidia.com/gpu": 1},
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    "params": {
        "DEVICE-CLASS": "gpu.example.com",
        "DEVICE-SELECTOR": 'device.attributes["gpu.example.com"].model == "A100"',
    },
}
L4X2: dict[str, Any] = {
    "name": "l4x2",
    "limits": {"nvidia.com/gpu": 2},
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
    "params": {
        "DEVICE-CLASS": "gpu.example.com",
        "DEVICE-SELECTOR": 'device.attributes["gpu.example.com"].model == "L4"',
    },
}


def render(
    flavors: list[dict[str, Any]], backend: Backend, settings: DraSettings | None = None, **pg: Any
) -> list[dict[str, Any]]:
    m = model("qwen", hub("Qwen/Qwen2-0.5B-Instruct"), flavors)
    spec: dict[str, Any] = {"replicas": 1, "modelClaim": {"modelName": "qwen"}, **pg}
    p = playground("chat", spec, namespace="ns")
    svc_doc = render_playground(p, [m], backend.backend_runtime(), backend=backend).objects[0]
    svc = Service.from_manifest(svc_doc)
    return list(
        render_dra(render_service(svc, [m], backend=backend), svc, [m], settings, backend=backend).objects
    )


def vllm(plugins: Any) -> Backend:
    backend = plugins.get_backend("vllm")
    assert isinstance(backend, Backend)
    return backend


def test_claim_template_has_one_subrequest_per_flavor_in_order(plugins: Any) -> None:
    objs = render([A100, L4X2], vllm(plugins))
    tmpl = one(objs, "ResourceClaimTemplate", "resource.k8s.io/v1")
    assert tmpl["metadata"] == {
        "name": claim_template_name("chat"),
        "namespace": "ns",
        "labels": {"app.kubernetes.io/managed-by": "llmaz", "llmaz.io/model-name": "qwen"},
    }
    (request,) = tmpl["spec"]["spec"]["devices"]["requests"]
    assert request["name"] == CLAIM_NAME
    subs = request["firstAvailable"]
    assert [(s["name"], s["deviceClassName"], s["count"]) for s in subs] == [
        ("a100", "gpu.example.com", 1),
        ("l4x2", "gpu.example.com", 2),
    ]
    assert subs[1]["selectors"] == [{"cel": {"expression": L4X2["params"]["DEVICE-SELECTOR"]}}]


def test_pods_reference_the_claim_instead_of_gpu_limits(plugins: Any) -> None:
    lws = one(render([A100, L4X2], vllm(plugins)), "LeaderWorkerSet")
    (tpl,) = templates(lws)
    c = runner(tpl)
    assert "nvidia.com/gpu" not in c["resources"].get("limits", {})
    assert "nvidia.com/gpu" not in c["resources"].get("requests", {})
    assert c["resources"]["limits"]["cpu"] == "4"  # cpu and memory stay
    assert c["resources"]["claims"] == [{"name": CLAIM_NAME}]
    assert tpl["spec"]["resourceClaims"] == [
        {"name": CLAIM_NAME, "resourceClaimTemplateName": claim_template_name("chat")}
    ]


def test_node_affinity_allows_every_flavor_in_priority_order(plugins: Any) -> None:
    """Without DRA only a100 nodes are allowed (l4x2 has another GPU count); with DRA both are."""
    lws = one(render([A100, L4X2], vllm(plugins)), "LeaderWorkerSet")
    (tpl,) = templates(lws)
    node = tpl["spec"]["affinity"]["nodeAffinity"]
    products = [
        t["matchExpressions"][0]["values"][0]
        for t in node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    ]
    assert products == ["NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"]
    weights = [p["weight"] for p in node["preferredDuringSchedulingIgnoredDuringExecution"]]
    assert weights == sorted(weights, reverse=True)
    assert len(weights) == 2


def test_vllm_starts_with_the_allocated_device_count(plugins: Any) -> None:
    lws = one(render([A100, L4X2], vllm(plugins)), "LeaderWorkerSet")
    c = runner(templates(lws)[0])
    assert c["command"][:2] == ["/bin/sh", "-c"]
    assert c["command"][3] == WRAPPER_NAME
    assert c["args"][:2] == ["vllm", "serve"]
    assert "--tensor-parallel-size" not in c["args"]
    assert 'exec "$@" --tensor-parallel-size "$n"' in c["command"][2]


def test_backend_without_tensor_parallel_flag_and_different_counts_is_an_error() -> None:
    with pytest.raises(InvalidFlavor) as err:
        render([A100, L4X2], StandInBackend())
    assert "different device counts" in str(err.value)
    assert "standin" in str(err.value)


def test_same_counts_need_no_wrapper() -> None:
    l4 = {**L4X2, "name": "l4", "limits": {"nvidia.com/gpu": 1}}
    c = runner(templates(one(render([A100, l4], StandInBackend()), "LeaderWorkerSet"))[0])
    assert c["command"] == ["standin-serve"]


def test_flavor_without_device_class_in_dra_mode_is_named() -> None:
    plain = {"name": "t4", "limits": {"nvidia.com/gpu": 1}}
    with pytest.raises(InvalidFlavor) as err:
        render([A100, plain], StandInBackend())
    assert "'t4'" in str(err.value)
    assert "DEVICE-CLASS" in str(err.value)


def test_operator_settings_enable_dra_and_give_classes() -> None:
    a = {"name": "a100", "limits": {"nvidia.com/gpu": 1}}
    b = {"name": "l4", "limits": {"nvidia.com/gpu": 1}}
    settings = OperatorConfig.model_validate(
        {
            "dra": {
                "enabled": True,
                "deviceClass": "gpu.nvidia.com",
                "flavorDeviceClasses": {"l4": "l4.nvidia.com"},
            }
        }
    ).dra
    tmpl = one(render([a, b], StandInBackend(), settings), "ResourceClaimTemplate")
    subs = tmpl["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]
    assert [s["deviceClassName"] for s in subs] == ["gpu.nvidia.com", "l4.nvidia.com"]


def test_flavors_that_cannot_be_told_apart_are_rejected() -> None:
    a = {"name": "a100", "limits": {"nvidia.com/gpu": 1}}
    b = {"name": "l4", "limits": {"nvidia.com/gpu": 1}}
    with pytest.raises(InvalidFlavor) as err:
        render([a, b], StandInBackend(), DraSettings(enabled=True, device_class="gpu.nvidia.com"))
    assert "could not tell their devices apart" in str(err.value)


def test_not_dra_mode_leaves_the_render_alone_but_prunes_templates(plugins: Any) -> None:
    a = {"name": "a100", "limits": {"nvidia.com/gpu": 1}}
    m = model("qwen", hub("Qwen/Qwen2-0.5B-Instruct"), [a])
    svc = Service.from_manifest(
        render_playground(
            playground("chat", {"replicas": 1, "modelClaim": {"modelName": "qwen"}}),
            [m],
            vllm(plugins).backend_runtime(),
            backend=vllm(plugins),
        ).objects[0]
    )
    plain = render_service(svc, [m], backend=vllm(plugins))
    out = render_dra(plain, svc, [m], DraSettings(), backend=vllm(plugins))
    assert out.objects == plain.objects
    assert ("resource.k8s.io/v1", "ResourceClaimTemplate") in out.prune_kinds
    assert not uses_dra([], DraSettings(enabled=True))


def test_multi_host_is_rejected_in_dra_mode(plugins: Any) -> None:
    big = {**A100, "params": {**A100["params"], "PP": "2", "TP": "1"}}
    with pytest.raises(MultiHostUnsupported) as err:
        render([big], vllm(plugins))
    assert "DRA mode" in str(err.value)


def test_device_count_param_and_bad_values() -> None:
    with_count = {**A100, "limits": None, "params": {**A100["params"], "DEVICE-COUNT": "4"}}
    tmpl = one(render([with_count], StandInBackend()), "ResourceClaimTemplate")
    assert tmpl["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0]["count"] == 4
    bad = {**A100, "params": {**A100["params"], "DEVICE-COUNT": "many"}}
    with pytest.raises(InvalidFlavor) as err:
        render([bad], StandInBackend())
    assert "'many'" in str(err.value)


def test_allocated_flavor_from_claim_status() -> None:
    claim = {
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": f"{CLAIM_NAME}/l4x2", "driver": "d", "pool": "p", "device": "g0"}]
                }
            }
        }
    }
    assert allocated_flavor(claim) == "l4x2"
    assert allocated_flavor({}) is None


def test_render_manifests_uses_dra_when_a_flavor_names_a_device_class(plugins: Any) -> None:
    docs = [
        model("qwen", hub("Qwen/Qwen2-0.5B-Instruct"), [A100, L4X2]).to_dict(),
        playground("chat", {"replicas": 1, "modelClaim": {"modelName": "qwen"}}).to_dict(),
    ]
    kinds = [o["kind"] for o in render_manifests(docs, plugins=plugins)]
    assert kinds == ["Service", "ResourceClaimTemplate", "LeaderWorkerSet", "Service"]


# --- the start wrapper, run by a real /bin/sh ---------------------------------------------------


def test_strip_flag_removes_both_spellings() -> None:
    assert strip_flag(["m", "--tp", "2", "--x", "--tp=4", "y"], "--tp") == ["m", "--x", "y"]


def run_wrapper(tmp_path: Path, gpus: int) -> subprocess.CompletedProcess[str]:
    """Stand-in for a GPU container: a fake ``nvidia-smi`` listing ``gpus`` GPUs on PATH (this
    machine has no /dev/nvidiaN device nodes, so the script falls back to it)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n" + "".join(f"echo 'GPU {i}: NVIDIA L4 (UUID: GPU-{i})'\n" for i in range(gpus))
    )
    smi.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    script = device_count_script("--tensor-parallel-size")
    return subprocess.run(
        ["/bin/sh", "-c", script, WRAPPER_NAME, "echo", "serve", "model"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.skipif(any(Path("/dev").glob("nvidia[0-9]*")), reason="real GPUs present: count differs")
def test_wrapper_passes_the_visible_gpu_count(tmp_path: Path) -> None:
    res = run_wrapper(tmp_path, 2)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "serve model --tensor-parallel-size 2"


@pytest.mark.skipif(any(Path("/dev").glob("nvidia[0-9]*")), reason="real GPUs present: count differs")
def test_wrapper_fails_clearly_without_gpus(tmp_path: Path) -> None:
    res = run_wrapper(tmp_path, 0)
    assert res.returncode == 1
    assert "no GPU is visible" in res.stderr


def test_hand_written_service_keeps_its_own_affinity_in_every_flavor_term() -> None:
    """A user's zone requirement is ANDed with each flavor's selector, before and after DRA."""
    l4 = {**L4X2, "name": "l4", "limits": {"nvidia.com/gpu": 1}}
    m = model("qwen", hub("Qwen/Qwen2-0.5B-Instruct"), [A100, l4])
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
    svc = service(
        "hand",
        {
            "modelClaims": {"models": [{"name": "qwen"}]},
            "replicas": 1,
            "workloadTemplate": {
                "workerTemplate": {
                    "spec": {
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [{"matchExpressions": [zone]}]
                                }
                            }
                        },
                        "containers": [{"name": "model-runner", "image": "example.com/engine:1"}],
                    }
                }
            },
        },
        namespace="ns",
    )
    out = render_dra(render_service(svc, [m]), svc, [m], None, backend=StandInBackend())
    (tpl,) = templates(one(out.objects, "LeaderWorkerSet"))
    terms = tpl["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [t["matchExpressions"][0] for t in terms] == [zone, zone]
    assert [t["matchExpressions"][1]["values"] for t in terms] == [["NVIDIA-A100-SXM4-80GB"], ["NVIDIA-L4"]]
    # Different counts and no backend known to wrap the image's entrypoint: refused.
    m2 = model("qwen", hub("Qwen/Qwen2-0.5B-Instruct"), [A100, L4X2])
    with pytest.raises(InvalidFlavor) as err:
        render_dra(render_service(svc, [m2]), svc, [m2], None, backend=None)
    assert "(unknown)" in str(err.value)


def test_strip_flag_removes_every_name_of_the_option() -> None:
    args = ["m", "-tp", "2", "--x", "--tensor_parallel_size=4", "--tensor-parallel-size", "8", "y"]
    assert strip_flag(args, "--tensor-parallel-size", "-tp") == ["m", "--x", "y"]


def test_a_playgrounds_pod_affinity_stays_in_every_flavor_term_in_dra_mode(plugins: Any) -> None:
    """``spec.pod.affinity``'s required terms are ANDed with the selected flavor's term at render;
    DRA mode widens to every flavor and keeps the user's requirement in each of their terms."""
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
    required = {"nodeSelectorTerms": [{"matchExpressions": [zone]}]}
    pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}
    (tpl,) = templates(one(render([A100, L4X2], vllm(plugins), pod=pod), "LeaderWorkerSet"))
    terms = tpl["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [sorted(e["values"][0] for e in t["matchExpressions"]) for t in terms] == [
        sorted(["z1", "NVIDIA-A100-SXM4-80GB"]),
        sorted(["z1", "NVIDIA-L4"]),
    ]
