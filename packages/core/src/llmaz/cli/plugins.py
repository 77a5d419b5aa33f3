"""``llmaz plugins ...`` and ``llmaz backends ...``: what is installed."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from llmaz import yamlfmt
from llmaz.cli.catalog import hooks_markdown, supported_engines_markdown
from llmaz.plugins import PluginManager
from llmaz.plugins.registry import CommandRegistry

NO_BACKEND_HINT = (
    "no backend plugin is installed: install one, e.g. `pip install llmaz-backend-<engine>` "
    "(see `llmaz backends table` on a full install, or the supported-engines docs page)"
)


def dump_yaml(obj: object) -> str:
    return yamlfmt.dump(obj)


plugins_app = typer.Typer(name="plugins", help="Installed llmaz plugins.", no_args_is_help=True)
backends_app = typer.Typer(name="backends", help="Inference-engine backends.", no_args_is_help=True)


@plugins_app.command("list")
def list_plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    strict: Annotated[bool, typer.Option(help="Exit 1 when a plugin failed to load.")] = False,
) -> None:
    """List plugins: name, kind, package, version, origin (builtin / third-party), status; then errors."""
    manager = PluginManager.from_environment()
    rows = [
        {
            "name": p.name,
            "kind": p.kind,
            "package": p.distribution or "-",
            "version": p.version or "-",
            "origin": p.origin,
            "status": p.status,
            "provides": ", ".join([*p.backends, *p.autoscalers, *(f"llmaz {c}" for c in p.commands)]) or "-",
        }
        for p in manager.plugins
    ]
    errors = [str(e) for e in manager.errors]
    if as_json:
        typer.echo(json.dumps({"plugins": rows, "errors": errors}, indent=2))
    else:
        columns = ["name", "kind", "package", "version", "origin", "status", "provides"]
        widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in columns}
        typer.echo("  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip())
        for row in rows:
            typer.echo("  ".join(row[c].ljust(widths[c]) for c in columns).rstrip())
        if errors:
            typer.echo("\nerrors:")
            for error in errors:
                typer.echo(f"  {error}")
    if strict and errors:
        raise typer.Exit(1)


@plugins_app.command("hooks")
def hooks_reference() -> None:
    """Print the hooks reference (docs/plugins/hooks.md) rendered from the hook specifications."""
    typer.echo(hooks_markdown(), nl=False)


@backends_app.command("show")
def show_backend(
    name: Annotated[str, typer.Argument(help="Backend name, e.g. vllm.")],
    image: Annotated[str | None, typer.Option(help="Override the image repository.")] = None,
    version: Annotated[str | None, typer.Option(help="Override the image tag.")] = None,
) -> None:
    """Print the BackendRuntime a backend plugin produces, as YAML."""
    manager = PluginManager.from_environment()
    backend = manager.get_backend(name)
    if backend is None:
        known = ", ".join(sorted(manager.backends)) or "none"
        typer.echo(f"error: no backend {name!r} (installed: {known})", err=True)
        if not manager.backends:
            typer.echo(f"  {NO_BACKEND_HINT}", err=True)
        for info in manager.plugins:
            if info.name == name and info.status != "loaded":
                typer.echo(
                    f"  plugin {name!r} is {info.status}" + (f": {info.error}" if info.error else ""),
                    err=True,
                )
        raise typer.Exit(1)
    runtime = backend.backend_runtime(image=image, version=version)
    typer.echo(dump_yaml(runtime.to_manifest()), nl=False)


@backends_app.command("list")
def list_backends() -> None:
    """List backend names with their default image."""
    manager = PluginManager.from_environment()
    if not manager.backends:
        typer.echo(NO_BACKEND_HINT, err=True)
    for name in sorted(manager.backends):
        b = manager.backends[name]
        typer.echo(f"{name}\t{b.image}:{b.version}")


@backends_app.command("table")
def backends_table(
    builtin: Annotated[bool, typer.Option("--builtin/--all", help="Only first-party plugins.")] = True,
) -> None:
    """Print the supported-engines Markdown page (docs/reference/supported-engines.md)."""
    typer.echo(supported_engines_markdown(PluginManager.from_environment(), builtin_only=builtin), nl=False)


def llmaz_register_commands(register: CommandRegistry) -> None:
    register.add("plugins", plugins_app)
    register.add("backends", backends_app)
