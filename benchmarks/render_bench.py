"""Benchmark (not a test): median time to render one Playground, and its Service into an LWS, as
the operator does; and what ``llmaz render`` adds: the CRDs' CEL rules evaluated offline on its input.

Run: ``.venv/bin/python benchmarks/render_bench.py [--rounds N]``. Prints one line per case with the
median and the 90th percentile in microseconds. Numbers go to docs/development/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from llmaz.api import BackendRuntime, OpenModel, Playground, Service
from llmaz.plugins.manager import PluginManager
from llmaz.render import parse_document, render_manifests, render_playground, render_service

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "huggingface" / "playground.yaml"


def measure(fn: Callable[[], Any], rounds: int) -> tuple[float, float]:
    for _ in range(min(200, rounds)):
        fn()  # warm-up
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    samples.sort()
    return statistics.median(samples) / 1000, samples[int(len(samples) * 0.9)] / 1000


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5000)
    rounds = parser.parse_args().rounds

    docs = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    model = OpenModel.from_manifest(next(d for d in docs if d["kind"] == "OpenModel"))
    playground = Playground.from_manifest(next(d for d in docs if d["kind"] == "Playground"))
    plugins = PluginManager.from_environment()
    backend = plugins.get_backend("vllm")
    if backend is None:
        raise SystemExit("the vllm backend plugin is not installed (run tools/bootstrap.sh)")
    runtime: BackendRuntime = backend.backend_runtime()
    autoscalers = list(plugins.autoscalers.values())
    models = {model.name: model}

    def playground_only() -> None:
        render_playground(playground, models, runtime, backend=backend, autoscalers=autoscalers)

    def playground_to_lws() -> None:
        rendered = render_playground(playground, models, runtime, backend=backend, autoscalers=autoscalers)
        # as the operator reads it back: admitted by the API server, so no offline CEL rules
        service = Service.from_manifest(rendered.objects[0], check_rules=False)
        render_service(service, models, backend=backend)

    def parse_with_rules() -> None:
        for doc in docs:
            parse_document(doc)

    def manifests() -> None:
        render_manifests(docs, plugins=plugins)

    print(f"machine: {os.cpu_count()} CPUs (nproc), {cpu_model()}, Python {platform.python_version()}")
    print(f"example: {EXAMPLE.relative_to(EXAMPLE.parents[3])}, {rounds} rounds")
    for name, fn in (
        ("render_playground (Playground -> Service + autoscalers)", playground_only),
        ("render_playground + render_service (-> LWS + lb Service)", playground_to_lws),
        ("parse the documents with the CRDs' CEL rules offline", parse_with_rules),
        ("render_manifests (both of the above: llmaz render without YAML)", manifests),
    ):
        median, p90 = measure(fn, rounds)
        print(f"{name}: median {median:.1f} us, p90 {p90:.1f} us")


if __name__ == "__main__":
    main()
