"""The operator: the only layer of llmaz that talks to a cluster.

Importing this package needs nothing beyond core: :mod:`llmaz.operator.config` is pure pydantic and
is shared with the Helm chart's values schema. The kopf handlers and the Kubernetes client live in
submodules that need the ``operator`` extra (``pip install 'llmaz[operator]'``).
"""
