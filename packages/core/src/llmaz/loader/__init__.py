"""The model loader: ``llmaz load-model``, run as the ``model-loader`` init container.

It reads the environment the renderer gives the init container (:mod:`llmaz.loader.layout`),
downloads the weights to ``MODEL_LOCAL_PATH`` with retries, resume, verification and a completion
marker, and on failure writes a one-line cause to the container's termination log.

Importing this package is cheap: the sources (``huggingface_hub``, ``obstore``, ``modelscope``, the
``loader`` extra) are imported only by the modules that use them.
"""
