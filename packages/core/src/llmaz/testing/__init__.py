"""llmaz.testing: the public test kit.

* :mod:`llmaz.testing.conformance`: ``BackendConformanceTests`` and ``AutoscalerConformanceTests``,
  base classes every plugin package's tests subclass.
* :mod:`llmaz.testing.plugins`: a fresh plugin manager with autoload off holding given plugins
  (``make_plugin_manager``, fixture ``plugin_manager_factory``).
* :mod:`llmaz.testing.cluster` / :mod:`llmaz.testing.pytest_plugin`: a real control plane for e2e tests.

Submodules are imported on demand so that importing this package costs nothing.
"""
