"""The one place that finds the repository checkout (the devkit only works from one)."""

from __future__ import annotations

from pathlib import Path

from llmaz.errors import LlmazError

__all__ = ["RepositoryNotFound", "repo_root"]

MARKER = Path("tools") / "go-tools.sh"
"""A file only the llmaz repository has at its root."""


class RepositoryNotFound(LlmazError, RuntimeError):
    """Not running from a checkout of the llmaz repository."""


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
