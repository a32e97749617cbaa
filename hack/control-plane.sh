#!/usr/bin/env bash
# Builds the binaries of a real Kubernetes control plane from their Go modules:
# etcd, kube-apiserver, kube-controller-manager and kubectl.
#
# They land in one folder laid out like KUBEBUILDER_ASSETS (binaries side by side):
#   $CONVERGE_ASSETS when set, else ${XDG_CACHE_HOME:-~/.cache}/converge/k8s/<k8s version>/
# A binary that is present and reports the right version is not rebuilt, so a second
# run only checks versions. The Go modules that build them live in throwaway modules
# under ${XDG_CACHE_HOME:-~/.cache}/converge/build/, outside this repository's module graph.
#
# Usage: hack/control-plane.sh [--print-dir]
set -euo pipefail

K8S_VERSION=${CONVERGE_K8S_VERSION:-v1.37.2}
ETCD_VERSION=${CONVERGE_ETCD_VERSION:-v3.6.16}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/converge
ASSETS=${CONVERGE_ASSETS:-$CACHE_ROOT/k8s/$K8S_VERSION}
BUILD_ROOT=$CACHE_ROOT/build

if [[ "${1:-}" == "--print-dir" ]]; then
  echo "$ASSETS"
  exit 0
fi

# Staging modules are versioned v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
STAGING_VERSION=v0.${K8S_VERSION#v1.}
K8S_MINOR=${K8S_VERSION#v1.}; K8S_MINOR=${K8S_MINOR%%.*}

export GOFLAGS="${GOFLAGS:-} -mod=mod"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export CGO_ENABLED=0

start_all=$(date +%s)
log() { printf '[control-plane %4ss] %s\n' "$(( $(date +%s) - start_all ))" "$*"; }

# Serialize concurrent runs (two make targets at once) on the assets folder.
mkdir -p "$ASSETS" "$BUILD_ROOT"
exec 9>"$ASSETS/.lock"
if command -v flock >/dev/null; then
  flock 9
fi

# has_version BINARY WANT ARGS...: the binary exists and prints WANT in its version output.
has_version() {
  local bin=$1 want=$2; shift 2
  [[ -x "$ASSETS/$bin" ]] || return 1
  # Capture first: with pipefail, `| grep -q` can fail on the writer's SIGPIPE.
  local out
  out=$("$ASSETS/$bin" "$@" 2>/dev/null) || return 1
  [[ "$out" == *"$want"* ]]
}

# with_heartbeat LABEL CMD...: runs CMD, printing a progress line every 30 s.
# CMD's own output goes to a log file, shown only when CMD fails.
with_heartbeat() {
  local label=$1; shift
  local t0; t0=$(date +%s)
  local out="$BUILD_ROOT/last-step.log"
  ( while sleep 30; do log "still $label ($(( $(date +%s) - t0 ))s)"; done ) &
  local ticker=$!
  local rc=0
  "$@" >"$out" 2>&1 || rc=$?
  kill "$ticker" 2>/dev/null; wait "$ticker" 2>/dev/null || true
  if (( rc != 0 )); then
    log "FAILED: $label (exit $rc); its output:"
    tail -n 40 "$out" >&2
    return "$rc"
  fi
  log "done: $label in $(( $(date +%s) - t0 ))s"
}

build_etcd() {
  if has_version etcd "etcd Version: ${ETCD_VERSION#v}" --version; then
    log "etcd ${ETCD_VERSION} present"
    return
  fi
  local mod=$BUILD_ROOT/etcd-$ETCD_VERSION
  mkdir -p "$mod"
  if [[ ! -f "$mod/go.mod" ]] || ! grep -q "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "$mod/go.mod"; then
    rm -f "$mod/go.mod" "$mod/go.sum"
    (cd "$mod" && go mod init converge.local/etcd-build >/dev/null 2>&1)
    with_heartbeat "resolving etcd $ETCD_VERSION modules" \
      bash -c "cd '$mod' && go get go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  fi
  log "building etcd $ETCD_VERSION (about 1 minute cold)"
  with_heartbeat "building etcd" \
    bash -c "cd '$mod' && go build -trimpath -o '$ASSETS/etcd.tmp' go.etcd.io/etcd/server/v3"
  mv "$ASSETS/etcd.tmp" "$ASSETS/etcd"
  has_version etcd "etcd Version: ${ETCD_VERSION#v}" --version || { log "etcd reports the wrong version"; exit 1; }
}

k8s_module() {
  local mod=$BUILD_ROOT/kubernetes-$K8S_VERSION
  mkdir -p "$mod"
  if [[ -f "$mod/.ready" ]]; then
    echo "$mod"; return
  fi
  rm -f "$mod/go.mod" "$mod/go.sum"
  (cd "$mod" && go mod init converge.local/kubernetes-build >/dev/null 2>&1)
  with_heartbeat "downloading k8s.io/kubernetes $K8S_VERSION" \
    bash -c "cd '$mod' && go mod download -json k8s.io/kubernetes@$K8S_VERSION" >&2
  local gomod
  gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')
  [[ -f "$gomod" ]] || { log "cannot find k8s.io/kubernetes go.mod in the module cache" >&2; exit 1; }
  {
    echo "require k8s.io/kubernetes $K8S_VERSION"
    # k8s.io/kubernetes replaces its staging modules with ./staging/...; that only works inside
    # its own repository, so point each one at the published module of the matching version.
    grep -E '^\s*k8s\.io/[^ ]+ => \./staging/' "$gomod" | awk -v v="$STAGING_VERSION" '{print "replace " $1 " => " $1 " " v}'
  } >>"$mod/go.mod"
  cat >"$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  with_heartbeat "resolving kubernetes $K8S_VERSION modules" \
    bash -c "cd '$mod' && { go mod tidy -e || true; } && go mod download" >&2
  touch "$mod/.ready"
  echo "$mod"
}

build_kubernetes() {
  local want="Kubernetes $K8S_VERSION" missing=()
  has_version kube-apiserver "$want" --version || missing+=(kube-apiserver)
  has_version kube-controller-manager "$want" --version || missing+=(kube-controller-manager)
  has_version kubectl "Client Version: $K8S_VERSION" version --client || missing+=(kubectl)
  if (( ${#missing[@]} == 0 )); then
    log "kube-apiserver, kube-controller-manager, kubectl $K8S_VERSION present"
    return
  fi
  local mod; mod=$(k8s_module)
  local ldflags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$K8S_MINOR"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  ldflags+=" -s -w"
  local pkgs=()
  for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  log "building ${missing[*]} $K8S_VERSION (about 5 minutes per binary cold on 2 cores; later runs reuse ~/.cache/go-build)"
  local out=$BUILD_ROOT/out-$K8S_VERSION
  mkdir -p "$out"
  with_heartbeat "building ${missing[*]}" \
    bash -c "cd '$mod' && go build -tags tools -trimpath -ldflags '$ldflags' -o '$out/' ${pkgs[*]}"
  for b in "${missing[@]}"; do mv "$out/$b" "$ASSETS/$b"; done
  has_version kube-apiserver "$want" --version || { log "kube-apiserver reports the wrong version"; exit 1; }
  has_version kubectl "Client Version: $K8S_VERSION" version --client || { log "kubectl reports the wrong version"; exit 1; }
}

log "control plane assets: $ASSETS (Kubernetes $K8S_VERSION, etcd $ETCD_VERSION)"
build_etcd
build_kubernetes
log "ready in $(( $(date +%s) - start_all ))s: $ASSETS"
ls -l "$ASSETS" | awk 'NR>1 && $NF !~ /^\./ {printf "  %-26s %6.0f MB\n", $NF, $5/1048576}'
