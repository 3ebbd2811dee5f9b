#!/usr/bin/env bash
# Builds the peers `make bench-peers` runs (peer-client-go,
# peer-controller-runtime, peers-load) from this folder's go.mod, with the
# modules the Go module proxy serves, into a cache outside the work tree,
# one directory per source state (a hash of go.mod, go.sum, the Go files and
# this script):
#
#   ${LUNA_PEERS_CACHE:-$HOME/.cache/luna-peers}/<hash>/{peer-client-go,
#                                                       peer-controller-runtime,peers-load}
#
# The directory is complete if and only if its `complete` file exists
# (written last).  Its path is the last line of stdout; `build.sh
# --print-dir` prints it without building (bench/peers.lua and the spec use
# that to find the binaries).  Environment: GO (default `go` on PATH, else
# /usr/local/go/bin/go), LUNA_PEERS_CACHE, and Go's own GOCACHE/GOMODCACHE/
# GOPROXY.  GOTOOLCHAIN is forced to `local`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hash=$(cd "$here" && cat go.mod go.sum build.sh $(find . -name '*.go' | LC_ALL=C sort) | sha256sum | cut -c1-12)
dir="${LUNA_PEERS_CACHE:-$HOME/.cache/luna-peers}/$hash"
if [ "${1:-}" = "--print-dir" ]; then echo "$dir"; exit 0; fi
if [ -f "$dir/complete" ]; then echo "$dir"; exit 0; fi

if [ -z "${GO:-}" ]; then
  if command -v go >/dev/null; then GO=go
  elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
  else echo "bench/peers/build.sh: no Go toolchain (set GO or put go on PATH)" >&2; exit 2
  fi
fi
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=readonly"
mkdir -p "$(dirname "$dir")"
tmp=$(mktemp -d "$(dirname "$dir")/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "bench-peers: building the peers into $dir" >&2
(cd "$here" && "$GO" build -trimpath -o "$tmp/" ./cmd/...)
for b in peer-client-go peer-controller-runtime peers-load; do
  [ -x "$tmp/$b" ] || { echo "build.sh: $b was not built" >&2; exit 1; }
done
"$GO" version > "$tmp/complete"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "$dir"
