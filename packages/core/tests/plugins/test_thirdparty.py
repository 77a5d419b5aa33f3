"""A backend built OUTSIDE the workspace is picked up by a plain install next to core.

Builds the wheel of e2e/fixtures/thirdparty_backend, creates a fresh virtualenv, installs core (from
the workspace path) and the wheel into it, and drives the real ``llmaz`` command there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from llmaz.api import BackendRuntime
from llmaz_devkit.repo import uv_binary

ROOT = Path(__file__).resolve().parents[4]
FIXTURE = ROOT / "e2e" / "fixtures" / "thirdparty_backend"
CORE = ROOT / "packages" / "core"


def _run(
    *args: str | Path, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    if check and res.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        )
    return res


def _core_requirements() -> list[str]:
    """The dependency ranges core declares (passed as direct requirements, so that
    ``--resolution lowest-direct`` installs the lowest version each range allows)."""
    with (CORE / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


@pytest.fixture(scope="module", params=["highest", "lowest-direct"])
def venv(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv holding the llmaz wheel and the sample plugin's wheel, with the newest
    (``highest``) or the oldest (``lowest-direct``) versions core's dependency ranges allow: a
    third-party plugin must install next to llmaz without pin conflicts, at either end."""
    work = tmp_path_factory.mktemp(f"thirdparty-{request.param}")
    dist, env_dir = work / "dist", work / "venv"
    uv = uv_binary()
    _run(uv, "build", "--wheel", "--out-dir", dist, FIXTURE)
    _run(uv, "build", "--wheel", "--out-dir", dist, CORE)
    _run(uv, "venv", "--python", sys.executable, env_dir)
    python = env_dir / "bin" / "python"
    wheels = sorted(dist.glob("*.whl"))
    _run(
        uv,
        "pip",
        "install",
        "--python",
        python,
        "--resolution",
        request.param,
        *wheels,
        *_core_requirements(),
    )
    return env_dir


def test_installed_versions_are_the_ends_of_the_ranges(venv: Path, request: pytest.FixtureRequest) -> None:
    """lowest-direct really installed each range's lower bound; highest installed versions inside
    the ranges (so both ends are what the other tests of this module exercised)."""
    frozen = _run(uv_binary(), "pip", "freeze", "--python", venv / "bin" / "python").stdout
    installed = {
        canonicalize_name(name): Version(version)
        for line in frozen.splitlines()
        if "==" in line
        for name, version in [line.split("==", 1)]
    }
    for text in _core_requirements():
        requirement = Requirement(text)
        version = installed[canonicalize_name(requirement.name)]
        assert version in requirement.specifier, (text, version)
        if request.node.callspec.params["venv"] == "lowest-direct":
            lower = next(Version(s.version) for s in requirement.specifier if s.operator == ">=")
            assert version == lower, (text, version)


def _llmaz(venv: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LLMAZ_")}
    environ.update(env)
    return _run(venv / "bin" / "llmaz", *args, env=environ, check=False)


def test_listed_as_third_party(venv: Path) -> None:
    res = _llmaz(venv, "plugins", "list", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    echo = next(p for p in data["plugins"] if p["name"] == "echo")
    assert echo == {
        "name": "echo",
        "kind": "backend",
        "package": "llmaz-backend-echo",
        "version": "0.3.0",
        "origin": "third-party",
        "status": "loaded",
        "provides": "echo",
    }
    assert data["errors"] == []
    table = _llmaz(venv, "plugins", "list").stdout
    assert "echo" in table
    assert "third-party" in table


def test_produces_a_valid_backend_runtime(venv: Path) -> None:
    res = _llmaz(venv, "backends", "show", "echo", "--version", "0.4.0")
    assert res.returncode == 0, res.stderr
    runtime = BackendRuntime.from_manifest(yaml.safe_load(res.stdout))
    assert runtime.name == "echo"
    assert runtime.spec.version == "0.4.0"
    assert runtime.spec.readiness_probe == {
        "httpGet": {"path": "/health", "port": 9000},
        "initialDelaySeconds": 5,
        "periodSeconds": 5,
        "failureThreshold": 3,
    }


def test_blocking_by_name_removes_it(venv: Path) -> None:
    res = _llmaz(venv, "plugins", "list", "--json", LLMAZ_DISABLED_PLUGINS="echo")
    echo = next(p for p in json.loads(res.stdout)["plugins"] if p["name"] == "echo")
    assert echo["status"] == "blocked"
    assert echo["provides"] == "-"
    shown = _llmaz(venv, "backends", "show", "echo", LLMAZ_DISABLED_PLUGINS="echo")
    assert shown.returncode == 1
    assert "blocked" in shown.stderr
