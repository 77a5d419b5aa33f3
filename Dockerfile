# syntax=docker/dockerfile:1
# The one llmaz image: `llmaz operator run` (the chart's Deployment) and `llmaz load-model` (the
# model-loader init container the operator adds to inference pods). Dependencies are installed from
# uv.lock with hashes; the workspace packages (core + built-in backends and autoscalers) are built
# from this checkout. Runs as the numeric non-root user 65532 so Pod Security "restricted" holds.
#
# Built and pushed by .github/workflows/release.yaml; no image is built in this repository's tests.
# The base is pinned by digest; refresh the digest (and only the digest) when updating the base.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm@sha256:782412e85d0f0984994c290652577d4018aff08145c85b262bb63dc0c7522254

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN pip install "uv==0.13.8"
COPY pyproject.toml uv.lock ./
COPY packages ./packages
# llmaz's own dependencies with the extras the image runs: operator (llmaz operator run) and loader
# (llmaz load-model, the init container); the plugins need nothing but llmaz, and the devkit's test
# tools stay out
RUN uv export --frozen --no-dev --package llmaz --extra operator --extra loader --no-emit-workspace \
        --no-header -o /src/requirements.txt \
    && pip wheel --no-deps --wheel-dir /wheels packages/core packages/backends/* packages/autoscaling/*

FROM ${PYTHON_IMAGE}
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /src/requirements.txt /tmp/requirements.txt
COPY --from=build /wheels /tmp/wheels
RUN pip install --require-hashes -r /tmp/requirements.txt \
    && pip install --no-deps /tmp/wheels/*.whl \
    && rm -rf /tmp/requirements.txt /tmp/wheels \
    && llmaz --help >/dev/null \
    && python -c "import llmaz.operator.main, llmaz.loader.huggingface, llmaz.loader.modelscope, llmaz.loader.objstore"
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["llmaz"]
CMD ["operator", "run"]
