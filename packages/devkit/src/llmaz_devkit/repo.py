"""The one place that finds the repository checkout (the devkit only works from one), and the uv
its bootstrap installs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from llmaz.errors import LlmazError

__all__ = ["RepositoryNotFound", "UvNotFound", "chart_dependency_version", "repo_root", "uv_binary"]

MARKER = Path("tools") / "go-tools.sh"
"""A file only the llmaz repository has at its root."""


class RepositoryNotFound(LlmazError, RuntimeError):
    """Not running from a checkout of the llmaz repository."""


class UvNotFound(LlmazError, RuntimeError):
    """No ``uv`` on ``PATH`` and none installed by ``tools/bootstrap.sh``."""


def repo_root(start: Path | None = None) -> Path:
    """The checkout holding ``start`` (default: this package's source, then the working directory)."""
    starts = [start] if start is not None else [Path(__file__).resolve(), Path.cwd()]
    for origin in starts:
        for candidate in (origin, *origin.parents):
            if (candidate / MARKER).is_file():
                return candidate
    raise RepositoryNotFound(
        f"no llmaz repository checkout (a directory with {MARKER}) above {', '.join(map(str, starts))}: "
        "the devkit runs from a clone of the repository"
    )


def chart_dependency_version(name: str, chart: Path | None = None) -> str:
    """The version the llmaz chart's Chart.yaml (or ``chart``'s) pins for its dependency ``name``:
    the one home of that pin, read by the chart assembly and the schema checks alike."""
    import yaml

    meta = yaml.safe_load(((chart or repo_root() / "charts" / "llmaz") / "Chart.yaml").read_text())
    for dep in meta.get("dependencies") or []:
        if dep.get("name") == name:
            return str(dep["version"])
    raise KeyError(f"the chart has no dependency {name!r}")


def uv_binary() -> str:
    """The ``uv`` to build wheels and environments with: the one on ``PATH``, else the pinned one
    ``tools/bootstrap.sh`` installed (``$LLMAZ_BOOTSTRAP_DIR``, default
    ``~/.cache/llmaz/bootstrap-uv-<version>``; the last by name there)."""
    found = shutil.which("uv")
    if found:
        return found
    boot = os.environ.get("LLMAZ_BOOTSTRAP_DIR")
    candidates = [Path(boot) / "bin" / "uv"] if boot else []
    candidates += sorted((Path.home() / ".cache" / "llmaz").glob("bootstrap-uv-*/bin/uv"), reverse=True)
    for candidate in candidates:
        if candidate.is_file():
            return str(candidate)
    raise UvNotFound("uv not found: run tools/bootstrap.sh (it installs the pinned uv)")
