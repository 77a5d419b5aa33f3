"""``llmaz render``: print every object the operator would create for some manifests, offline.

Like ``helm template`` for models: OpenModels and BackendRuntimes are read from the given files,
BackendRuntimes also from the installed backend plugins; nothing talks to a cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
import yaml

from llmaz import yamlfmt
from llmaz.api import KINDS, kind_for
from llmaz.errors import LlmazError
from llmaz.plugins.registry import CommandRegistry
from llmaz.render import (
    DEFAULT_MODEL_LOADER_IMAGE,
    InvalidManifest,
    PluginSource,
    RenderError,
    RenderErrors,
    RenderWarning,
    render_manifests,
)

__all__ = ["InputError", "dump_yaml_stream", "exit_with_errors", "load_documents", "read_inputs", "render"]


def dump_yaml_stream(objects: list[dict[str, Any]]) -> str:
    """A ``---``-separated YAML stream, keys in render order."""
    return yamlfmt.dump_all(objects)


class InputError(LlmazError):
    """A file that cannot be read as manifests; its message starts with the file's name."""

    def __init__(self, source: str, message: str) -> None:
        super().__init__(f"{source}: {message}")


def _yaml_error(name: str, exc: yaml.YAMLError) -> InputError:
    """``<file>:<line>:<column>: invalid YAML: <problem>``, never PyYAML's ``"<unicode string>"``."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "syntax error"
        return InputError(f"{name}:{mark.line + 1}:{mark.column + 1}", f"invalid YAML: {problem}")
    return InputError(name, f"invalid YAML: {exc}")


def _llmaz_groups() -> set[str]:
    return {cls.api_version_string().split("/")[0] for cls in KINDS}


def load_documents(source: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """Documents of one file (``-`` = stdin) as ``(source, document)`` pairs.

    :raises InputError: the file cannot be read, is not YAML, holds no document, holds a document
        with a kind of an llmaz API group that does not exist (a typo), or holds no llmaz kind at all.
        Documents of other APIs next to llmaz ones (a Gateway in an example) are skipped.
    """
    name = "<stdin>" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(name, exc.strerror or str(exc)) from None
    try:
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise _yaml_error(name, exc) from None
    if not docs:
        raise InputError(name, "no manifests in this input")
    foreign: list[str] = []
    for number, doc in enumerate(docs, start=1):
        if not isinstance(doc, dict):
            raise InputError(name, f"document {number} is a {type(doc).__name__}, not a mapping")
        api_version, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        if kind_for(api_version, kind) is None:
            if api_version.split("/", maxsplit=1)[0] in _llmaz_groups() or not kind:
                raise InputError(name, f"document {number}: {_not_llmaz(api_version, kind)}")
            foreign.append(f"document {number}: {_not_llmaz(api_version, kind)}")
    if len(foreign) == len(docs):
        raise InputError(name, "; ".join(foreign))
    yield from ((name, doc) for doc in docs)


def read_inputs(files: Iterable[str]) -> list[tuple[str, dict[str, Any] | None]]:
    """The documents of every file, for a command: on an :class:`InputError` print it on stderr
    and exit 1 (``llmaz render`` and the plugins' commands that read manifests share this)."""
    try:
        return [pair for f in files for pair in load_documents(f)]
    except InputError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None


def exit_with_errors(
    sourced: list[tuple[str, dict[str, Any] | None]], errors: Iterable[RenderError]
) -> NoReturn:
    """Print each error as ``<file>: <kind>/<name>: <field>: <reason>`` on stderr and exit 1."""
    for err in errors:
        for each in err.errors if isinstance(err, RenderErrors) else [err]:
            for line in _error_lines(_source_of(sourced, each.kind, each.name), each):
                typer.echo(line, err=True)
    raise typer.Exit(1)


def _not_llmaz(api_version: str, kind: str) -> str:
    known = ", ".join(f"{cls.api_version_string()} {cls.kind_name()}" for cls in KINDS)
    what = f"{api_version or '(no apiVersion)'} {kind or '(no kind)'}"
    return f"{what} is not an llmaz kind (llmaz renders {known})"


def _plugins() -> PluginSource:
    from llmaz.cli.plugins import NO_BACKEND_HINT
    from llmaz.plugins.manager import PluginManager

    manager = PluginManager.from_environment()
    for error in manager.errors:
        typer.echo(f"warning: {error}", err=True)
    if not manager.backends:
        typer.echo(f"note: {NO_BACKEND_HINT}", err=True)
    return manager


def _error_lines(source: str, err: RenderError) -> list[str]:
    owner = f"{err.owner}: " if err.owner else ""
    problems = err.problems if isinstance(err, InvalidManifest) else [(err.field, err.reason)]
    return [f"{source}: {owner}{field}: {reason}" for field, reason in problems]


def render(
    files: Annotated[
        list[str],
        typer.Option("-f", "--filename", help="Manifest file to render; '-' reads stdin. Repeatable."),
    ],
    model_loader_image: Annotated[
        str | None,
        typer.Option(
            # No [brackets]: the help is rich markup, where "[default: ...]" reads as a tag and vanishes.
            help="Image of the model-loader init containers. Default: modelLoader.image of --config, "
            f"else {DEFAULT_MODEL_LOADER_IMAGE}.",
            show_default=False,
        ),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="The operator's config file (as given to 'llmaz operator run --config'); its "
            "modelLoader settings (image, sharedCache) and schedulerName apply, as in the operator, "
            "and the objects of the integrations it switches on are printed too.",
            dir_okay=False,
        ),
    ] = None,
    no_plugins: Annotated[
        bool, typer.Option("--no-plugins", help="Do not resolve BackendRuntimes from installed plugins.")
    ] = False,
) -> None:
    """Print every object llmaz would create for the given manifests, as a YAML stream."""
    from llmaz.operator.config import ConfigError, load_config

    try:
        settings = load_config(config)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    loader = settings.model_loader
    sourced = read_inputs(files)
    plugins = None if no_plugins else _plugins()
    # Render per object so an error names the file it came from; models and runtimes are shared.
    documents = [doc for _, doc in sourced]
    warnings: list[RenderWarning] = []
    try:
        objects = render_manifests(
            documents,
            plugins=plugins,
            model_loader_image=model_loader_image or loader.image or DEFAULT_MODEL_LOADER_IMAGE,
            model_cache=loader.shared_cache,
            scheduler_name=settings.scheduler_name or None,
            warnings=warnings,
            integrations=settings.integrations.render_options() if settings.integrations.any_on else None,
        )
    except RenderError as err:
        _print_warnings(sourced, warnings)
        exit_with_errors(sourced, [err])
    _print_warnings(sourced, warnings)
    sys.stdout.write(dump_yaml_stream(objects))


def _print_warnings(sourced: list[tuple[str, dict[str, Any] | None]], warnings: list[RenderWarning]) -> None:
    """What the operator would report in the object's status, e.g. an HPA that cannot be created."""
    for w in warnings:
        source = _source_of(sourced, w.kind, w.name)
        typer.echo(f"warning: {source}: {w.kind}/{w.name}: {w.reason}: {w.message}", err=True)


def _source_of(sourced: list[tuple[str, dict[str, Any] | None]], kind: str | None, name: str | None) -> str:
    for source, doc in sourced:
        if not doc:
            continue
        meta = doc.get("metadata")
        doc_name = (meta.get("name") or None) if isinstance(meta, dict) else None
        if doc.get("kind") == kind and doc_name == name:
            return source
    return sourced[0][0] if len(sourced) == 1 or all(s == sourced[0][0] for s, _ in sourced) else "<input>"


def llmaz_register_commands(register: CommandRegistry) -> None:
    register.add("render", render)
