"""``llmaz render``: YAML stream on stdout; ``<file>: <kind>/<name>: <field>: <reason>`` on errors."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from render_helpers import EXAMPLES
from typer.testing import CliRunner

from llmaz.cli import app, mount
from llmaz.render import DEFAULT_MODEL_LOADER_IMAGE

mount()


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
    assert err.strip() == (
        f"{pg}: Playground/p: spec.modelClaim.modelName: OpenModel 'missing' not found; "
        "known OpenModels: opt-125m"
    )


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
        f"{bad_refs}: Playground/b: spec.modelClaim.modelName: OpenModel 'missing' not found; "
        "known OpenModels: opt-125m",
        f"{bad_refs}: Playground/c: spec.backendRuntimeConfig.backendName: BackendRuntime 'nope' not found; "
        "known backends: llamacpp, ollama, sglang, tensorrt-llm, tgi, vllm",
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


def test_render_names_file_and_line_of_a_yaml_syntax_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: llmaz.io/v1alpha1\nkind: OpenModel\nmetadata:\n  name: [a\n")
    code, out, err = run("-f", str(broken))
    assert code == 1
    assert out == ""
    assert err.startswith(f"{broken}:5:1: invalid YAML: ")
    assert "<unicode string>" not in err
    code, _, err = run("-f", "-", stdin="a: 1\nb: : c\n")
    assert code == 1
    assert err.startswith("<stdin>:2:4: invalid YAML: mapping values are not allowed here")


def test_render_refuses_a_document_of_an_unknown_kind(tmp_path: Path) -> None:
    odd = tmp_path / "odd.yaml"
    odd.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    code, out, err = run("-f", str(odd))
    assert code == 1
    assert out == ""
    assert err.strip() == (
        f"{odd}: document 1: v1 ConfigMap is not an llmaz kind "
        "(llmaz renders llmaz.io/v1alpha1 OpenModel, inference.llmaz.io/v1alpha1 BackendRuntime, "
        "inference.llmaz.io/v1alpha1 Playground, inference.llmaz.io/v1alpha1 Service)"
    )


def test_render_refuses_a_typo_in_an_llmaz_kind_even_next_to_valid_documents(tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text(
        (EXAMPLES / "huggingface" / "playground.yaml").read_text()
        + "\n---\napiVersion: inference.llmaz.io/v1alpha1\nkind: Playgroud\nmetadata: {name: x}\n"
    )
    code, out, err = run("-f", str(typo))
    assert code == 1
    assert out == ""
    assert err.startswith(f"{typo}: document 3: inference.llmaz.io/v1alpha1 Playgroud is not an llmaz kind")


def test_render_skips_other_apis_next_to_llmaz_kinds(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n"
        + (EXAMPLES / "huggingface" / "playground.yaml").read_text()
    )
    code, out, err = run("-f", str(mixed))
    assert code == 0, err
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["Service", "LeaderWorkerSet", "Service"]


def test_render_refuses_an_empty_input(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n---\n")
    code, out, err = run("-f", str(empty))
    assert code == 1
    assert out == ""
    assert err.strip() == f"{empty}: no manifests in this input"
    code, _, err = run("-f", "-", stdin="")
    assert code == 1
    assert err.strip() == "<stdin>: no manifests in this input"


def test_render_without_plugins_needs_runtimes_in_the_files() -> None:
    code, _, err = run("--no-plugins", "-f", str(EXAMPLES / "huggingface" / "playground.yaml"))
    assert code == 1
    assert "BackendRuntime 'vllm' not found; there are no backends (plugins were not consulted)" in err


def test_render_refuses_what_the_api_server_would_refuse(tmp_path: Path) -> None:
    # The CRD's CEL rules run offline too: an object the API server would refuse never renders.
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (EXAMPLES / "huggingface" / "playground.yaml").read_text().split("\n---\n")[0]
        + "\n---\napiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {name: Bad_PG}\n"
        "spec:\n  modelClaim: {modelName: opt-125m}\n"
    )
    code, out, err = run("-f", str(bad))
    assert code == 1
    assert out == ""
    assert err.startswith(f"{bad}: Playground/Bad_PG: metadata.name: metadata.name must be a DNS-1123 label")
    assert err.strip().endswith("(got Bad_PG)")


def test_render_with_the_operator_config_uses_its_shared_cache_loader_image_and_scheduler(
    tmp_path: Path,
) -> None:
    config = tmp_path / "operator.yaml"
    config.write_text(
        "modelLoader:\n  image: example.com/loader:v1\n  sharedCache: {hostPath: /var/lib/llmaz/models}\n"
        "schedulerName: second-scheduler\n"
    )
    example = str(EXAMPLES / "huggingface" / "playground.yaml")
    code, out, err = run("-f", example, "--config", str(config))
    assert code == 0, err
    documents = list(yaml.safe_load_all(out))
    lws = next(d for d in documents if d["kind"] == "LeaderWorkerSet")
    pod = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert pod["schedulerName"] == "second-scheduler"
    service = next(d for d in documents if d["kind"] == "Service" and "workloadTemplate" in d["spec"])
    assert "schedulerName" not in service["spec"]["workloadTemplate"]["workerTemplate"]["spec"]
    cache = {
        "name": "model-cache",
        "hostPath": {"path": "/var/lib/llmaz/models", "type": "DirectoryOrCreate"},
    }
    assert cache in pod["volumes"]
    (loader,) = pod["initContainers"]
    assert loader["image"] == "example.com/loader:v1"
    # the flag wins over the file, as for every other setting given twice
    code, out, _ = run("-f", example, "--config", str(config), "--model-loader-image", "other:v2")
    lws = next(d for d in yaml.safe_load_all(out) if d["kind"] == "LeaderWorkerSet")
    assert (
        lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["initContainers"][0]["image"]
        == "other:v2"
    )


def test_render_with_the_operator_config_prints_the_objects_of_its_integrations(tmp_path: Path) -> None:
    config = tmp_path / "operator.yaml"
    config.write_text("integrations:\n  aiGateway: true\n  inferencePool: true\n")
    example = str(EXAMPLES / "inference-pool" / "playground.yaml")
    code, out, err = run("-f", example, "--config", str(config))
    assert code == 0, err
    documents = list(yaml.safe_load_all(out))
    kinds = [d["kind"] for d in documents]
    assert kinds[:3] == ["Service", "LeaderWorkerSet", "Service"]  # the Playground's children first
    assert {
        "InferencePool",
        "InferenceObjective",
        "InferenceModelRewrite",
        "Deployment",
        "AIGatewayRoute",
    } <= set(kinds)
    route = next(d for d in documents if d["kind"] == "AIGatewayRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "qwen2-0--5b-pooled"}
    ]
    picker = next(d for d in documents if d["kind"] == "Deployment")
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--total-queued-requests-metric") + 1] == "vllm:num_requests_waiting"
    # without the config, or with every integration off: only the children
    code, out, _ = run("-f", example)
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["Service", "LeaderWorkerSet", "Service"]
    # a bad annotation is an error naming the file, the object and the annotation
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(example).read_text().replace('llmaz.io/priority: "10"', "llmaz.io/priority: high"))
    code, _, err = run("-f", str(bad), "--config", str(config))
    assert code == 1
    assert "Playground/qwen2-0--5b-pooled" in err
    assert "metadata.annotations[llmaz.io/priority]: 'high' is not a whole number" in err


def test_render_names_the_config_file_and_field_of_a_bad_cache(tmp_path: Path) -> None:
    config = tmp_path / "operator.yaml"
    config.write_text("modelLoader:\n  sharedCache: {hostPath: relative/dir}\n")
    code, out, err = run("-f", str(EXAMPLES / "huggingface" / "playground.yaml"), "--config", str(config))
    assert code == 1
    assert out == ""
    assert str(config) in err
    assert "modelLoader.sharedCache.hostPath" in err
    assert "not an absolute path" in err


def test_render_help_shows_the_whole_model_loader_image_help() -> None:
    # Help text is rich markup: a "[default: ...]" in it was taken for a tag and silently dropped.
    result = CliRunner().invoke(app, ["render", "--help"], env={"COLUMNS": "200"})  # image unwrapped
    assert result.exit_code == 0
    text = " ".join(result.stdout.translate(str.maketrans("│╭╮╰╯─", "      ")).split())
    assert (
        "Image of the model-loader init containers. Default: modelLoader.image of --config, "
        f"else {DEFAULT_MODEL_LOADER_IMAGE}." in text
    )


def test_render_refuses_objects_without_a_name(tmp_path: Path) -> None:
    # Everything rendered is named after its owner: without a name render printed objects named ''
    # and '-lb' and exited 0, where the API server refuses the object.
    model = (EXAMPLES / "huggingface" / "playground.yaml").read_text().split("\n---\n")[0]
    bad = tmp_path / "unnamed.yaml"
    bad.write_text(
        model.replace("name: opt-125m", "name: ''", 1) + "\n---\n"
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {labels: {a: b}}\n"
        "spec:\n  modelClaim: {modelName: opt-125m}\n---\n"
        "apiVersion: inference.llmaz.io/v1alpha1\nkind: Service\n"
        "metadata: {generateName: svc-}\nspec: {}\n"
    )
    code, out, err = run("-f", str(bad))
    assert code == 1
    assert out == ""
    lines = err.strip().splitlines()
    assert lines[:2] == [
        f"{bad}: OpenModel: metadata.name: required",
        f"{bad}: Playground: metadata.name: required",
    ]
    assert lines[2] == (
        f"{bad}: Service: metadata.name: required (render cannot know the name the API server would "
        "generate from generateName)"
    )
    assert all(line.startswith(f"{bad}: Service: spec.") for line in lines[3:])  # its schema errors too


_POD = "spec.workloadTemplate.workerTemplate."
_HUB = "spec.source.modelHub."
_NULL_CASES = {
    # file, document, field given as null, other fields set in both runs
    "pod volumes": ("service/single-host.yaml", 1, _POD + "spec.volumes", {}),
    "pod metadata": ("service/single-host.yaml", 1, _POD + "metadata", {}),
    "container resources": ("service/single-host.yaml", 1, _POD + "spec.containers.0.resources", {}),
    "container volumeMounts": ("service/single-host.yaml", 1, _POD + "spec.containers.0.volumeMounts", {}),
    "affinity": ("service/single-host.yaml", 1, _POD + "spec.affinity", {}),
    "nodeAffinity": ("service/single-host.yaml", 1, _POD + "spec.affinity.nodeAffinity", {}),
    "filename next to allowPatterns": (
        "huggingface/playground.yaml",
        0,
        _HUB + "filename",
        {_HUB + "allowPatterns": ["*.json"]},
    ),
    "ignorePatterns next to filename": (
        "huggingface/playground.yaml",
        0,
        _HUB + "ignorePatterns",
        {_HUB + "filename": "x.gguf"},
    ),
    "requests next to limits": (
        "huggingface/playground.yaml",
        1,
        "spec.backendRuntimeConfig.resources.requests",
        {"spec.backendRuntimeConfig.resources.limits": {"cpu": 8}},
    ),
    "defaulted revision": ("huggingface/playground.yaml", 0, _HUB + "revision", {}),
    "defaulted replicas": ("huggingface/playground.yaml", 1, "spec.replicas", {}),
    "defaulted backendName": ("huggingface/playground.yaml", 1, "spec.backendRuntimeConfig.backendName", {}),
}


def _set(doc: dict[str, Any], path: str, value: Any, *, remove: bool = False) -> None:
    *parents, last = path.split(".")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    if remove:
        node.pop(last, None)
    else:
        node[last] = value


@pytest.mark.parametrize("case", _NULL_CASES.values(), ids=list(_NULL_CASES))
def test_render_takes_a_null_field_for_an_absent_one(case: tuple[str, int, str, dict[str, Any]]) -> None:
    # Helm output often holds "field: null"; the API server drops such fields before defaulting and
    # validation. Render crashed on them (pod templates) or refused them (defaults, exclusive fields).
    example, index, field, others = case
    docs = list(yaml.safe_load_all((EXAMPLES / example).read_text()))
    for path, value in others.items():
        _set(docs[index], path, value)
    absent, null = copy.deepcopy(docs), copy.deepcopy(docs)
    _set(absent[index], field, None, remove=True)
    _set(null[index], field, None)
    expected = run("-f", "-", stdin=yaml.safe_dump_all(absent))
    assert expected[0] == 0, expected[2]
    assert run("-f", "-", stdin=yaml.safe_dump_all(null)) == expected


def test_render_warns_of_what_an_autoscaler_could_not_render(tmp_path: Path) -> None:
    # The operator reports such problems in status; render dropped them, so an HPA silently missing
    # from the output looked like success.
    model = (EXAMPLES / "huggingface" / "playground.yaml").read_text().split("\n---\n")[0]
    pg = tmp_path / "pg.yaml"
    pg.write_text(
        model + "\n---\napiVersion: inference.llmaz.io/v1alpha1\nkind: Playground\nmetadata: {name: p}\n"
        "spec:\n  modelClaim: {modelName: opt-125m}\n  elasticConfig: {maxReplicas: 3}\n"
    )
    code, out, err = run("-f", str(pg))
    assert code == 0
    assert [d["kind"] for d in yaml.safe_load_all(out)] == ["Service", "LeaderWorkerSet", "Service"]
    assert err.strip().splitlines() == [
        f"warning: {pg}: Playground/p: NoScaleTrigger: elasticConfig is set but there is no HPA trigger: "
        "set elasticConfig.scaleTrigger.hpa or use a config of BackendRuntime vllm with a scaleTrigger "
        "(config 'default' has none); no HorizontalPodAutoscaler is created"
    ]


def test_render_warns_of_an_autoscaler_annotation_naming_no_installed_autoscaler(tmp_path: Path) -> None:
    # Each autoscaler ignores a Playground that chose another one, so "kedaa" left it unscaled: no
    # HPA, no ScaledObject, exit 0 and not a word.
    text = (EXAMPLES / "keda" / "playground.yaml").read_text()
    assert "llmaz.io/autoscaler: keda\n" in text
    pg = tmp_path / "pg.yaml"
    pg.write_text(text.replace("llmaz.io/autoscaler: keda\n", "llmaz.io/autoscaler: kedaa\n"))
    name = next(d for d in yaml.safe_load_all(text) if d["kind"] == "Playground")["metadata"]["name"]
    code, out, err = run("-f", str(pg))
    assert code == 0
    assert "ScaledObject" not in out
    assert err.strip().splitlines() == [
        f"warning: {pg}: Playground/{name}: UnknownAutoscaler: annotation llmaz.io/autoscaler='kedaa' "
        "names no installed autoscaler (known autoscalers: hpa, karpenter, keda); no autoscaler scales "
        "this Playground"
    ]
    code, _, err = run("-f", str(EXAMPLES / "keda" / "playground.yaml"))
    assert (code, err) == (0, "")  # a known one is not reported
