"""A backend built OUTSIDE the workspace is picked up by a plain install next to core.

Builds the wheel of e2e/fixtures/thirdparty_backend, creates a fresh virtualenv, installs core (from
the workspace path) and the wheel into it, and drives the real ``llmaz`` command there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from llmaz.api import BackendRuntime

ROOT = Path(__file__).resolve().parents[4]
FIXTURE = ROOT / "e2e" / "fixtures" / "thirdparty_backend"
CORE = ROOT / "packages" / "core"


def _uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    for candidate in sorted((Path.home() / ".cache" / "llmaz").glob("bootstrap-uv-*/bin/uv")):
        return str(candidate)
    return None


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


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("thirdparty")
    dist, env_dir = work / "dist", work / "venv"
    uv = _uv()
    if uv:
        _run(uv, "build", "--wheel", "--out-dir", dist, FIXTURE)
        _run(uv, "venv", "--python", sys.executable, env_dir)
        python = env_dir / "bin" / "python"
        wheel = next(dist.glob("*.whl"))
        _run(uv, "pip", "install", "--python", python, CORE, wheel)
    else:  # plain pip + build, slower
        _run(sys.executable, "-m", "build", "--wheel", "--outdir", dist, FIXTURE)
        _run(sys.executable, "-m", "venv", env_dir)
        python = env_dir / "bin" / "python"
        _run(python, "-m", "pip", "install", "--quiet", CORE, next(dist.glob("*.whl")))
    return env_dir


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
