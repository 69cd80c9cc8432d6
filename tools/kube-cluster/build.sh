#!/usr/bin/env bash
# Builds the real Kubernetes control plane and kubelet (kube-apiserver, kubelet, kube-scheduler,
# kube-controller-manager) from the Go module proxy, at a pinned version, into a cache folder
# outside the checkout. The first build takes about 10 minutes on 2 cores; a second run with the
# binaries present returns at once.
#
# `go install k8s.io/kubernetes/cmd/...@vX` is refused because k8s.io/kubernetes replaces its staging
# modules (k8s.io/api, client-go, …) with folders of its own. A wrapper module that requires
# k8s.io/kubernetes and replaces each of those staging modules with the same module at v0.<minor>.<patch>
# builds them.
#
#   KUBE_VERSION   the Kubernetes version (default v1.35.4)
#   BERTH_KUBE_CACHE where binaries go (default ${XDG_CACHE_HOME:-$HOME/.cache}/berth/kubernetes)
set -euo pipefail
say() { printf '[kube-cluster build] %s\n' "$*"; }

version="${KUBE_VERSION:-v1.35.4}"
cache="${BERTH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/kubernetes}"
bin="$cache/$version/bin"
components=(kube-apiserver kubelet kube-scheduler kube-controller-manager)

missing=()
for c in "${components[@]}"; do [ -x "$bin/$c" ] || missing+=("$c"); done
if [ ${#missing[@]} -eq 0 ]; then
  say "Kubernetes $version binaries are cached in $bin"
  exit 0
fi

if ! command -v go >/dev/null; then
  for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do [ -x "$g" ] && PATH="$(dirname "$g"):$PATH"; done
fi
command -v go >/dev/null || { say "Go is needed to build Kubernetes from the module proxy; install Go (1.24 or newer) and run again."; exit 1; }

staging_version="v0.${version#v1.}"
wrapper="$cache/$version/module"
mkdir -p "$wrapper" "$bin"
say "building ${missing[*]} $version with $(go version | cut -d' ' -f3) (first time: about 10 minutes on 2 cores)"

# The list of staging modules is read from k8s.io/kubernetes's own go.mod, so it follows the version.
gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[ -r "$gomod" ] || { say "could not download k8s.io/kubernetes@$version from the Go module proxy"; exit 1; }
mapfile -t staging < <(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod")
[ ${#staging[@]} -gt 0 ] || { say "found no staging modules in $gomod"; exit 1; }

{
  echo "module berth.local/kube-build"
  echo
  echo "go $(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do echo "	$m => $m $staging_version"; done
  echo ")"
} >"$wrapper/go.mod"
printf 'package tools\n\nimport (\n' >"$wrapper/tools.go"
for c in "${components[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >>"$wrapper/tools.go"; done
printf ')\n' >>"$wrapper/tools.go"
sed -i '1i //go:build tools\n' "$wrapper/tools.go"

cd "$wrapper"
export GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
go mod tidy -e >/dev/null 2>"$wrapper/tidy.log" || true
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
for c in "${missing[@]}"; do
  started=$(date +%s)
  if ! go build -trimpath -ldflags "$ldflags" -o "$bin/$c.partial" "k8s.io/kubernetes/cmd/$c" 2>"$wrapper/$c.log"; then
    say "building $c failed; the last lines of $wrapper/$c.log:"
    tail -n 20 "$wrapper/$c.log" >&2
    exit 1
  fi
  mv "$bin/$c.partial" "$bin/$c"
  say "built $c in $(( $(date +%s) - started )) s"
done
say "Kubernetes $version binaries are in $bin"
