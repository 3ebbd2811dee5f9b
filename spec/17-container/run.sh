#!/usr/bin/env bash
# run.sh SUMMARY BUSTED-COMMAND...
#
# What `make test-container` runs after building the image: the container
# suite against the dev server, then against the real control plane when
# one is at hand: KUBECONFIG if set, else the one `make kube` built
# (spec/kube/cluster.sh starts and stops it).  Each run writes busted's
# summary line to its own file next to SUMMARY (devserver.txt, kube.txt);
# SUMMARY gets their sum, "N passed, N failed, N skipped".  A run that ends
# without a summary counts as one failure.  Exit status: non-zero if any
# run failed.  LUNA_CONTAINER_KUBE=0 skips the real control plane.
set -uo pipefail
summary=$1; shift
dir=$(dirname "$summary")
mkdir -p "$dir"
rm -f "$summary" "$dir/devserver.txt" "$dir/kube.txt"
status=0

echo "::: container suite against the dev server"
env -u KUBECONFIG LUNA_SUMMARY_FILE="$dir/devserver.txt" "$@" || status=1
files=("$dir/devserver.txt")

kube_built() {
  [ -x spec/kube/cluster.sh ] && [ -x spec/kube/build.sh ] || return 1
  local d
  d=$(spec/kube/build.sh --print-dir 2>/dev/null) && [ -f "$d/complete" ]
}

if [ "${LUNA_CONTAINER_KUBE:-1}" = 0 ]; then
  echo "::: container suite: the real control plane skipped (LUNA_CONTAINER_KUBE=0)"
elif [ -n "${KUBECONFIG:-}" ]; then
  echo "::: container suite against the cluster in KUBECONFIG"
  LUNA_SUMMARY_FILE="$dir/kube.txt" "$@" || status=1
  files+=("$dir/kube.txt")
elif ! docker version >/dev/null 2>&1; then
  : # every spec is already pending with the reason
elif kube_built; then
  echo "::: container suite against the real control plane (spec/kube/cluster.sh)"
  spec/kube/cluster.sh run --dir "$dir/cluster" -- \
    env LUNA_SUMMARY_FILE="$dir/kube.txt" "$@" || status=1
  files+=("$dir/kube.txt")
else
  echo "::: container suite: no real control plane built (make kube): dev server only"
fi

passed=0 failed=0 skipped=0
for f in "${files[@]}"; do
  line=$(tail -n 1 "$f" 2>/dev/null || true)
  if [[ $line =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped ]]; then
    passed=$(( passed + BASH_REMATCH[1] ))
    failed=$(( failed + BASH_REMATCH[2] ))
    skipped=$(( skipped + BASH_REMATCH[3] ))
  else
    echo "::: $f: no summary: counted as 1 failure"
    failed=$(( failed + 1 ))
    status=1
  fi
done
echo "$passed passed, $failed failed, $skipped skipped" | tee "$summary"
[ "$failed" -eq 0 ] || status=1
exit "$status"
