"""``llmaz karpenter ...``: mounted through the ``llmaz_register_commands`` hook (plugin.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from llmaz.api import OpenModel, kind_for
from llmaz.cli.render import exit_with_errors, read_inputs
from llmaz.render import RenderError, parse_document
from llmaz_autoscaler_karpenter.hints import CAPACITY_TYPES, split_values
from llmaz_autoscaler_karpenter.nodepools import NodeClassRef, nodepools_for_model

app = typer.Typer(name="karpenter", help="Karpenter helpers.", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Karpenter helpers."""


@app.command("nodepools")
def nodepools(  # noqa: PLR0917 (typer options are parameters)
    file: Annotated[
        Path, typer.Option("-f", "--file", help="YAML with one or more OpenModels ('-': stdin).")
    ],
    node_class: Annotated[str, typer.Option(help="Name of the node class every NodePool uses.")] = "default",
    node_class_kind: Annotated[str, typer.Option(help="Kind of the node class.")] = "EC2NodeClass",
    node_class_group: Annotated[str, typer.Option(help="API group of the node class.")] = "karpenter.k8s.aws",
    capacity_type: Annotated[
        str, typer.Option(help="Capacity types for flavors without a CAPACITY-TYPE param (comma list).")
    ] = "on-demand",
    gpu_taint: Annotated[bool, typer.Option(help="Taint GPU nodes with nvidia.com/gpu:NoSchedule.")] = False,
) -> None:
    """Print Karpenter NodePools (karpenter.sh/v1), one per flavor of each OpenModel in FILE."""
    capacity = tuple(split_values(capacity_type))
    if any(c not in CAPACITY_TYPES for c in capacity):
        typer.echo(f"error: --capacity-type must be among {', '.join(CAPACITY_TYPES)}", err=True)
        raise typer.Exit(2)
    # read and reported as by 'llmaz render': '<file>: <reason>' or '<file>: <kind>/<name>: ...', exit 1
    sourced = read_inputs([str(file)])
    models: list[OpenModel] = []
    errors: list[RenderError] = []
    for _, doc in sourced:
        if not doc or kind_for(str(doc.get("apiVersion", "")), str(doc.get("kind", ""))) is not OpenModel:
            continue  # only the models matter here; 'llmaz render' checks the rest
        try:
            parsed = parse_document(doc)
        except RenderError as err:
            errors.append(err)
            continue
        if isinstance(parsed, OpenModel):
            models.append(parsed)
    if errors:
        exit_with_errors(sourced, errors)
    if not models:
        typer.echo(f"{sourced[0][0]}: no OpenModel in this input", err=True)
        raise typer.Exit(1)
    ref = NodeClassRef(name=node_class, kind=node_class_kind, group=node_class_group)
    pools = []
    try:
        for model in models:
            found = nodepools_for_model(
                model, node_class=ref, default_capacity_types=capacity, gpu_taint=gpu_taint
            )
            if not found:
                typer.echo(f"warning: OpenModel {model.name} has no flavors; no NodePool", err=True)
            pools += found
    except ValueError as exc:  # a flavor param Karpenter does not know: an input error, as in render
        typer.echo(f"{sourced[0][0]}: OpenModel/{model.name}: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(yaml.safe_dump_all(pools, sort_keys=False), nl=False)
