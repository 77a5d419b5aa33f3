from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from llmaz.api import BackendRuntime
from llmaz.cli import app, mount


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LLMAZ_DISABLED_PLUGINS", "LLMAZ_DISABLE_PLUGIN_AUTOLOAD", "LLMAZ_TRACE_PLUGINS"):
        monkeypatch.delenv(var, raising=False)
    mount()


def test_plugins_list_table() -> None:
    result = CliRunner().invoke(app, ["plugins", "list"])
    assert result.exit_code == 0, result.output
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["NAME", "KIND", "PACKAGE", "VERSION", "ORIGIN", "STATUS", "PROVIDES"]
    by_name = {r.split()[0]: r.split() for r in rows if r.strip()}
    assert by_name["vllm"][1:3] == ["backend", "llmaz-backend-vllm"]
    assert by_name["hpa"][1] == "autoscaler"
    assert by_name["tensorrt-llm"][4] == "builtin"


def test_plugins_list_json_with_a_blocked_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMAZ_DISABLED_PLUGINS", "tgi")
    result = CliRunner().invoke(app, ["plugins", "list", "--json", "--strict"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {p["name"]: p["status"] for p in data["plugins"]}["tgi"] == "blocked"
    assert data["errors"] == []


@pytest.mark.parametrize("name", ["vllm", "sglang", "llamacpp", "ollama", "tgi", "tensorrt-llm"])
def test_backends_show(name: str) -> None:
    result = CliRunner().invoke(
        app, ["backends", "show", name, "--image", "mirror.local/x", "--version", "t1"]
    )
    assert result.exit_code == 0, result.output
    runtime = BackendRuntime.from_manifest(yaml.safe_load(result.stdout))
    assert (runtime.name, runtime.spec.image, runtime.spec.version) == (name, "mirror.local/x", "t1")


def test_backends_show_unknown() -> None:
    result = CliRunner().invoke(app, ["backends", "show", "nope"])
    assert result.exit_code == 1
    assert "no backend 'nope' (installed: llamacpp, ollama, sglang, tensorrt-llm, tgi, vllm)" in result.output


def test_karpenter_command_group_is_attached() -> None:
    result = CliRunner().invoke(app, ["karpenter", "--help"])
    assert result.exit_code == 0, result.output
    assert "nodepools" in result.stdout
