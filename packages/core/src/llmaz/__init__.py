"""llmaz: serve large language models on Kubernetes.

Public surface: :mod:`llmaz.api` (typed models of the four kinds), :mod:`llmaz.plugins` (plugin SDK),
:mod:`llmaz.render` (pure renderer) and the ``llmaz`` command line. Every error llmaz raises on
purpose is a :class:`LlmazError`.
"""

from llmaz.errors import LlmazError

__version__ = "0.1.0"

__all__ = ["LlmazError", "__version__"]
