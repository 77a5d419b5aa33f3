"""The ``llmaz`` command line.

Each command group lives in its own module and is registered here, so features stay independent.
"""

from __future__ import annotations

import typer

app = typer.Typer(
    name="llmaz",
    help="Serve large language models on Kubernetes.",
    no_args_is_help=True,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """Serve large language models on Kubernetes."""


@app.command()
def version() -> None:
    """Print the llmaz version."""
    from llmaz import __version__

    typer.echo(__version__)


def _register() -> None:
    """Attach every command module. Keep one line per module."""
    # command modules register themselves below (one import each)
    import llmaz.cli.crds  # noqa: F401
    from llmaz.cli.demo import demo

    app.command()(demo)
    from llmaz.cli.render import render

    app.command("render")(render)
    from llmaz.cli.load_model import load_model

    app.command("load-model")(load_model)
    from llmaz.cli import plugins as _plugins

    _plugins.register(app)


def main() -> None:
    _register()
    app()
