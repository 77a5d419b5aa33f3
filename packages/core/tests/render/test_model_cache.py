"""The shared per-node model cache (operator setting ``modelLoader.sharedCache``) in rendered pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from render_helpers import REPO, StandInBackend, hub, model, one, playground, runner, templates

from llmaz.api import Service
from llmaz.loader import layout
from llmaz.operator.config import ConfigError, OperatorConfig, load_config
from llmaz.plugins.manager import PluginManager
from llmaz.render import InvalidWorkloadTemplate, render_manifests, render_playground, render_service
from llmaz.render.cache import CACHE_VOLUME, SharedCache

HOST = SharedCache(host_path="/var/lib/llmaz/models")
PVC = SharedCache(claim_name="model-cache")


def worker(pg: Any, models: list[Any], cache: SharedCache | None, **pg_kw: Any) -> dict[str, Any]:
    backend = StandInBackend()
    rendered = render_playground(pg, models, backend.backend_runtime(), backend=backend, **pg_kw)
    svc = Service.from_manifest(rendered.objects[0])
    lws = one(render_service(svc, models, backend=backend, model_cache=cache).objects, "LeaderWorkerSet")
    return templates(lws)[-1]


def loaders(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in t["spec"].get("initContainers", []) if c["name"].startswith("model-loader")]


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


SPECULATIVE = (
    playground(
        "p",
        {"modelClaims": {"models": [{"name": "main", "role": "main"}, {"name": "draft", "role": "draft"}]}},
    ),
    [model("main", hub("org/main", revision="v2")), model("draft", {"uri": "s3://bucket/drafts/d.gguf"})],
)


@pytest.mark.parametrize(
    ("cache", "volume"),
    [
        (HOST, {"hostPath": {"path": "/var/lib/llmaz/models", "type": "DirectoryOrCreate"}}),
        (PVC, {"persistentVolumeClaim": {"claimName": "model-cache"}}),
    ],
    ids=["hostPath", "pvc"],
)
def test_loaders_write_into_the_cache_and_the_engine_reads_its_folder(
    cache: SharedCache, volume: dict[str, Any]
) -> None:
    pg, models = SPECULATIVE
    plain, cached = worker(pg, models, None), worker(pg, models, cache)
    # One cache volume for both models instead of an emptyDir each.
    assert [v for v in cached["spec"]["volumes"] if v["name"].startswith("model-")] == [
        {"name": CACHE_VOLUME, **volume}
    ]
    # The engine is told to load the same paths as without a cache.
    assert runner(cached)["args"] == runner(plain)["args"]
    mounts = {m["mountPath"]: m for m in runner(cached)["volumeMounts"] if m["name"] == CACHE_VOLUME}
    for loader in loaders(cached):
        assert loader["volumeMounts"] == [{"name": CACHE_VOLUME, "mountPath": f"{layout.MODEL_DIR}/"}]
        values = env(loader)
        assert values[layout.ENV_CACHE] == "shared"
        written = values[layout.ENV_LOCAL_PATH]
        plain_env = env(next(c for c in loaders(plain) if c["name"] == loader["name"]))
        canonical = plain_env[layout.ENV_LOCAL_PATH]
        # The loader writes a folder per source and revision; the runner mounts it, read-only,
        # where the per-pod volume would have been.
        assert written == layout.cached_path(canonical, plain_env)
        assert mounts[canonical] == {
            "name": CACHE_VOLUME,
            "mountPath": canonical,
            "subPath": written.removeprefix(f"{layout.MODEL_DIR}/"),
            "readOnly": True,
        }
    assert sorted(mounts) == [
        "/workspace/models/d.gguf",
        "/workspace/models/models--org--main",
    ]


def test_cache_folders_are_per_source_and_revision() -> None:
    def folder(source: dict[str, Any]) -> str:
        t = worker(playground("p", {"modelClaim": {"modelName": "m"}}), [model("m", source)], HOST)
        return env(loaders(t)[0])[layout.ENV_LOCAL_PATH]

    main = folder(hub("Qwen/Qwen2-0.5B", revision="main"))
    assert main.startswith("/workspace/models/Huggingface--Qwen-Qwen2-0.5B--main--")
    assert main.endswith("/models--Qwen--Qwen2-0.5B")
    assert folder(hub("Qwen/Qwen2-0.5B", revision="main")) == main  # another Playground: same folder
    others = {
        folder(hub("Qwen/Qwen2-0.5B", revision="v1.1")),
        folder(hub("Qwen/Qwen2-0.5B", revision="main", allowPatterns=["*.json"])),
        folder(hub("Qwen/Qwen2-0.5B", revision="main", name="ModelScope")),
        folder({"uri": "s3://a/m/q.gguf"}),
        folder({"uri": "s3://b/m/q.gguf"}),  # same file name, another bucket
    }
    assert main not in others
    assert len(others) == 5


@pytest.mark.parametrize(
    "source", [{"uri": "pvc://weights/qwen2"}, {"uri": "host:///models/qwen"}, {"uri": "ollama://qwen2:0.5b"}]
)
def test_sources_without_a_loader_do_not_use_the_cache(source: dict[str, Any]) -> None:
    pg = playground("p", {"modelClaim": {"modelName": "m"}})
    t = worker(pg, [model("m", source)], HOST)
    assert t == worker(pg, [model("m", source)], None)
    assert CACHE_VOLUME not in {v["name"] for v in t["spec"].get("volumes", [])}


def test_skip_model_loader_does_not_use_the_cache() -> None:
    pg = playground(
        "p", {"modelClaim": {"modelName": "m"}}, annotations={"llmaz.io/skip-model-loader": "true"}
    )
    t = worker(pg, [model("m", hub("org/m"))], HOST)
    assert loaders(t) == []
    assert CACHE_VOLUME not in {v["name"] for v in t["spec"].get("volumes", [])}


@pytest.mark.parametrize(
    ("source", "taken", "message"),
    [
        (hub("org/m"), "model-cache", "'model-cache' is reserved for the shared model cache"),
        ({"uri": "pvc://weights"}, "model-volume", "'model-volume' is reserved for the model 'm'"),
    ],
)
def test_a_template_volume_with_a_reserved_name_is_refused(
    source: dict[str, Any], taken: str, message: str
) -> None:
    backend = StandInBackend()
    models = [model("m", source)]
    pg = playground("p", {"modelClaim": {"modelName": "m"}})
    doc = render_playground(pg, models, backend.backend_runtime(), backend=backend).objects[0]
    template = doc["spec"]["workloadTemplate"]["workerTemplate"]
    template["spec"]["volumes"] = [{"name": taken, "emptyDir": {}}]
    with pytest.raises(InvalidWorkloadTemplate, match=message):
        render_service(Service.from_manifest(doc), models, backend=backend, model_cache=HOST)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({}, "set exactly one of hostPath and claimName"),
        ({"hostPath": "/a", "claimName": "c"}, "set exactly one of hostPath and claimName"),
        ({"hostPath": "var/lib/models"}, "'var/lib/models' is not an absolute path"),
        ({"claimName": ""}, "String should have at least 1 character"),
    ],
)
def test_invalid_cache_settings_name_the_rule(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SharedCache.model_validate(settings)


def test_operator_config_file_error_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("modelLoader:\n  sharedCache:\n    hostPath: relative/dir\n")
    with pytest.raises(
        ConfigError,
        match=r"modelLoader\.sharedCache\.hostPath: Value error, 'relative/dir' is not an absolute path",
    ):
        load_config(path)


def test_documented_chart_values_render_the_documented_example() -> None:
    """charts/llmaz/ci/shared-cache-values.yaml (shown in docs/concepts/model-loader.md) on the
    Hugging Face example."""
    values = yaml.safe_load((REPO / "charts/llmaz/ci/shared-cache-values.yaml").read_text())
    config = OperatorConfig.model_validate(values["operator"]["config"])
    cache = config.model_loader.shared_cache
    assert cache == HOST
    docs = [
        d for d in yaml.safe_load_all((REPO / "docs/examples/huggingface/playground.yaml").read_text()) if d
    ]

    objs = render_manifests(docs, plugins=PluginManager.from_environment({}), model_cache=cache)
    t = templates(one(objs, "LeaderWorkerSet"))[-1]
    assert {
        "name": CACHE_VOLUME,
        "hostPath": {"path": "/var/lib/llmaz/models", "type": "DirectoryOrCreate"},
    } in t["spec"]["volumes"]
    assert env(loaders(t)[0])[layout.ENV_CACHE] == "shared"
