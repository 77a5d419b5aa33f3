"""The layout contract, from both sides: what the renderer writes is what the loader reads and writes,
and the path the engine is pointed at is the path the loader fills."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import hub_env
from standins import HubStandIn, Repo, generate_model, tree

from llmaz.loader import layout
from llmaz.loader.main import default_local_path, main
from llmaz.plugins.manager import PluginManager
from llmaz.render import render_manifests
from llmaz.render.cache import SharedCache

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "render"))
from render_helpers import EXAMPLES, example_files, load

FILES = example_files()


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager.from_environment({})


CACHE = SharedCache(host_path="/var/lib/llmaz/models")


def _loaders(
    path: Path, plugins: PluginManager, cache: SharedCache | None = None
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod template spec, loader init container) for every loader the example renders."""
    out = []
    for obj in render_manifests(load(path), plugins=plugins, model_cache=cache):
        if obj["kind"] != "LeaderWorkerSet":
            continue
        lws = obj["spec"]["leaderWorkerTemplate"]
        for template in (lws.get("leaderTemplate"), lws["workerTemplate"]):
            if template is None:
                continue
            spec = template["spec"]
            out += [(spec, c) for c in spec.get("initContainers", []) if c["name"].startswith("model-loader")]
    return out


def _values(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


LOADED = [p for p in FILES if _loaders(p, PluginManager.from_environment({}))]


def test_examples_cover_hub_and_object_store_loaders() -> None:
    names = {str(p.relative_to(EXAMPLES)) for p in LOADED}
    assert {
        "huggingface/playground.yaml",
        "objstore-oss/playground.yaml",
        "llamacpp/playground.yaml",
    } <= names


@pytest.mark.parametrize("cache", [None, CACHE], ids=["per-pod-volume", "shared-cache"])
@pytest.mark.parametrize("path", LOADED, ids=[str(p.relative_to(EXAMPLES)) for p in LOADED])
def test_renderer_and_loader_agree_on_every_path(
    path: Path, cache: SharedCache | None, plugins: PluginManager
) -> None:
    for spec, loader in _loaders(path, plugins, cache):
        env = _values(loader)
        local = env[layout.ENV_LOCAL_PATH]
        assert loader["command"] == ["llmaz", "load-model"]  # this project's loader, not the image default
        # Loader side: the same environment without MODEL_LOCAL_PATH leads to the same place.
        assert default_local_path({k: v for k, v in env.items() if k != layout.ENV_LOCAL_PATH}) == local
        # The loader writes on the model volume, mounted at MODEL_DIR.
        volume = loader["volumeMounts"][0]["name"]
        assert loader["volumeMounts"][0]["mountPath"].rstrip("/") == layout.MODEL_DIR
        # Engine side: the runner mounts exactly that path of the volume and is told to load where
        # it mounts it (with a cache, the model's cache folder at the path it has without one).
        runner = next(c for c in spec["containers"] if c["name"] == "model-runner")
        mounts = [m for m in runner["volumeMounts"] if m["name"] == volume]
        mount = next(m for m in mounts if f"{layout.MODEL_DIR}/{m['subPath']}" == local)
        if cache is None:
            assert mount["mountPath"] == local
        else:
            assert env[layout.ENV_CACHE] == layout.CACHE_SHARED
            assert local == layout.cached_path(mount["mountPath"], env)
        assert mount["mountPath"] in " ".join(runner.get("command", []) + runner.get("args", []))


@pytest.mark.parametrize("cache", [None, CACHE], ids=["per-pod-volume", "shared-cache"])
def test_rendered_huggingface_loader_fills_the_path_the_runner_reads(
    cache: SharedCache | None, plugins: PluginManager, tmp_path: Path
) -> None:
    _spec, loader = _loaders(EXAMPLES / "huggingface" / "playground.yaml", plugins, cache)[0]
    env = _values(loader)
    models = tmp_path / "models"
    models.mkdir()
    rebased = str(models) + env[layout.ENV_LOCAL_PATH][len(layout.MODEL_DIR) :]
    with HubStandIn() as hub:
        hub.repos[env[layout.ENV_MODEL_ID]] = Repo(
            files=generate_model(weights_bytes=4096), revisions={env[layout.ENV_REVISION]: "c" * 40}
        )
        run_env = {**hub_env(hub, models), **env, layout.ENV_LOCAL_PATH: rebased}
        assert main(run_env) == 0
        assert tree(rebased) == hub.repos[env[layout.ENV_MODEL_ID]].files
