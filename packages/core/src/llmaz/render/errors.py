"""Typed render errors: every failure names the field at fault and says why in plain words."""

from __future__ import annotations

from collections.abc import Iterable

from llmaz.errors import LlmazError


def known_names(what: str, names: Iterable[str], limit: int = 20) -> str:
    """``known OpenModels: a, b`` (sorted, at most ``limit``) or ``there are no OpenModels``.

    Errors about an unknown name say what exists, so a typo is obvious from the message alone.
    """
    ordered = sorted(set(names))
    if not ordered:
        return f"there are no {what}"
    shown = ", ".join(ordered[:limit])
    more = f" (+{len(ordered) - limit} more)" if len(ordered) > limit else ""
    return f"known {what}: {shown}{more}"


class RenderError(LlmazError):
    """Base of every error raised by :mod:`llmaz.render`.

    :param field: path of the offending field in the owner object, e.g. ``spec.modelClaim.modelName``.
    :param reason: what is wrong, in a sentence a user can act on.
    ``kind`` and ``name`` identify the owner object (a Playground or Service); :func:`render_manifests`
    fills them in when they are not known where the error is raised.
    """

    condition_reason = "RenderError"
    """CamelCase reason for a status condition."""

    def __init__(self, field: str, reason: str, *, kind: str | None = None, name: str | None = None) -> None:
        super().__init__(field, reason)
        self.field = field
        self.reason = reason
        self.kind = kind
        self.name = name

    @property
    def owner(self) -> str:
        """``<kind>/<name>``; just ``<kind>`` for an object without a name; ``""`` when unknown."""
        if self.kind and self.name:
            return f"{self.kind}/{self.name}"
        return self.kind or ""

    def where(self) -> str:
        """``<kind>/<name>: <field>`` (the parts that are known)."""
        owner = f"{self.owner}: " if self.owner else ""
        return f"{owner}{self.field}" if self.field else owner.rstrip(": ")

    def __str__(self) -> str:
        where = self.where()
        return f"{where}: {self.reason}" if where else self.reason


class InvalidManifest(RenderError):
    """A document is not a valid object of its kind (schema validation failed)."""

    condition_reason = "InvalidSpec"

    def __init__(
        self,
        field: str,
        reason: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        problems: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(field, reason, kind=kind, name=name)
        self.problems: list[tuple[str, str]] = problems or [(field, reason)]
        """Every (field, reason) pair found, the first one being ``(field, reason)``."""


class ModelNotFound(RenderError):
    """A claimed OpenModel does not exist."""

    condition_reason = "ModelNotFound"


class BackendRuntimeNotFound(RenderError):
    """The BackendRuntime named by ``backendRuntimeConfig.backendName`` does not exist."""

    condition_reason = "BackendRuntimeNotFound"


class ConfigNotFound(RenderError):
    """The recommended config (explicit or inferred) is not in the BackendRuntime."""

    condition_reason = "ConfigNotFound"


class UnknownTemplateVariable(RenderError):
    """An argument uses a ``{{ .Var }}`` that is unknown or has no value."""

    condition_reason = "UnknownTemplateVariable"

    def __init__(self, field: str, reason: str, *, variable: str, config: str) -> None:
        super().__init__(field, reason)
        self.variable = variable
        self.config = config


class FlavorNotFound(RenderError):
    """A claimed or selected flavor is not one of the main model's flavors."""

    condition_reason = "FlavorNotFound"


class InvalidFlavor(RenderError):
    """A flavor param render needs (``NODES``, ``PP``...) has an unusable value."""

    condition_reason = "InvalidFlavor"


class MultiHostUnsupported(RenderError):
    """The selected flavor needs several nodes but the backend has no multi-host recipe."""

    condition_reason = "MultiHostUnsupported"


class InvalidModelClaims(RenderError):
    """The claimed models do not have exactly one main model (and at most one draft)."""

    condition_reason = "InvalidModelClaims"


class InvalidModelSource(RenderError):
    """An OpenModel source cannot be used (unknown URI protocol, malformed address)."""

    condition_reason = "InvalidModelSource"


class InvalidResources(RenderError):
    """After merging, a resource limit is below its request (Kubernetes would reject every pod)."""

    condition_reason = "InvalidResources"


class InvalidWorkloadTemplate(RenderError):
    """An inference Service pod template lacks what llmaz needs (the ``model-runner`` container)."""

    condition_reason = "InvalidWorkloadTemplate"


class RenderErrors(RenderError):
    """Several objects of one manifest stream failed; :attr:`errors` lists each of them.

    It is itself the first error (same ``field``, ``reason``, ``kind``, ``name``), so code that
    handles a single :class:`RenderError` keeps working; tools that report to users should list
    :attr:`errors` so one run shows every problem.
    """

    def __init__(self, errors: list[RenderError]) -> None:
        if not errors:
            raise ValueError("RenderErrors needs at least one error")
        first = errors[0]
        super().__init__(first.field, first.reason, kind=first.kind, name=first.name)
        self.errors = errors
        self.condition_reason = first.condition_reason

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


__all__ = [
    "BackendRuntimeNotFound",
    "ConfigNotFound",
    "FlavorNotFound",
    "InvalidFlavor",
    "InvalidManifest",
    "InvalidModelClaims",
    "InvalidModelSource",
    "InvalidResources",
    "InvalidWorkloadTemplate",
    "ModelNotFound",
    "MultiHostUnsupported",
    "RenderError",
    "RenderErrors",
    "UnknownTemplateVariable",
    "known_names",
]
