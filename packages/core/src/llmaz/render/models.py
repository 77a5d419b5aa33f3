"""Resolve model claims against the available OpenModels (main model first)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmaz.api import Flavor, ModelClaim, ModelClaims, ModelRef, OpenModel
from llmaz.render.errors import InvalidModelClaims, ModelNotFound, known_names
from llmaz.render.flavors import claimed_flavors
from llmaz.render.sources import ResolvedSource, resolve_source

Models = Mapping[str, OpenModel] | Sequence[OpenModel]
"""OpenModels by name, or a plain list of them."""


def models_by_name(models: Models) -> dict[str, OpenModel]:
    if isinstance(models, Mapping):
        return dict(models)
    return {m.name: m for m in models}


@dataclass(frozen=True)
class Claimed:
    """The models an object claims, resolved; ``sources[0]`` is the main model."""

    refs: tuple[ModelRef, ...]
    """Claimed refs with the main model moved first."""
    sources: tuple[ResolvedSource, ...]
    flavors: tuple[Flavor, ...]
    """The main model's claimed flavors, priority order."""
    explicit_flavors: tuple[str, ...] | None
    flavors_field: str

    @property
    def main(self) -> ResolvedSource:
        return self.sources[0]

    @property
    def has_draft(self) -> bool:
        return len(self.sources) > 1


def resolve_claims(
    claim: ModelClaim | None,
    claims: ModelClaims | None,
    models: Models,
    *,
    prefix: str = "spec",
) -> Claimed:
    """Resolve ``modelClaim`` / ``modelClaims``; errors carry paths under ``prefix``."""
    available = models_by_name(models)
    if claim is not None and claims is not None:
        raise InvalidModelClaims(prefix, "set either modelClaim or modelClaims, not both")
    if claim is not None:
        refs = [(ModelRef(name=claim.model_name), f"{prefix}.modelClaim.modelName")]
        explicit = claim.inference_flavors
        flavors_field = f"{prefix}.modelClaim.inferenceFlavors"
    elif claims is not None:
        refs = [(ref, f"{prefix}.modelClaims.models[{i}].name") for i, ref in enumerate(claims.models)]
        explicit = claims.inference_flavors
        flavors_field = f"{prefix}.modelClaims.inferenceFlavors"
    else:
        raise InvalidModelClaims(
            f"{prefix}.modelClaims", "no model is claimed: set modelClaim or modelClaims"
        )
    mains = [r for r in refs if str(r[0].role) == "main"]
    drafts = [r for r in refs if str(r[0].role) == "draft"]
    if len(mains) != 1:
        raise InvalidModelClaims(
            f"{prefix}.modelClaims.models",
            f"exactly one model must have role main, found {len(mains)}",
        )
    if len(drafts) > 1:
        raise InvalidModelClaims(
            f"{prefix}.modelClaims.models", f"at most one model may have role draft, found {len(drafts)}"
        )
    ordered = mains + drafts
    sources = []
    for index, (ref, field) in enumerate(ordered):
        model = available.get(ref.name)
        if model is None:
            raise ModelNotFound(
                field, f"OpenModel {ref.name!r} not found; {known_names('OpenModels', available)}"
            )
        sources.append(resolve_source(model, index, field=field))
    flavors, _ = claimed_flavors(sources[0].model, explicit, field=flavors_field)
    return Claimed(
        refs=tuple(r for r, _ in ordered),
        sources=tuple(sources),
        flavors=tuple(flavors),
        explicit_flavors=tuple(explicit) if explicit else None,
        flavors_field=flavors_field,
    )
