"""The image's dependency set, from the Dockerfile's own ``uv export`` line run against uv.lock.

No image is built here (no container engine), so the recipe is checked where it can go wrong
without one: the export the Dockerfile installs with ``--require-hashes`` must hold every
distribution of the llmaz extras the image runs (``operator`` for the Deployment, ``loader`` for the
init container the operator adds to every inference pod, with the same image) and none of the
devkit's test tools.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tomllib

from llmaz_devkit.repo import repo_root, uv_binary

ROOT = repo_root()


def _export_line() -> list[str]:
    text = (ROOT / "Dockerfile").read_text()
    joined = re.sub(r"\\\n\s*", " ", text)
    match = re.search(r"RUN (uv export [^&]*)", joined)
    assert match, "the Dockerfile has no 'RUN uv export' line"
    return shlex.split(match.group(1))


def _names(requirements: str) -> set[str]:
    return {
        re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0].lower().replace("_", "-")
        for line in requirements.splitlines()
        if line and line[0].isalnum()
    }


def _extra(name: str) -> set[str]:
    core = tomllib.loads((ROOT / "packages" / "core" / "pyproject.toml").read_text())
    deps = core["project"]["optional-dependencies"][name]
    return {re.split(r"[=<>!~\[; ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}


def test_the_image_gets_the_operator_and_the_loader_dependencies_and_no_test_tools() -> None:
    words = _export_line()
    words = [w for w in words if w not in ("-o", "/src/requirements.txt")]
    out = subprocess.run(
        [uv_binary(), *words[1:]], cwd=ROOT, check=True, capture_output=True, text=True, timeout=120
    ).stdout
    exported = _names(out)
    for extra in ("operator", "loader"):
        missing = sorted(_extra(extra) - exported)
        assert not missing, f"the image lacks llmaz[{extra}]'s {missing}"
    assert not exported & {"pytest", "jsonschema", "iniconfig"}, "the devkit's test tools are in the image"
