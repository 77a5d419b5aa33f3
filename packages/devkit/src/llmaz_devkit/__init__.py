"""llmaz-devkit: the repository's own development tools, never published.

* :mod:`llmaz_devkit.cluster`: a real control plane (etcd, kube-apiserver, KCM, scheduler, KWOK GPU
  nodes, the LeaderWorkerSet controller) from the Go tools ``tools/go-tools.sh`` builds.
* :mod:`llmaz_devkit.pytest_plugin`: the ``apiserver`` and ``control_plane`` fixtures (e2e tests load
  it with ``pytest_plugins``).
* :mod:`llmaz_devkit.schemas`: fetchers of the pinned Kubernetes OpenAPI and LWS CRD, and validation
  of rendered objects against them.
* :mod:`llmaz_devkit.demo`: ``llmaz demo``, mounted on the ``llmaz`` command through the
  ``llmaz_register_commands`` plugin hook (:mod:`llmaz_devkit.plugin`).
* :mod:`llmaz_devkit.repo`: where the checkout is.

Everything here needs a checkout of the repository (scripts under ``tools/``, ``docs/examples``,
the chart), which is why it is not part of the published ``llmaz`` wheel.
"""
