"""``pip install llmaz`` alone: the built wheel, in an empty virtualenv, gives a CLI whose every command
works or says what to install.

Builds the wheel of packages/core, installs it (dependencies from PyPI through uv's cache) into a
fresh virtualenv with no plugin and no dev kit, and runs every command there, as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from llmaz_devkit.repo import uv_binary

ROOT = Path(__file__).resolve().parents[4]
CORE = ROOT / "packages" / "core"
EXAMPLES = ROOT / "docs" / "examples"


def _run(*args: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMAZ_")}
    res = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, check=False, env=env
    )
    if check and res.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        )
    return res


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("wheel")
    _run(uv_binary(), "build", "--wheel", "--out-dir", dist, CORE)
    return next(dist.glob("llmaz-*.whl"))


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    env_dir = tmp_path_factory.mktemp("clean") / "venv"
    _run(uv_binary(), "venv", "--python", sys.executable, env_dir)
    _run(uv_binary(), "pip", "install", "--python", env_dir / "bin" / "python", wheel)
    return env_dir


def llmaz(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(venv / "bin" / "llmaz", *args, check=False)


def test_wheel_holds_no_repository_tooling(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "llmaz/_crds/openmodels.llmaz.io.yaml" in names
    for repo_only in ("llmaz/testing/cluster.py", "llmaz/testing/pytest_plugin.py", "llmaz/cli/demo.py"):
        assert repo_only not in names
    assert not [n for n in names if n.startswith("llmaz_devkit/")]


def test_help_lists_the_core_commands_only(venv: Path) -> None:
    res = llmaz(venv, "--help")
    assert res.returncode == 0, res.stderr
    for command in ("version", "crds", "render", "plugins", "backends"):
        assert f" {command} " in res.stdout, command
    assert " demo " not in res.stdout  # a dev-kit command: the repository's, not the wheel's


def test_version_and_crds(venv: Path) -> None:
    assert llmaz(venv, "version").stdout.strip() == "0.1.0"
    res = llmaz(venv, "crds")
    assert res.returncode == 0, res.stderr
    names = [d["metadata"]["name"] for d in yaml.safe_load_all(res.stdout)]
    assert names == [
        "openmodels.llmaz.io",
        "backendruntimes.inference.llmaz.io",
        "playgrounds.inference.llmaz.io",
        "services.inference.llmaz.io",
    ]


def test_render_works_with_a_runtime_in_the_input_and_says_what_to_install_without(venv: Path) -> None:
    res = llmaz(venv, "render", "-f", str(EXAMPLES / "backendruntime" / "custom-vllm.yaml"))
    assert res.returncode == 0, res.stderr
    assert "LeaderWorkerSet" in [d["kind"] for d in yaml.safe_load_all(res.stdout)]
    res = llmaz(venv, "render", "-f", str(EXAMPLES / "huggingface" / "playground.yaml"))
    assert res.returncode == 1
    assert "BackendRuntime 'vllm' not found; there are no backends" in res.stderr
    assert "pip install llmaz-backend-<engine>" in res.stderr


def test_plugins_and_backends_commands(venv: Path) -> None:
    listed = llmaz(venv, "plugins", "list", "--strict")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["NAME", "KIND", "PACKAGE", "VERSION", "ORIGIN", "STATUS", "PROVIDES"]
    hooks = llmaz(venv, "plugins", "hooks")
    assert hooks.returncode == 0, hooks.stderr
    assert "## `llmaz_register_commands`" in hooks.stdout
    shown = llmaz(venv, "backends", "show", "vllm")
    assert shown.returncode == 1
    assert "no backend 'vllm' (installed: none)" in shown.stderr
    assert "pip install llmaz-backend-<engine>" in shown.stderr
    backends = llmaz(venv, "backends", "list")
    assert (backends.returncode, backends.stdout) == (0, "")
    assert "pip install llmaz-backend-<engine>" in backends.stderr
    table = llmaz(venv, "backends", "table")
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("# Supported engines")


def test_sdk_validates_offline_in_the_wheel(venv: Path) -> None:
    code = (
        "from pydantic import ValidationError\n"
        "from llmaz.api import ModelHub, ModelSource, ModelSpec, OpenModel\n"
        "spec = ModelSpec(family_name='f', source=ModelSource(model_hub=ModelHub(model_id='a/b')))\n"
        "try:\n    OpenModel.new('bad.name', spec=spec)\n"
        "except ValidationError as e:\n    print(e.errors()[0]['loc'])\n"
    )
    res = _run(venv / "bin" / "python", "-c", code)
    assert res.stdout.strip() == "('metadata', 'name')"


def test_testing_extra_declares_what_the_test_kit_imports(venv: Path, wheel: Path) -> None:
    python = venv / "bin" / "python"
    res = _run(python, "-c", "import llmaz.testing.conformance", check=False)
    assert res.returncode == 1
    assert "No module named 'pytest'" in res.stderr
    _run(uv_binary(), "pip", "install", "--python", python, f"llmaz[testing] @ {wheel.as_uri()}")
    for module in ("llmaz.testing.conformance", "llmaz.testing.plugins"):
        _run(python, "-c", f"import {module}")
