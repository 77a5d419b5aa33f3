"""``llmaz load-model``: the model loader, run as the ``model-loader`` init container."""

from __future__ import annotations

import typer

from llmaz.plugins.registry import CommandRegistry


def load_model() -> None:
    """Download the model the environment describes (MODEL_SOURCE_TYPE, MODEL_ID, ...) into MODEL_LOCAL_PATH.

    The renderer sets the environment; see the "Model loader" docs page for every variable.
    On failure the one-line cause goes to the termination log and the exit status is 1.
    """
    from llmaz.loader.main import main

    raise typer.Exit(main())


def llmaz_register_commands(register: CommandRegistry) -> None:
    register.add("load-model", load_model)
