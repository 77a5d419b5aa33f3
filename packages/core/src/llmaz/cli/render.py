"""``llmaz render``: print every object the operator would create for some manifests, offline.

Like ``helm template`` for models: OpenModels and BackendRuntimes are read from the given files,
BackendRuntimes also from the installed backend plugins; nothing talks to a cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from llmaz.render import (
    DEFAULT_MODEL_LOADER_IMAGE,
    InvalidManifest,
    PluginSource,
    RenderError,
    RenderErrors,
    render_manifests,
)

__all__ = ["dump_yaml_stream", "load_documents", "render"]


class _NoAliasDumper(yaml.SafeDumper):
    """Plain YAML: never ``&id001`` anchors, whatever objects share."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_NoAliasDumper.add_representer(str, _str_presenter)


def dump_yaml_stream(objects: list[dict[str, Any]]) -> str:
    """A ``---``-separated YAML stream, keys in render order."""
    return yaml.dump_all(objects, Dumper=_NoAliasDumper, sort_keys=False, explicit_start=True)


class _InputError(Exception):
    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")


def load_documents(source: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Documents of one file (``-`` = stdin) as ``(source, document)`` pairs."""
    name = "<stdin>" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise _InputError(name, exc.strerror or str(exc)) from None
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise _InputError(name, f"invalid YAML: {exc}") from None
    for doc in docs:
        if doc is not None and not isinstance(doc, dict):
            raise _InputError(name, f"a document is a {type(doc).__name__}, not a mapping")
        yield name, doc


def _plugins() -> PluginSource:
    from llmaz.plugins.manager import PluginManager

    manager = PluginManager.from_environment()
    for error in manager.errors:
        typer.echo(f"warning: {error}", err=True)
    return manager


def _error_lines(source: str, err: RenderError) -> list[str]:
    owner = f"{err.kind}/{err.name}: " if err.kind and err.name else ""
    problems = err.problems if isinstance(err, InvalidManifest) else [(err.field, err.reason)]
    return [f"{source}: {owner}{field}: {reason}" for field, reason in problems]


def render(
    files: Annotated[
        list[str],
        typer.Option("-f", "--filename", help="Manifest file to render; '-' reads stdin. Repeatable."),
    ],
    model_loader_image: Annotated[
        str, typer.Option(help="Image of the model-loader init containers.")
    ] = DEFAULT_MODEL_LOADER_IMAGE,
    no_plugins: Annotated[
        bool, typer.Option("--no-plugins", help="Do not resolve BackendRuntimes from installed plugins.")
    ] = False,
) -> None:
    """Print every object llmaz would create for the given manifests, as a YAML stream."""
    try:
        sourced = [pair for f in files for pair in load_documents(f)]
    except _InputError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    plugins = None if no_plugins else _plugins()
    # Render per object so an error names the file it came from; models and runtimes are shared.
    documents = [doc for _, doc in sourced]
    try:
        objects = render_manifests(documents, plugins=plugins, model_loader_image=model_loader_image)
    except RenderError as err:
        for each in err.errors if isinstance(err, RenderErrors) else [err]:
            for line in _error_lines(_source_of(sourced, each), each):
                typer.echo(line, err=True)
        raise typer.Exit(1) from None
    sys.stdout.write(dump_yaml_stream(objects))


def _source_of(sourced: list[tuple[str, dict[str, Any] | None]], err: RenderError) -> str:
    for source, doc in sourced:
        if not doc:
            continue
        meta = doc.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if doc.get("kind") == err.kind and name == err.name:
            return source
    return sourced[0][0] if len(sourced) == 1 or all(s == sourced[0][0] for s, _ in sourced) else "<input>"
