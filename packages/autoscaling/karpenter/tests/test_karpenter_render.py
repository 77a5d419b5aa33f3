from __future__ import annotations

from pathlib import Path

import yaml
from syrupy.assertion import SnapshotAssertion
from typer.testing import CliRunner

from llmaz.api import OpenModel, parse_manifests
from llmaz.testing.conformance import sample_autoscaling_inputs
from llmaz_autoscaler_karpenter import KarpenterAutoscaler, NodeClassRef, nodepools_for_model
from llmaz_autoscaler_karpenter.cli import app

EXAMPLE = Path(__file__).resolve().parents[4] / "docs" / "examples" / "karpenter" / "playground.yaml"


def example_model() -> OpenModel:
    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    return next(m for m in parse_manifests(docs) if isinstance(m, OpenModel))


def test_hints(snapshot: SnapshotAssertion) -> None:
    request = sample_autoscaling_inputs()[3]
    out = KarpenterAutoscaler().render(request)
    assert out.pod_annotations == {"karpenter.sh/do-not-disrupt": "true"}
    assert out.node_affinity_hints.per_flavor == snapshot(name="per_flavor")
    assert out.node_affinity_hints.preferred == snapshot(name="preferred")


def test_nodepools_for_the_docs_example(snapshot: SnapshotAssertion) -> None:
    pools = nodepools_for_model(example_model())
    assert [p["spec"]["weight"] for p in pools] == [100, 90]
    assert pools == snapshot


def test_nodepools_with_options() -> None:
    pools = nodepools_for_model(
        example_model(), node_class=NodeClassRef(name="gpu"), default_capacity_types=("spot",), gpu_taint=True
    )
    spec = pools[0]["spec"]["template"]["spec"]
    assert spec["nodeClassRef"]["name"] == "gpu"
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]} in spec["requirements"]
    assert spec["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]


def test_cli_prints_nodepools() -> None:
    result = CliRunner().invoke(app, ["nodepools", "-f", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    pools = list(yaml.safe_load_all(result.stdout))
    assert [p["metadata"]["name"] for p in pools] == [
        "llmaz-qwen2-0--5b-karpenter-t4g",
        "llmaz-qwen2-0--5b-karpenter-t4",
    ]


def test_cli_rejects_a_file_without_models(tmp_path: Path) -> None:
    empty = tmp_path / "x.yaml"
    empty.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result = CliRunner().invoke(app, ["nodepools", "-f", str(empty)])
    assert result.exit_code == 1
