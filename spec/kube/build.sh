#!/usr/bin/env bash
# Builds the real control plane the kube suite runs against: kube-apiserver,
# kube-controller-manager and kubectl of the Kubernetes release pinned in
# spec/kube/kubernetes/go.mod, and etcd of the release pinned in
# spec/kube/etcd/go.mod, from the Go module proxy.  Nothing of their source is
# in this tree; go.mod and go.sum name the modules, versions and hashes.
#
# The binaries go to a cache outside the work tree, one directory per pinned
# set (versions + a hash of the go.mod/go.sum files), reused across runs and
# work trees:
#
#   ${LUNA_KUBE_CACHE:-$HOME/.cache/luna-kube}/<key>/{etcd,kube-apiserver,
#                                                   kube-controller-manager,kubectl}
#
# A directory is complete if and only if its `complete` file exists (written
# last), so an interrupted build is redone, never half-used.  The directory's
# path is printed on the last line of stdout; spec/kube/cluster.sh reads it
# with `build.sh --print-dir` without building.
#
# Environment: GO (the go command; default `go` on PATH, else
# /usr/local/go/bin/go), LUNA_KUBE_CACHE, and Go's own GOCACHE/GOMODCACHE/
# GOPROXY/GOFLAGS.  GOTOOLCHAIN is forced to `local`: the build never
# downloads a toolchain.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

if [ -z "${GO:-}" ]; then
  if command -v go >/dev/null; then GO=go
  elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
  else echo "build.sh: no Go toolchain (set GO or put go on PATH)" >&2; exit 2
  fi
fi
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly"

# pinned MODULE GOMOD: the version GOMOD requires MODULE at.
pinned() {
  awk -v m="$1" '$1 == "require" && $2 == m { print $3; exit }
                 $1 == m && $2 ~ /^v/ { print $2; exit }' "$2"
}
kube_version=$(pinned k8s.io/kubernetes "$here/kubernetes/go.mod")
etcd_version=$(pinned go.etcd.io/etcd/server/v3 "$here/etcd/go.mod")
[ -n "$kube_version" ] && [ -n "$etcd_version" ] || {
  echo "build.sh: cannot read the pinned versions from spec/kube/*/go.mod" >&2; exit 2; }
hash=$(cat "$here"/kubernetes/go.mod "$here"/kubernetes/go.sum \
           "$here"/etcd/go.mod "$here"/etcd/go.sum "$0" | sha256sum | cut -c1-12)
cache=${LUNA_KUBE_CACHE:-$HOME/.cache/luna-kube}
dir="$cache/kubernetes-$kube_version-etcd-$etcd_version-$hash"

if [ "${1:-}" = "--print-dir" ]; then
  echo "$dir"
  exit 0
fi
if [ -f "$dir/complete" ]; then
  echo "make kube: cached in $dir"
  echo "$dir"
  exit 0
fi

mkdir -p "$cache"
tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

# The version stamps Kubernetes' own build sets (hack/lib/version.sh names
# these variables): without them the binaries call themselves v0.0.0-master.
minor=${kube_version#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1"
  ldflags="$ldflags -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  ldflags="$ldflags -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

echo "make kube: building Kubernetes $kube_version and etcd $etcd_version (first build: minutes)"
(cd "$here/kubernetes" && "$GO" build -trimpath -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kubectl)
(cd "$here/etcd" && "$GO" build -trimpath -ldflags "-s -w" -o "$tmp/etcd" \
    go.etcd.io/etcd/server/v3)

for b in etcd kube-apiserver kube-controller-manager kubectl; do
  [ -x "$tmp/$b" ] || { echo "build.sh: $b was not built" >&2; exit 1; }
done
"$tmp/kube-apiserver" --version
# sed reads to the end: with pipefail, head could end etcd by SIGPIPE (141)
"$tmp/etcd" --version | sed -n 1p
echo "$kube_version $etcd_version built in $(( $(date +%s) - start ))s on $(date -u +%FT%TZ)" \
  > "$tmp/complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "make kube: built in $(( $(date +%s) - start ))s into $dir"
echo "$dir"
