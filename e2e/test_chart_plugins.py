"""``operator.extraPlugins``: the chart's install-plugins init container, run with real pip.

No container runs here, so the init container's own command, args and env (from the chart rendered
by real helm) run on this machine's Python, outside any virtualenv, as the image's Python would:
the "image" is a folder that holds a stand-in ``llmaz`` distribution (on ``PYTHONPATH``, as the
image's site-packages are on its ``sys.path``), and the "index" is a folder of two stand-in wheels
(``--no-index --find-links``; no package index is reachable here): ``llmaz`` and a plugin that
requires it, as every llmaz plugin does.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import CHART_SOURCE, helm_template

from llmaz_devkit.chartgen import assemble
from llmaz_devkit.cluster import go_tools_root

BASE_PYTHON = Path(sys.base_prefix) / "bin" / "python3"


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A minimal pure-Python wheel of distribution ``name`` with one module."""
    module = name.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files = {
        f"{module}_standin/__init__.py": f"WHO = {name!r}\n",
        f"{dist_info}/METADATA": "\n".join(
            ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
            + [f"Requires-Dist: {r}" for r in requires]
        )
        + "\n",
        f"{dist_info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    out = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as zf:
        for path, text in files.items():
            zf.writestr(path, text)
    return out


def _rendered_deployment(tmp: Path) -> dict[str, Any]:
    chart = assemble(tmp / "chart", go_tools_root().parent / "gomod", source=CHART_SOURCE)
    objects = helm_template(
        chart, tmp / "helm", sets=["operator.extraPlugins.packages[0]=llmaz-backend-standin"]
    )
    return next(d for d in objects if d.get("kind") == "Deployment" and "operator" in d["metadata"]["name"])


def _env(container: dict[str, Any], plugins: Path) -> dict[str, str]:
    return {
        e["name"]: str(e["value"]).replace("/opt/llmaz/plugins", str(plugins))
        for e in container.get("env", [])
        if "value" in e
    }


def test_a_plugin_is_installed_beside_the_images_llmaz_not_over_it(tmp_path: Path) -> None:
    pip = subprocess.run([BASE_PYTHON, "-m", "pip", "--version"], check=False, capture_output=True)
    if pip.returncode:
        pytest.fail(f"this test runs pip outside a virtualenv and needs it in {BASE_PYTHON}")
    index = tmp_path / "index"
    index.mkdir()
    _wheel(index, "llmaz", "0.1.0", [])
    _wheel(index, "llmaz-backend-standin", "0.1.0", ["llmaz>=0.1,<0.2"])
    image = tmp_path / "image-site-packages"  # the image's own llmaz
    subprocess.run(
        [
            BASE_PYTHON,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--find-links",
            index,
            "--target",
            image,
            "llmaz",
        ],
        check=True,
    )
    plugins = tmp_path / "plugins"  # the emptyDir
    plugins.mkdir()
    spec = _rendered_deployment(tmp_path)["spec"]["template"]["spec"]
    init = next(c for c in spec["initContainers"] if c["name"] == "install-plugins")
    words = [str(BASE_PYTHON) if w == "python" else w for w in init["command"] + init["args"]]
    words = [w.replace("/opt/llmaz/plugins", str(plugins)) for w in words]
    base_env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(image)}
    subprocess.run(
        [*words, "--no-index", "--find-links", str(index)],
        check=True,
        env={**base_env, **_env(init, plugins), "HOME": str(tmp_path)},
    )
    installed = {p.name for p in plugins.rglob("*.dist-info")}
    assert any(n.startswith("llmaz_backend_standin-") for n in installed), installed
    assert not any(n.startswith("llmaz-") for n in installed), f"llmaz installed again: {installed}"
    # the operator container, with its env, sees the plugin and the image's llmaz
    operator = next(c for c in spec["containers"] if c["name"] == "operator")
    probe = (
        "import importlib.metadata as m, llmaz_standin as l, llmaz_backend_standin_standin as p;"
        "print(m.version('llmaz-backend-standin'), l.__file__)"
    )
    seen = subprocess.run(
        [BASE_PYTHON, "-c", probe],
        check=True,
        capture_output=True,
        text=True,
        env={**base_env, **_env(operator, plugins), "HOME": str(tmp_path)},
    ).stdout.split()
    assert seen[0] == "0.1.0"
    assert seen[1].startswith(str(image))
