"""Preheat Jobs (:mod:`llmaz.render.preheat`): one per selected node, the same loader as the serving
pods' init container, writing the cache folder those pods read; and what their state means."""

from __future__ import annotations

from typing import Any

import pytest
from render_helpers import StandInBackend, hub, model, one, playground, templates

from llmaz.api import Service
from llmaz.loader import layout
from llmaz.render import InvalidModelSource, preheat, render_playground, render_service
from llmaz.render.cache import CACHE_VOLUME, SharedCache

CACHE = SharedCache(host_path="/var/lib/llmaz/models")
IMAGE = "example.com/llmaz:test"
NODES = [
    preheat.Node("gpu-b", {"pool": "l4", "zone": "a"}),
    preheat.Node("gpu-a", {"pool": "l4", "zone": "b"}),
    preheat.Node("big", {"pool": "a100"}),
    preheat.Node("cpu", {"pool": "cpu"}),
]
FLAVORS = [
    {"name": "l4", "limits": {"nvidia.com/gpu": "1"}, "nodeSelector": {"pool": "l4"}},
    {"name": "a100", "limits": {"nvidia.com/gpu": "1"}, "nodeSelector": {"pool": "a100"}},
]


def marked(name: str, source: dict[str, Any], flavors: list[dict[str, Any]] | None = FLAVORS) -> Any:
    m = model(name, source, flavors)
    m.metadata.labels = {preheat.PREHEAT_KEY: "true"}
    return m


def jobs(m: Any, nodes: list[preheat.Node] = NODES) -> list[dict[str, Any]]:
    return preheat.render_preheat_jobs(m, nodes, namespace="llmaz-system", cache=CACHE, loader_image=IMAGE)


def test_one_job_per_node_a_flavor_selects_pinned_to_it() -> None:
    out = jobs(marked("qwen", hub("Qwen/Qwen2-0.5B")))
    nodes = [j["spec"]["template"]["spec"]["nodeName"] for j in out]
    assert nodes == ["big", "gpu-a", "gpu-b"]  # the CPU node matches no flavor
    for job in out:
        meta = job["metadata"]
        assert meta["namespace"] == "llmaz-system"
        assert meta["labels"][preheat.LABEL_PREHEAT_MODEL] == "qwen"
        assert (
            meta["annotations"][preheat.ANNOTATION_PREHEAT_NODE]
            == job["spec"]["template"]["spec"]["nodeName"]
        )
        assert len(meta["name"]) <= 63
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert pod["tolerations"] == [{"operator": "Exists"}]  # GPU nodes are tainted
        assert pod["volumes"] == [CACHE.volume()]
    assert len({j["metadata"]["name"] for j in out}) == 3


def test_job_names_are_short_and_distinct_for_long_model_names_sharing_a_prefix() -> None:
    long_a, long_b = "m" * 60 + "-a", "m" * 60 + "-b"
    names = {preheat.job_name(m, n) for m in (long_a, long_b) for n in ("node-1", "node-2")}
    assert len(names) == 4
    assert all(len(n) <= 63 and "-preheat-" in n for n in names)


def test_every_label_of_a_nodeselector_must_match_and_no_flavors_means_every_node() -> None:
    strict = [{"name": "l4a", "nodeSelector": {"pool": "l4", "zone": "a"}}]
    out = jobs(marked("m", hub("org/m"), strict))
    assert [j["spec"]["template"]["spec"]["nodeName"] for j in out] == ["gpu-b"]
    anywhere = jobs(marked("m", hub("org/m"), None))
    assert len(anywhere) == len(NODES)


def test_the_job_runs_the_serving_pods_loader_and_fills_the_folder_they_read() -> None:
    m = marked("qwen", hub("Qwen/Qwen2-0.5B", revision="v1"))
    (job, *_) = jobs(m)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    # the serving side: a Playground of the same model with the same cache
    backend = StandInBackend()
    pg = playground("p", {"modelClaim": {"modelName": "qwen"}})
    rendered = render_playground(pg, [m], backend.backend_runtime(), backend=backend)
    svc = Service.from_manifest(rendered.objects[0])
    lws = one(
        render_service(svc, [m], backend=backend, model_cache=CACHE, model_loader_image=IMAGE).objects,
        "LeaderWorkerSet",
    )
    pod = templates(lws)[-1]["spec"]
    (init,) = pod["initContainers"]
    assert container == init  # image, command, env (credentials by reference), cache mount
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env[layout.ENV_CACHE] == layout.CACHE_SHARED
    runner = next(c for c in pod["containers"] if c["name"] == "model-runner")
    (mount,) = [v for v in runner["volumeMounts"] if v["name"] == CACHE_VOLUME]
    assert env[layout.ENV_LOCAL_PATH] == f"{layout.MODEL_DIR}/{mount['subPath']}"


def test_a_loader_failure_fails_the_job_at_once_but_an_eviction_is_retried() -> None:
    (job, *_) = jobs(marked("m", hub("org/m")))
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    assert rules[1]["action"] == "FailJob"
    assert rules[1]["onExitCodes"] == {"containerName": "model-loader", "operator": "NotIn", "values": [0]}


def test_a_new_revision_changes_the_digest_so_the_job_is_replaced() -> None:
    (old, *_) = jobs(marked("m", hub("org/m", revision="v1")))
    (new, *_) = jobs(marked("m", hub("org/m", revision="v2")))
    assert old["metadata"]["name"] == new["metadata"]["name"]
    digest = preheat.ANNOTATION_PREHEAT_DIGEST
    assert old["metadata"]["annotations"][digest] != new["metadata"]["annotations"][digest]
    assert jobs(marked("m", hub("org/m", revision="v1")))[0] == old  # deterministic


def test_sources_read_in_place_need_no_job_and_bad_sources_are_named() -> None:
    assert not preheat.needs_loader(marked("p", {"uri": "pvc://models/qwen"}))
    assert jobs(marked("p", {"uri": "host:///models/qwen"})) == []
    assert preheat.needs_loader(marked("s", {"uri": "s3://bucket/models/qwen"}))
    with pytest.raises(InvalidModelSource, match="unknown protocol"):
        jobs(marked("x", {"uri": "ftp://host/model"}))


def test_requested_by_label_or_llmaz_annotation_only_when_true() -> None:
    m = model("m", hub("org/m"))
    assert not preheat.requested(m)
    m.metadata.labels = {preheat.PREHEAT_KEY: "false"}
    assert not preheat.requested(m)
    m.metadata.annotations = {preheat.PREHEAT_KEY: "true"}
    assert preheat.requested(m)


def _with_status(job: dict[str, Any], type_: str | None, message: str = "") -> dict[str, Any]:
    conditions = [{"type": type_, "status": "True", "message": message}] if type_ else []
    return {**job, "status": {"conditions": conditions}}


def test_report_counts_nodes_and_names_failures_with_the_job_message() -> None:
    desired = jobs(marked("qwen", hub("Qwen/Qwen2-0.5B")))
    big, gpu_a, gpu_b = desired
    assert preheat.report(desired, []).reason == preheat.REASON_PREHEATING
    progress = preheat.report(desired, [_with_status(big, "Complete"), _with_status(gpu_a, None)])
    assert (progress.done, progress.reason) == (False, preheat.REASON_PREHEATING)
    assert progress.counts() == {"nodes": 3, "preheated": 1, "failed": 0}
    assert progress.message == "1 of 3 nodes preheated; downloading on gpu-a, gpu-b"
    failed = preheat.report(
        desired,
        [
            _with_status(big, "Complete"),
            _with_status(gpu_a, "Failed", "exit code 1"),
            _with_status(gpu_b, None),
        ],
    )
    assert (failed.done, failed.reason) == (False, preheat.REASON_FAILED)
    assert "node gpu-a: exit code 1" in failed.message
    assert f"Job llmaz-system/{gpu_a['metadata']['name']}" in failed.message
    assert failed.counts() == {"nodes": 3, "preheated": 1, "failed": 1}
    # with the loader's termination message, that one-line cause comes first
    quoted = preheat.report(
        desired,
        [_with_status(gpu_a, "Failed", "exit code 1")],
        {gpu_a["metadata"]["name"]: "401 from Hugging Face for Qwen/Qwen2-0.5B: set secret modelhub-secret"},
    )
    assert (
        f"node gpu-a: 401 from Hugging Face for Qwen/Qwen2-0.5B: set secret modelhub-secret "
        f"(Job llmaz-system/{gpu_a['metadata']['name']}: exit code 1)"
    ) in quoted.message
    done = preheat.report(desired, [_with_status(j, "Complete") for j in desired])
    assert (done.done, done.reason) == (True, preheat.REASON_PREHEATED)
    assert done.message == "in the shared cache of 3 nodes: big, gpu-a, gpu-b"


def test_a_completed_job_of_an_older_spec_does_not_count() -> None:
    (old,) = jobs(marked("m", hub("org/m", revision="v1"), None), NODES[:1])
    new = jobs(marked("m", hub("org/m", revision="v2"), None), NODES[:1])
    state = preheat.report(new, [_with_status(old, "Complete")])
    assert (state.reason, state.preheated) == (preheat.REASON_PREHEATING, 0)


def test_no_selected_node_is_said() -> None:
    state = preheat.report([], [])
    assert (state.done, state.reason) == (False, preheat.REASON_NO_NODES)
