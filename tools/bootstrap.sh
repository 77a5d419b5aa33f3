#!/usr/bin/env bash
# Install what the repo needs on a fresh machine: a pinned uv (from PyPI, into a private venv), then the
# workspace environment (.venv) from uv.lock. Prints the path of the uv binary. Safe to call every time.
set -euo pipefail
UV_VERSION=0.13.8
here=$(cd "$(dirname "$0")/.." && pwd)
boot=${LLMAZ_BOOTSTRAP_DIR:-$HOME/.cache/llmaz/bootstrap-uv-$UV_VERSION}
if [[ ! -x $boot/bin/uv ]]; then
  python3 -m venv "$boot" >&2
  "$boot/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION" >&2
fi
UV=$boot/bin/uv
cd "$here"
"$UV" sync --quiet --locked --all-packages --all-extras >&2
echo "$UV"
