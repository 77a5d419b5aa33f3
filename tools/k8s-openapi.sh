#!/usr/bin/env bash
# Print the path of the Kubernetes OpenAPI (swagger.json) of the pinned version, fetching the
# k8s.io/kubernetes module from the Go module proxy into the shared cache on first use.
# crdgen reads embedded-type schemas (PodTemplateSpec, EnvVar, Probe, HPA MetricSpec...) from it;
# nothing from it is committed except the CRDs generated from our own models.
set -euo pipefail
K8S_V=$(sed -n "s/^K8S_V=\([^ ]*\).*/\1/p" "$(dirname "$0")/go-tools.sh")  # one home for the pin
ROOT=${GO_TOOLS_CACHE:-$HOME/.cache/llmaz/go-tools}
out=$ROOT/k8s-openapi-$K8S_V.json
if [[ ! -s $out ]]; then
  command -v go >/dev/null || { echo "go toolchain missing: install Go >= 1.26" >&2; exit 3; }
  export GOMODCACHE=$ROOT/gomod GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}
  mkdir -p "$ROOT"
  dir=$(cd "$ROOT" && go mod download -json "k8s.io/kubernetes@$K8S_V" | jq -r .Dir)
  install -m644 "$dir/api/openapi-spec/swagger.json" "$out.tmp"
  mv "$out.tmp" "$out"
fi
echo "$out"
