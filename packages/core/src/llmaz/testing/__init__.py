"""llmaz.testing: the public test kit.

* :mod:`llmaz.testing.conformance`: ``BackendConformanceTests`` and ``AutoscalerConformanceTests``,
  base classes every plugin package's tests subclass.
* :mod:`llmaz.testing.plugins`: a fresh plugin manager with autoload off holding given plugins
  (``make_plugin_manager``, fixture ``plugin_manager_factory``).

Install with ``pip install 'llmaz[testing]'`` (pytest). The repository's own control-plane harness and
e2e fixtures are not here: they live in the unpublished ``llmaz-devkit`` workspace package.

Submodules are imported on demand so that importing this package costs nothing.
"""
