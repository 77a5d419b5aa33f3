#!/usr/bin/env bash
# Build (on a cache miss) and print the bin directory of every pinned Go tool the tests and the demo
# use: helm, helm-unittest, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd,
# kwok, kwokctl and the LeaderWorkerSet controller. Outputs live under a directory keyed by the
# sha256 of THIS FILE's content (pins and build steps alike) and the Go version: any edit to the
# recipe builds a new set from scratch on the next call, CI included; a warm call is instant.
#
#   tools/go-tools.sh            -> prints the bin dir on stdout (build logs and timings on stderr)
#   tools/go-tools.sh --root     -> prints the keyed output dir (bin/, manifests/, helm-plugins/)
#   tools/go-tools.sh --verify   -> like the default, and also re-runs the checks of every binary and
#                                   data file (a cold build always runs them before marking the set)
#   tools/go-tools.sh --key      -> prints the cache key only (no build)
#   tools/go-tools.sh --step NAME ARGS  -> runs one file-handling step alone (tests use it on fake
#                                   module trees): kwok-stages SRC DST | lws-manifests SRC DST |
#                                   k8s-wrapper-gomod KUBERNETES_GO_MOD
#
# Safe to call every time: a warm call only tests <key>/.complete; concurrent callers serialise on a
# lock per key; a build that fails leaves no .complete, so the next call builds again.
# Exit codes: 0 ok, 1 build or check failed, 2 bad argument, 3 no `go` on PATH (the Python harness
# turns 3 into a "install Go" message).
#
# Env: GO_TOOLS_CACHE (default ~/.cache/llmaz/go-tools), GO_TOOLS_KEEP_CACHE=1 keeps GOCACHE.
set -euo pipefail
HELM_V=v4.2.4
UNTT_V=v1.1.2   # v1.1.0 is not served by proxy.golang.org (403); v1.1.2 is
KWOK_V=v0.8.0
LWS_V=v0.9.0    # v0.10.x is not served by proxy.golang.org (403); v0.9.0 uses k8s libs v0.36.2
K8S_V=v1.36.3
SELF=$(readlink -f "${BASH_SOURCE[0]}")

# ---- file-handling steps (pure shell, testable on their own with --step) ----
# KWOK's stage files: node/fast, pod/fast and node/heartbeat-with-lease, flattened into one directory.
# Each source directory holds its own kustomization.yaml, which is skipped; two different files with
# one name would be a silent overwrite, so that fails instead.
kwok_stages() {
  local src=$1 dst=$2 sub f name n=0
  mkdir -p "$dst"
  for sub in node/fast pod/fast node/heartbeat-with-lease; do
    [[ -d $src/kustomize/stage/$sub ]] || { echo "[go-tools] KWOK stage directory missing: $src/kustomize/stage/$sub" >&2; return 1; }
    for f in "$src/kustomize/stage/$sub"/*.yaml; do
      [[ -e $f ]] || continue
      name=$(basename "$f")
      [[ $name == kustomization.yaml ]] && continue
      if [[ -e $dst/$name ]] && ! cmp -s "$f" "$dst/$name"; then
        echo "[go-tools] two KWOK stage files named $name ($sub and an earlier directory)" >&2; return 1
      fi
      install -m644 "$f" "$dst/$name"; n=$((n+1))
    done
  done
  (( n > 0 )) || { echo "[go-tools] no KWOK stage files under $src/kustomize/stage" >&2; return 1; }
}
# LWS CRDs and webhook configurations, as the harness reads them.
lws_manifests() {
  local src=$1 dst=$2
  mkdir -p "$dst/lws"
  compgen -G "$src/config/crd/bases/*.yaml" >/dev/null || { echo "[go-tools] no LWS CRDs under $src/config/crd/bases" >&2; return 1; }
  install -m644 "$src"/config/crd/bases/*.yaml "$dst/lws/"
  install -m644 "$src/config/webhook/manifests.yaml" "$dst/lws-webhooks.yaml"
}
# go.mod of the wrapper module that builds Kubernetes + etcd: k8s.io/kubernetes points its staging
# modules at ./staging (v0.0.0), which a module download cannot use; point them at the tagged releases.
k8s_wrapper_gomod() {
  local kmod=$1 stg=v0.${K8S_V#v1.}
  echo "module local.invalid/k8sbins"; echo; echo "go 1.26"; echo
  echo "require k8s.io/kubernetes $K8S_V"; echo
  grep -E '^godebug ' "$kmod" || true
  echo "replace ("
  sed -n "s#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\t\1 => \1 $stg#p" "$kmod"
  echo ")"
  echo "tool ("
  printf '\t%s\n' k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl go.etcd.io/etcd/server/v3
  echo ")"
}

usage() { echo "usage: $0 [--root|--verify|--key|--step kwok-stages|lws-manifests|k8s-wrapper-gomod ARGS]" >&2; exit 2; }
case ${1:-} in
  ""|--root|--verify|--key) ;;
  --step)
    case ${2:-} in
      kwok-stages) (( $# == 4 )) || usage; kwok_stages "$3" "$4"; exit ;;
      lws-manifests) (( $# == 4 )) || usage; lws_manifests "$3" "$4"; exit ;;
      k8s-wrapper-gomod) (( $# == 3 )) || usage; k8s_wrapper_gomod "$3"; exit ;;
      *) usage ;;
    esac ;;
  *) usage ;;
esac
command -v go >/dev/null || { echo "[go-tools] go toolchain missing: install Go >= 1.26" >&2; exit 3; }
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}
KEY=$( { cat "$SELF"; go env GOVERSION; } | sha256sum | cut -c1-16)
if [[ ${1:-} == --key ]]; then echo "$KEY"; exit 0; fi
ROOT=${GO_TOOLS_CACHE:-$HOME/.cache/llmaz/go-tools}
OUT=$ROOT/$KEY
BIN=$OUT/bin
emit() { if [[ ${1:-} == --root ]]; then echo "$OUT"; else echo "$BIN"; fi; }
# Every binary runs and reports the pinned version; the data files the harness reads are there.
verify() {
  local out
  need() { [[ -e $1 ]] || { echo "[go-tools] missing $1" >&2; return 1; }; }
  has() {  # has WHAT EXPECTED CMD...: CMD succeeds and its output mentions EXPECTED
    if ! out=$("${@:3}" 2>&1) || [[ $out != *"$2"* ]]; then
      echo "[go-tools] $1 check failed (want '$2'): ${out:0:300}" >&2; return 1
    fi
    echo "[go-tools] ok $1: $(head -n1 <<<"$out")" >&2
  }
  has kube-apiserver "$K8S_V" "$BIN/kube-apiserver" --version
  has kube-controller-manager "$K8S_V" "$BIN/kube-controller-manager" --version
  has kube-scheduler "$K8S_V" "$BIN/kube-scheduler" --version
  has kubectl "$K8S_V" "$BIN/kubectl" version --client
  has etcd "etcd Version: 3.6." "$BIN/etcd" --version
  has helm "$HELM_V" "$BIN/helm" version --short
  has helm-unittest "unittest" "$BIN/untt" --help
  has kwok "$KWOK_V" "$BIN/kwok" --version
  has kwokctl "$KWOK_V" "$BIN/kwokctl" --version
  has lws-controller "-config" "$BIN/lws-controller" --help
  need "$OUT/manifests/lws/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
  need "$OUT/manifests/lws-webhooks.yaml"
  need "$OUT/manifests/k8s-swagger.json"
  need "$OUT/helm-plugins/unittest/plugin.yaml"
  compgen -G "$OUT/manifests/kwok-stages/*.yaml" >/dev/null || { echo "[go-tools] no KWOK stage files" >&2; return 1; }
}
if [[ -f $OUT/.complete ]]; then
  if [[ ${1:-} == --verify ]]; then verify; fi
  emit "${1:-}"; exit 0
fi

# One build at a time per key: parallel callers (CI prefetch + test session) wait for each other.
mkdir -p "$ROOT"
exec 9>"$ROOT/.lock-$KEY"
flock 9
if [[ -f $OUT/.complete ]]; then emit "${1:-}"; exit 0; fi  # another caller built it meanwhile

export GOMODCACHE=$ROOT/gomod GOCACHE=$ROOT/gocache   # shared across keys
mkdir -p "$BIN" "$OUT/manifests" "$OUT/helm-plugins/unittest"
avail=$(df -Pk "$ROOT" | awk 'NR==2{print int($4/1048576)}')
(( avail >= 10 )) || { echo "[go-tools] need >= 10 GiB free under $ROOT (have ${avail} GiB)" >&2; exit 1; }
TOTAL=$SECONDS
STEPS=8 STEP=0
echo "[go-tools] building Kubernetes, etcd, KWOK, LWS, helm and helm-unittest from Go modules into $OUT" >&2
echo "[go-tools] this happens once per recipe: about 20 minutes on 2 vCPUs (later runs reuse it)" >&2
LOG=$OUT/build.log; : >"$LOG"
elapsed() { printf '%dm%02ds' $(( (SECONDS-TOTAL)/60 )) $(( (SECONDS-TOTAL)%60 )); }
# t NAME CMD...: run one build step quietly. Go's "go: downloading" chatter is folded into a count,
# a heartbeat line every 60 s says the step is alive, and a failure prints the step's log tail.
t() {
  local name=$1; shift; local s=$SECONDS rc=0 hb dl
  STEP=$((STEP+1))
  echo "[go-tools] ($STEP/$STEPS) building $name ... [total $(elapsed)]" >&2
  ( while sleep 60; do echo "[go-tools]       still building $name: $(( (SECONDS-s)/60 )) min so far [total $(elapsed)]" >&2; done ) &
  hb=$!
  "$@" >>"$LOG.step" 2>&1 || rc=$?
  kill "$hb" 2>/dev/null; wait "$hb" 2>/dev/null || true
  dl=$(grep -c '^go: downloading' "$LOG.step" || true)
  cat "$LOG.step" >>"$LOG"
  if (( rc != 0 )); then
    echo "[go-tools] FAILED building $name (exit $rc); last lines of the log ($LOG):" >&2
    grep -v '^go: downloading' "$LOG.step" | tail -n 40 >&2; rm -f "$LOG.step"; return "$rc"
  fi
  rm -f "$LOG.step"
  echo "[go-tools] ($STEP/$STEPS) built $name in $((SECONDS-s))s (${dl} modules downloaded) [total $(elapsed)]" >&2
}
moddir() {
  local j
  if ! j=$(go mod download -json "$1" 2>>"$LOG"); then
    echo "[go-tools] cannot download $1: $(jq -r .Error <<<"$j" 2>/dev/null)" >&2
    return 1
  fi
  jq -r ".$2" <<<"$j"
}

# helm v4: plain go install (no replace directives in its go.mod)
t helm env GOBIN="$BIN" go install \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_V -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  "helm.sh/helm/v4/cmd/helm@$HELM_V"

# helm-unittest: its go.mod carries a replace, so build inside the downloaded module
d=$(moddir "github.com/helm-unittest/helm-unittest@$UNTT_V" Dir)
t helm-unittest bash -c "cd '$d' && go build -ldflags '-s -w -X github.com/helm-unittest/helm-unittest/internal/build.version=${UNTT_V#v}' -o '$BIN/untt' ./cmd/helm-unittest"
cat >"$OUT/helm-plugins/unittest/plugin.yaml" <<YAML
name: "unittest"
version: "${UNTT_V#v}"
usage: "unittest for helm charts"
description: "helm-unittest built from its Go module by tools/go-tools.sh"
ignoreFlags: false
platformCommand:
  - command: "\$HELM_PLUGIN_DIR/untt"
YAML
ln -sf "$BIN/untt" "$OUT/helm-plugins/unittest/untt"

# kwok + kwokctl
t kwok env GOBIN="$BIN" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_V" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_V"
d=$(moddir "sigs.k8s.io/kwok@$KWOK_V" Dir)
# (a missing stage directory fails the build here, not later as "no KWOK stage files" in a test)
kwok_stages "$d" "$OUT/manifests/kwok-stages"

# LeaderWorkerSet controller + its CRDs and webhook manifests (data stays in the cache, not in git)
# (built inside the downloaded module: `go install ...@version` also lists the module's versions to
# check deprecation, and proxy.golang.org answers 403 for sigs.k8s.io/lws/@v/list)
d=$(moddir "sigs.k8s.io/lws@$LWS_V" Dir)
t lws bash -c "cd '$d' && go build -ldflags '-s -w' -o '$BIN/lws-controller' ./cmd"
lws_manifests "$d" "$OUT/manifests"

# Kubernetes + etcd through a generated wrapper module (k8s.io/kubernetes pins staging modules at v0.0.0)
W=$OUT/src/k8s; mkdir -p "$W"; cd "$W"
kmod=$(moddir "k8s.io/kubernetes@$K8S_V" GoMod)
kdir=$(moddir "k8s.io/kubernetes@$K8S_V" Dir)
k8s_wrapper_gomod "$kmod" >go.mod
if grep -vE '=> \./staging' "$kmod" | grep -qE '=>'; then echo "[go-tools] WARN: k8s go.mod has non-staging replaces" >&2; fi
t k8s-modules go mod tidy
# The Kubernetes OpenAPI of the pinned version: crdgen reads embedded-type schemas from it.
install -m644 "$kdir/api/openapi-spec/swagger.json" "$OUT/manifests/k8s-swagger.json"
MINOR=$(cut -d. -f2 <<<"${K8S_V#v}")
KLD="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  KLD+=" -X $p.gitVersion=$K8S_V -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done
t kube-apiserver go build -ldflags "$KLD" -o "$BIN/" k8s.io/kubernetes/cmd/kube-apiserver
t kube-controller-manager+scheduler+kubectl go build -ldflags "$KLD" -o "$BIN/" \
  k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
t etcd go build -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3

verify
[[ ${GO_TOOLS_KEEP_CACHE:-0} == 1 ]] || go clean -cache
echo "[go-tools] all tools ready in $((SECONDS-TOTAL))s under $OUT" >&2
touch "$OUT/.complete"
emit "${1:-}"
