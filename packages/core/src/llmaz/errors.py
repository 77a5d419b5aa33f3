"""The root of every error llmaz raises on purpose: ``except LlmazError`` catches them all.

Typed errors sit under it where they are raised: :class:`llmaz.render.RenderError` and its
subclasses (one per status-condition reason), :class:`llmaz.plugins.RegistrationError`,
:class:`llmaz.plugins.PluginLoadError`. Bugs (``TypeError``, ``KeyError``...) and pydantic's
``ValidationError`` for invalid input to the models are not wrapped.
"""

from __future__ import annotations

__all__ = ["LlmazError"]


class LlmazError(Exception):
    """Base of every exception llmaz defines."""
