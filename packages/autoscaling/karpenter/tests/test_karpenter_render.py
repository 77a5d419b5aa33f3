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


def test_cli_reports_input_errors_like_render(tmp_path: Path) -> None:
    # It read files its own way: a missing file was a traceback, bad YAML exited 2 with PyYAML's
    # '"<unicode string>"' text. Now it shares render's reading and report format (exit 1).
    missing = tmp_path / "missing.yaml"
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: llmaz.io/v1alpha1\nkind: OpenModel\nmetadata:\n  name: [a\n")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text(
        "apiVersion: llmaz.io/v1alpha1\nkind: OpenModel\nmetadata: {name: m}\n"
        "spec: {familyName: f, source: {modelHub: {modelID: a/b}}, flavours: []}\n"
    )
    for path, expected in [
        (missing, f"{missing}: No such file or directory"),
        (broken, f"{broken}:5:1: invalid YAML: "),
        (invalid, f"{invalid}: OpenModel/m: spec.flavours: Extra inputs are not permitted"),
    ]:
        result = CliRunner().invoke(app, ["nodepools", "-f", str(path)])
        assert result.exit_code == 1, result.output
        assert result.stdout == ""
        assert result.stderr.startswith(expected), result.stderr
        assert "Traceback" not in result.output


def test_cli_names_the_model_of_an_unknown_capacity_type(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    assert "INSTANCE-TYPE: g5g.xlarge" in text
    model = tmp_path / "model.yaml"
    model.write_text(
        text.replace("INSTANCE-TYPE: g5g.xlarge", "INSTANCE-TYPE: g5g.xlarge\n          CAPACITY-TYPE: cheap")
    )
    result = CliRunner().invoke(app, ["nodepools", "-f", str(model)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{model}: OpenModel/qwen2-0--5b-karpenter: flavor 't4g': CAPACITY-TYPE")
