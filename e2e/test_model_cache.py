"""The shared per-node model cache (operator setting ``modelLoader.sharedCache``), and the operator
setting ``schedulerName``, on the real control plane: the REAL operator (``llmaz operator run``,
ServiceAccount bound to exactly :data:`llmaz.operator.rbac.RULES`) renders them, the real API server
admits the LeaderWorkerSets and the real LWS controller's pods, and the real scheduler places them.
KWOK nodes stand in for kubelets, so no loader runs here: two loaders sharing one cache are tested
in ``packages/core/tests/loader``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from operator_helpers import (
    Operator,
    get,
    install_crds,
    model,
    playground,
    reason,
    running_operator,
    wait_until,
)

from llmaz.loader import layout
from llmaz.render.cache import CACHE_VOLUME
from llmaz_devkit.cluster import ControlPlane

CACHE_DIR = "/var/lib/llmaz/models"
ACCOUNT = "llmaz-operator-model-cache"


@pytest.fixture(scope="module")
def operator(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    install_crds(control_plane)
    # default-scheduler, as llmaz (Go)'s chart set its scheduler-name: the pods still get placed
    config = {"modelLoader": {"sharedCache": {"hostPath": CACHE_DIR}}, "schedulerName": "default-scheduler"}
    with running_operator(
        control_plane, tmp_path_factory.mktemp("cache-op"), ACCOUNT, extra_config=config
    ) as op:
        wait_until(op.ready, "the operator to lead and list its watches", timeout=60, log=op.log)
        yield op


def _pods(cp: ControlPlane, ns: str) -> list[dict[str, Any]]:
    return list((get(cp, "pods", ns) or {}).get("items") or [])


def test_replicas_of_two_playgrounds_share_one_cache_folder_per_model(
    control_plane: ControlPlane, operator: Operator, namespace: str, tmp_path: Path
) -> None:
    cp = control_plane
    name = f"cache-{namespace}"[:63]
    cp.apply(
        [
            model(name),
            {
                **playground("a", namespace, name),
                "spec": {**playground("a", namespace, name)["spec"], "replicas": 2},
            },
            playground("b", namespace, name),
        ]
    )
    for pl in ("a", "b"):
        wait_until(
            lambda pl=pl: reason(cp, f"pl/{pl}", namespace) == "Available",
            f"{pl} Available",
            90,
            operator.log,
        )
    pods = wait_until(lambda: (p := _pods(cp, namespace)) and len(p) == 3 and p, "3 pods", 30, operator.log)
    written, mounted = set(), set()
    for pod in pods:
        spec = pod["spec"]
        assert {"name": CACHE_VOLUME, "hostPath": {"path": CACHE_DIR, "type": "DirectoryOrCreate"}} in spec[
            "volumes"
        ]
        assert not [v for v in spec["volumes"] if v["name"].startswith("model-volume")]
        (loader,) = [c for c in spec["initContainers"] if c["name"] == "model-loader"]
        env = {e["name"]: e.get("value") for e in loader["env"]}
        assert env[layout.ENV_CACHE] == layout.CACHE_SHARED
        written.add(env[layout.ENV_LOCAL_PATH])
        runner = next(c for c in spec["containers"] if c["name"] == "model-runner")
        (mount,) = [m for m in runner["volumeMounts"] if m["name"] == CACHE_VOLUME]
        assert mount["readOnly"] is True
        mounted.add((mount["mountPath"], f"{layout.MODEL_DIR}/{mount['subPath']}"))
        assert pod["spec"].get("nodeName"), "the scheduler placed the pod"
    # Every replica of both Playgrounds writes and reads one folder of the cache, at the usual path.
    assert len(written) == 1
    (folder,) = written
    assert mounted == {(f"{layout.MODEL_DIR}/models--Qwen--{name}", folder)}
    assert folder.startswith(f"{layout.MODEL_DIR}/Huggingface--Qwen-{name}--main--")


def test_the_configured_scheduler_name_is_on_every_lws_template_and_not_on_the_service(
    control_plane: ControlPlane, operator: Operator, namespace: str
) -> None:
    """``schedulerName`` (llmaz (Go)'s global ``scheduler-name``) reaches the leader and worker
    templates of the LeaderWorkerSet, and is not written into the inference Service, whose spec is
    the user's (llmaz (Go) wrote it back there on every reconcile)."""
    cp = control_plane
    name = f"sched-{namespace}"[:63]
    cp.apply([model(name), playground("sched", namespace, name)])
    lws = wait_until(
        lambda: get(cp, "leaderworkersets.leaderworkerset.x-k8s.io/sched", namespace),
        "the LeaderWorkerSet",
        60,
        operator.log,
    )
    templates = lws["spec"]["leaderWorkerTemplate"]
    pod_templates = [
        templates["workerTemplate"],
        *([templates["leaderTemplate"]] if "leaderTemplate" in templates else []),
    ]
    assert [t["spec"].get("schedulerName") for t in pod_templates] == ["default-scheduler"] * len(
        pod_templates
    )
    service = get(cp, "services.inference.llmaz.io/sched", namespace)
    assert service is not None
    workload = service["spec"]["workloadTemplate"]  # the LWS's leaderWorkerTemplate, as the user wrote it
    written = [workload[t]["spec"] for t in ("leaderTemplate", "workerTemplate") if t in workload]
    assert written
    assert not [spec for spec in written if "schedulerName" in spec]
