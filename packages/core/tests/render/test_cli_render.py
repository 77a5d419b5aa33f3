"""``llmaz render``: YAML stream on stdout; ``<file>: <kind>/<name>: <field>: <reason>`` on errors."""

from __future__ import annotations

from pathlib import Path

import yaml
from render_helpers import EXAMPLES
from typer.testing import CliRunner

from llmaz.cli import _register, app

_register()


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["render", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_render_prints_every_object_as_a_yaml_stream() -> None:
    code, out, _ = run("-f", str(EXAMPLES / "hpa" / "playground.yaml"))
    assert code == 0
    kinds = [d["kind"] for d in yaml.safe_load_all(out)]
    assert kinds == ["Service", "LeaderWorkerSet", "Service", "HorizontalPodAutoscaler"]
    assert "&id" not in out


def test_render_reads_several_files_and_stdin(tmp_path: Path) -> None:
    text = (EXAMPLES / "huggingface" / "playground.yaml").read_text()
    model, pg = text.split("\n---\n")
    models = tmp_path / "models.yaml"
    models.write_text(model)
    code, out, err = run("-f", str(models), "-f", "-", stdin=pg)
    assert code == 0, err
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["Service", "LeaderWorkerSet", "Service"]


def test_render_reports_schema_errors_with_file_kind_name_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {name: x}\n"
        "spec:\n  replica: 2\n  modelClaim: {modelName: ''}\n"
    )
    code, out, err = run("-f", str(bad))
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert f"{bad}: Playground/x: spec.modelClaim.modelName: String should have at least 1 character" in lines
    assert any(line.startswith(f"{bad}: Playground/x: spec.replica: ") for line in lines)


def test_render_reports_render_errors_with_the_file_of_the_object(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text((EXAMPLES / "huggingface" / "playground.yaml").read_text().split("\n---\n")[0])
    pg = tmp_path / "pg.yaml"
    pg.write_text(
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {name: p}\n"
        "spec:\n  modelClaim: {modelName: missing}\n"
    )
    code, _, err = run("-f", str(models), "-f", str(pg))
    assert code == 1
    assert err.strip() == f"{pg}: Playground/p: spec.modelClaim.modelName: OpenModel 'missing' not found"


def test_render_reports_every_problem_of_the_input_in_one_run(tmp_path: Path) -> None:
    # A user fixing a file wants all problems at once, each with the file it came from.
    models = tmp_path / "models.yaml"
    models.write_text((EXAMPLES / "huggingface" / "playground.yaml").read_text().split("\n---\n")[0])
    bad_schema = tmp_path / "a.yaml"
    bad_schema.write_text(
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {name: a}\n"
        "spec:\n  replica: 2\n  modelClaim: {modelName: opt-125m}\n"
    )
    bad_refs = tmp_path / "b.yaml"
    bad_refs.write_text(
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {name: b}\n"
        "spec:\n  modelClaim: {modelName: missing}\n---\n"
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {name: c}\n"
        "spec:\n  modelClaim: {modelName: opt-125m}\n  backendRuntimeConfig: {backendName: nope}\n"
    )
    code, out, err = run("-f", str(models), "-f", str(bad_schema), "-f", str(bad_refs))
    assert code == 1
    assert out == ""
    assert err.strip().splitlines() == [
        f"{bad_schema}: Playground/a: spec.replica: Extra inputs are not permitted",
        f"{bad_refs}: Playground/b: spec.modelClaim.modelName: OpenModel 'missing' not found",
        f"{bad_refs}: Playground/c: spec.backendRuntimeConfig.backendName: BackendRuntime 'nope' not found",
    ]


def test_render_reports_an_object_given_twice(tmp_path: Path) -> None:
    example = EXAMPLES / "huggingface" / "playground.yaml"
    code, out, err = run("-f", str(example), "-f", str(example))
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert lines[0].startswith(
        f"{example}: OpenModel/opt-125m: metadata.name: OpenModel 'opt-125m' appears more than once"
    )
    assert lines[1].startswith(f"{example}: Playground/opt-125m: metadata.name: Playground 'opt-125m'")
    assert len(lines) == 2  # the OpenModel and the Playground, each reported once


def test_render_reports_unreadable_files(tmp_path: Path) -> None:
    code, _, err = run("-f", str(tmp_path / "nope.yaml"))
    assert code == 1
    assert "nope.yaml" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [\n")
    code, _, err = run("-f", str(broken))
    assert code == 1
    assert "invalid YAML" in err


def test_render_without_plugins_needs_runtimes_in_the_files() -> None:
    code, _, err = run("--no-plugins", "-f", str(EXAMPLES / "huggingface" / "playground.yaml"))
    assert code == 1
    assert "BackendRuntime 'vllm' not found" in err
