"""Every documented example renders, matches its snapshot and validates against the real schemas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from render_helpers import EXAMPLES, example_files, load
from syrupy.assertion import SnapshotAssertion

from llmaz.cli.render import dump_yaml_stream
from llmaz.plugins.manager import PluginManager
from llmaz.render import render_manifests
from llmaz_devkit.schemas import validate_object

FILES = example_files()
IDS = [str(p.relative_to(EXAMPLES)) for p in FILES]

# The examples llmaz-behaviour.md §11.5 lists must all be present.
REQUIRED = {
    "huggingface/playground.yaml",
    "modelscope/playground.yaml",
    "objstore-oss/playground.yaml",
    "hostpath/playground.yaml",
    "pvc/playground.yaml",
    "sglang/playground.yaml",
    "llamacpp/playground.yaml",
    "tgi/playground.yaml",
    "tensorrt-llm/playground.yaml",
    "ollama/playground.yaml",
    "speculative-decoding/vllm/playground.yaml",
    "speculative-decoding/llamacpp/playground.yaml",
    "multi-nodes/service.yaml",
    "hpa/playground.yaml",
    "runai-streamer/playground-streaming-from-s3.yaml",
    "envoy-ai-gateway/basic.yaml",
}


def test_every_required_example_exists() -> None:
    assert set(IDS) >= REQUIRED


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_example_snapshot(path: Path, plugins: PluginManager, snapshot: SnapshotAssertion) -> None:
    objects = render_manifests(load(path), plugins=plugins)
    assert objects, "an example renders at least one object"
    assert dump_yaml_stream(objects) == snapshot


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_example_objects_validate(path: Path, plugins: PluginManager) -> None:
    problems = []
    for obj in render_manifests(load(path), plugins=plugins):
        problems += [f"{obj['kind']}/{obj['metadata']['name']}: {p}" for p in validate_object(obj)]
    assert problems == []


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_example_render_is_deterministic(path: Path, plugins: PluginManager) -> None:
    docs = load(path)
    assert dump_yaml_stream(render_manifests(docs, plugins=plugins)) == dump_yaml_stream(
        render_manifests(load(path), plugins=plugins)
    )
    assert docs == load(path), "rendering never mutates its input"


def test_no_two_example_files_define_one_object_differently() -> None:
    """docs/examples/README.md promises that the examples can be applied side by side: an object
    two files both define (a shared Gateway) must be the same in both, or one apply would
    overwrite the other's."""
    seen: dict[tuple[str, str, str, str], tuple[Path, dict[str, Any]]] = {}
    clashes = []
    for path in example_files():
        for doc in load(path):
            meta = doc.get("metadata") or {}
            key = (
                str(doc.get("apiVersion")),
                str(doc.get("kind")),
                str(meta.get("namespace", "")),
                str(meta.get("name")),
            )
            first = seen.setdefault(key, (path, doc))
            if first[1] != doc:
                clashes.append(
                    f"{'/'.join(key[1:])}: {first[0].relative_to(EXAMPLES)} and {path.relative_to(EXAMPLES)}"
                )
    assert not clashes, clashes
