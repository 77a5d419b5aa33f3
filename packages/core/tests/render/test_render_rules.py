"""Focused tests of the render rules: sources, templating, merges, purity."""

from __future__ import annotations

import copy
import os
import subprocess
from typing import Any

import pytest
from render_helpers import StandInBackend, hub, model, one, playground, runner, templates

from llmaz.api import Service
from llmaz.render import (
    InvalidModelClaims,
    InvalidModelSource,
    InvalidResources,
    infer_config_name,
    render_playground,
    render_service,
)
from llmaz.render.models import resolve_claims
from llmaz.render.templating import render_args


def render_all(pg: Any, models: list[Any], **kw: Any) -> list[dict[str, Any]]:
    backend = StandInBackend()
    rendered = render_playground(pg, models, backend.backend_runtime(), backend=backend, **kw)
    svc = Service.from_manifest(rendered.objects[0])
    return [rendered.objects[0], *render_service(svc, models, backend=backend).objects]


def worker(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return templates(one(objs, "LeaderWorkerSet"))[-1]


@pytest.mark.parametrize(
    "arg", ["{{ .ModelPath }}", "{{.ModelPath}}", "{{  .ModelPath}}", "x={{ .ModelPath }},y={{.ModelName}}"]
)
def test_placeholder_spacing_variants(arg: str) -> None:
    out = render_args([arg], {"ModelPath": "/p", "ModelName": "n"}, config="c", field="f")
    assert "{{" not in out[0]
    assert "/p" in out[0]


def test_placeholder_without_dot_is_left_alone() -> None:
    assert render_args(["{{ ModelPath }}"], {"ModelPath": "/p"}, config="c", field="f") == ["{{ ModelPath }}"]


def test_pvc_source_is_mounted_read_only_without_loader() -> None:
    objs = render_all(
        playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", {"uri": "pvc://weights/qwen2"})]
    )
    t = worker(objs)
    assert "initContainers" not in t["spec"]
    assert {"name": "model-volume", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}} in t[
        "spec"
    ]["volumes"]
    assert runner(t)["args"][1] == "/workspace/models/model-volume/qwen2"


def test_ollama_source_has_no_loader_and_no_volume() -> None:
    objs = render_all(
        playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", {"uri": "ollama://qwen2:0.5b"})]
    )
    t = worker(objs)
    assert "initContainers" not in t["spec"]
    assert all(not v["name"].startswith("model-volume") for v in t["spec"].get("volumes", []))
    assert runner(t)["args"][:4] == ["--model", "qwen2:0.5b", "--name", "qwen2:0.5b"]


def test_skip_loader_passes_hub_id_and_injects_token_references() -> None:
    pg = playground(
        "p", {"modelClaim": {"modelName": "m"}}, annotations={"llmaz.io/skip-model-loader": "true"}
    )
    objs = render_all(pg, [model("m", hub("org/repo"))])
    svc = objs[0]
    assert svc["metadata"]["annotations"] == {"llmaz.io/skip-model-loader": "true"}
    t = worker(objs)
    assert "initContainers" not in t["spec"]
    c = runner(t)
    assert c["args"][1] == "org/repo"
    env = {e["name"]: e for e in c["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "modelhub-secret",
        "key": "HF_TOKEN",
        "optional": True,
    }


def test_s3_model_with_skip_loader_hands_the_uri_to_the_engine_with_aws_credentials() -> None:
    """llmaz's e2e scenario 7 (``s3://`` model, loader skipped): templates only."""
    pg = playground(
        "p", {"modelClaim": {"modelName": "m"}}, annotations={"llmaz.io/skip-model-loader": "true"}
    )
    objs = render_all(pg, [model("m", {"uri": "s3://test-bucket/opt-125m"})])
    t = worker(objs)
    assert "initContainers" not in t["spec"]
    c = runner(t)
    assert c["args"][1] == "s3://test-bucket/opt-125m"
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"] for e in c["env"] if "valueFrom" in e}
    assert refs["AWS_ACCESS_KEY_ID"] == refs["AWS_SECRET_ACCESS_KEY"] == "aws-access-secret"


def test_modelscope_loader_inputs() -> None:
    objs = render_all(
        playground("p", {"modelClaim": {"modelName": "m"}}),
        [
            model(
                "m",
                {"modelHub": {"name": "ModelScope", "modelID": "AI-ModelScope/opt-125", "revision": "v1"}},
            )
        ],
    )
    env = {e["name"]: e.get("value") for e in worker(objs)["spec"]["initContainers"][0]["env"]}
    assert env["MODEL_HUB_NAME"] == "ModelScope"
    assert env["REVISION"] == "v1"
    assert env["MODEL_LOCAL_PATH"] == "/workspace/models/models--AI-ModelScope--opt-125"


@pytest.mark.parametrize(("hub", "expected"), [("ModelScope", "master"), ("Huggingface", "main")])
def test_the_default_revision_is_each_hubs_default_branch(hub: str, expected: str) -> None:
    """``revision`` defaults to ``main``; ModelScope repositories have ``master`` instead (llmaz
    (Go) passed no revision to ModelScope, so its default branch was used)."""
    objs = render_all(
        playground("p", {"modelClaim": {"modelName": "m"}}),
        [model("m", {"modelHub": {"name": hub, "modelID": "org/opt-125"}})],
    )
    env = {e["name"]: e.get("value") for e in worker(objs)["spec"]["initContainers"][0]["env"]}
    assert env["REVISION"] == expected


def test_unknown_uri_protocol_is_a_typed_error() -> None:
    with pytest.raises(InvalidModelSource) as err:
        render_all(playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", {"uri": "ftp://x/y"})])
    assert err.value.field == "spec.modelClaim.modelName"


def test_main_model_first_whatever_the_order_and_config_inferred() -> None:
    models = [model("main", hub("o/main")), model("draft", hub("o/draft"))]
    pg = playground(
        "p",
        {"modelClaims": {"models": [{"name": "draft", "role": "draft"}, {"name": "main", "role": "main"}]}},
    )
    claimed = resolve_claims(pg.spec.model_claim, pg.spec.model_claims, models)
    assert [s.name for s in claimed.sources] == ["main", "draft"]
    assert infer_config_name(pg, claimed) == "speculative-decoding"
    objs = render_all(pg, models)
    t = worker(objs)
    assert runner(t)["args"] == [
        "--model",
        "/workspace/models/models--o--main",
        "--draft",
        "/workspace/models/models--o--draft",
    ]
    assert [i["name"] for i in t["spec"]["initContainers"]] == ["model-loader", "model-loader-1"]
    assert objs[0]["spec"]["modelClaims"]["models"][0] == {"name": "main", "role": "main"}


def test_resources_override_per_key_and_limit_raised_to_request() -> None:
    pg = playground(
        "p",
        {
            "modelClaim": {"modelName": "m"},
            "backendRuntimeConfig": {
                "backendName": "standin",
                "resources": {"requests": {"cpu": "8"}, "limits": {"memory": "2Gi"}},
                "sharedMemorySize": "4Gi",
                "version": "2.0",
                "args": ["--extra"],
            },
        },
    )
    objs = render_all(pg, [model("m", hub("o/m"))])
    c = runner(worker(objs))
    assert c["resources"] == {
        "limits": {"cpu": "8", "memory": "4Gi"},
        "requests": {"cpu": "8", "memory": "4Gi"},
    }
    assert c["image"] == "example.com/standin:2.0"
    assert c["args"][-1] == "--extra"
    dshm = next(v for v in worker(objs)["spec"]["volumes"] if v["name"] == "dshm")
    assert dshm["emptyDir"]["sizeLimit"] == "4Gi"


def test_limit_below_request_for_other_resources_is_a_typed_error() -> None:
    # cpu/memory limits are raised to the request (llmaz's rule); any other resource cannot be
    # guessed, and Kubernetes would reject every pod, so render names the field instead.
    pg = playground(
        "p",
        {
            "modelClaim": {"modelName": "m"},
            "backendRuntimeConfig": {
                "backendName": "standin",
                "resources": {
                    "requests": {"ephemeral-storage": "20Gi"},
                    "limits": {"ephemeral-storage": "10Gi"},
                },
            },
        },
    )
    with pytest.raises(InvalidResources) as err:
        render_all(pg, [model("m", hub("o/m"))])
    assert err.value.field == "spec.backendRuntimeConfig.resources"
    assert "ephemeral-storage (10Gi) is below its request (20Gi)" in err.value.reason
    assert err.value.condition_reason == "InvalidResources"


def test_render_does_not_mutate_its_inputs() -> None:
    models = [
        model("m", hub("o/m"), [{"name": "f", "limits": {"nvidia.com/gpu": 1}, "nodeSelector": {"a": "b"}}])
    ]
    pg = playground("p", {"modelClaim": {"modelName": "m"}}, namespace="ns")
    br = StandInBackend().backend_runtime()
    snapshot = (
        copy.deepcopy(pg.model_dump()),
        copy.deepcopy(br.model_dump()),
        copy.deepcopy(models[0].model_dump()),
    )
    render_all(pg, models)
    render_playground(pg, models, br)
    assert (pg.model_dump(), br.model_dump(), models[0].model_dump()) == snapshot


def test_children_stay_in_the_owner_namespace() -> None:
    objs = render_all(
        playground("p", {"modelClaim": {"modelName": "m"}}, namespace="team-a"), [model("m", hub("o/m"))]
    )
    assert {o["metadata"]["namespace"] for o in objs} == {"team-a"}


def test_vllm_playground_on_a_two_node_flavor_uses_the_plugin_recipe(plugins: Any) -> None:
    backend = plugins.get_backend("vllm")
    flavors = [
        {
            "name": "a100x8x2",
            "limits": {"nvidia.com/gpu": 8},
            "nodeSelector": {"gpu": "a100"},
            "params": {"TP": "8", "PP": "2"},
        }
    ]
    models = [model("big", hub("meta-llama/Llama-3.1-405B-Instruct"), flavors)]
    rendered = render_playground(
        playground("big", {"modelClaim": {"modelName": "big"}}),
        models,
        backend.backend_runtime(),
        backend=backend,
    )
    assert rendered.config_name == "multi-host"
    svc = Service.from_manifest(rendered.objects[0])
    lws = one(render_service(svc, models, backend=backend).objects, "LeaderWorkerSet")
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    leader, worker_c = runner(lwt["leaderTemplate"]), runner(lwt["workerTemplate"])
    assert "ray start --head" in leader["args"][0]
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in leader["args"][0]
    assert "$(LWS_LEADER_ADDRESS)" in worker_c["args"][0]
    assert "readinessProbe" in leader
    assert "readinessProbe" not in worker_c
    for t in (lwt["leaderTemplate"], lwt["workerTemplate"]):
        assert runner(t)["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert t["metadata"]["labels"]["llmaz.io/model-name"] == "big"


def test_a_multi_host_vllm_leader_hands_the_playgrounds_args_to_the_server(
    plugins: Any, tmp_path: Any
) -> None:
    """The vLLM leader is a shell script (start Ray, wait for the workers, then ``exec vllm
    serve``); the Playground's ``backendRuntimeConfig.args`` are appended after it and must reach
    ``vllm serve``. The rendered command runs here under a real ``/bin/sh`` with stand-ins for
    ``ray``, ``python3`` and ``vllm`` (no engine or GPU here), which record their arguments."""
    backend = plugins.get_backend("vllm")
    flavors = [{"name": "a100x8x2", "limits": {"nvidia.com/gpu": 8}, "params": {"TP": "8", "PP": "2"}}]
    models = [model("big", hub("meta-llama/Llama-3.1-405B-Instruct"), flavors)]
    pg = playground(
        "big",
        {"modelClaim": {"modelName": "big"}, "backendRuntimeConfig": {"args": ["--max-model-len", "8192"]}},
    )
    rendered = render_playground(pg, models, backend.backend_runtime(), backend=backend)
    svc = Service.from_manifest(rendered.objects[0])
    lws = one(render_service(svc, models, backend=backend).objects, "LeaderWorkerSet")
    leader = runner(lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("ray", "python3", "vllm"):
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{tmp_path}/{tool}.args"\n')
        stub.chmod(0o755)
    # the kubelet expands $(VAR) from the container's environment before the shell runs
    words = [w.replace("$(LWS_GROUP_SIZE)", "2") for w in leader["command"] + leader["args"]]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(words, env=env, check=True, timeout=30)
    served = (tmp_path / "vllm.args").read_text().splitlines()
    assert served[0] == "serve"
    assert served[-2:] == ["--max-model-len", "8192"]
    assert "--tensor-parallel-size" in served


def test_two_claimed_models_loaded_into_one_folder_are_an_error_naming_both(plugins: Any) -> None:
    """``s3://b/llama-70b/hf`` and ``s3://b/llama-1b/hf`` both land in ``models--hf``: one loader
    would overwrite the other's files and the pod template would mount one model volume only.
    The render names both models and the folder, instead of an LWS the API server refuses."""
    backend = plugins.get_backend("vllm")
    models = [
        model("llama-70b", {"uri": "s3://my-models/llama-3.1-70b-instruct/hf"}),
        model("llama-1b", {"uri": "s3://my-models/llama-3.2-1b-instruct/hf"}),
    ]
    claims = {"modelClaims": {"models": [{"name": "llama-70b"}, {"name": "llama-1b", "role": "draft"}]}}

    def lws_of(models: list[Any]) -> dict[str, Any]:
        rendered = render_playground(
            playground("spec", claims), models, backend.backend_runtime(), backend=backend
        )
        svc = Service.from_manifest(rendered.objects[0])
        return one(render_service(svc, models, backend=backend).objects, "LeaderWorkerSet")

    with pytest.raises(InvalidModelClaims) as err:
        lws_of(models)
    assert err.value.field == "spec.modelClaims.models"
    assert "'llama-70b' and 'llama-1b' would both be loaded into /workspace/models/models--hf" in str(
        err.value
    )
    models[1] = model("llama-1b", {"uri": "s3://my-models/llama-3.2-1b-instruct"})
    template = templates(lws_of(models))[0]
    declared = {v["name"] for v in template["spec"]["volumes"]}
    assert {"model-volume", "model-volume-1"} <= {m["name"] for m in runner(template)["volumeMounts"]}
    for init in template["spec"]["initContainers"]:
        assert {m["name"] for m in init["volumeMounts"]} <= declared


def test_a_model_that_is_its_own_draft_is_not_a_folder_clash(plugins: Any) -> None:
    """Main and draft the same OpenModel: one source, fetched and mounted once (the reliability
    suite's "cycles" scenario). Before, the folder-clash check refused it, and before that check
    the pod template mounted an undeclared second model volume."""
    backend = plugins.get_backend("vllm")
    models = [model("qwen", hub("Qwen/Qwen2-0.5B-Instruct"))]
    claims = {"modelClaims": {"models": [{"name": "qwen"}, {"name": "qwen", "role": "draft"}]}}
    rendered = render_playground(
        playground("self-draft", claims), models, backend.backend_runtime(), backend=backend
    )
    svc = Service.from_manifest(rendered.objects[0])
    template = templates(one(render_service(svc, models, backend=backend).objects, "LeaderWorkerSet"))[0]
    declared = {v["name"] for v in template["spec"]["volumes"]}
    for container in [*template["spec"]["initContainers"], runner(template)]:
        assert {m["name"] for m in container["volumeMounts"]} <= declared
