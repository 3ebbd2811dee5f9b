#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for the specs: etcd, then
# kube-apiserver (TLS, a bearer token, RBAC), then kube-controller-manager
# (no nodes), from the binaries `make kube` built (spec/kube/build.sh).
#
#   cluster.sh start DIR [--feature-gates G] [--runtime-config R] [-- APISERVER-ARGS...]
#       starts the three in DIR (created; state, certificates, logs, pid
#       files), writes DIR/kubeconfig (cluster-admin by bearer token), waits
#       until /readyz answers 200 and the controller-manager's /healthz does,
#       and prints `KUBECONFIG=DIR/kubeconfig`.  Exits non-zero (with the
#       logs' tails) when a part does not come up; nothing is left running.
#   cluster.sh stop DIR
#       SIGTERM to the controller-manager, the apiserver and etcd in that
#       order (SIGKILL after 20 s each); safe on a stopped or missing DIR.
#   cluster.sh run [--dir DIR] [--feature-gates G] [--runtime-config R] -- CMD...
#       start, run CMD with KUBECONFIG set and the same-version kubectl first
#       on PATH, stop; exits with CMD's status.
#
# --feature-gates goes to the apiserver and the controller-manager (e.g.
# ShardedListAndWatch=true); --runtime-config to the apiserver (e.g.
# api/all=true).  Defaults: $LUNA_KUBE_FEATURE_GATES, $LUNA_KUBE_RUNTIME_CONFIG.
# Ports are free loopback ports picked at start (a bind race with another
# process is retried with new ports).
#
# DIR/kubeconfig's user is in system:masters; DIR/token holds its token.
# Other identities for specs that need RBAC to say no: DIR/tokens.csv names
# `luna-limited` (no bindings) with the token in DIR/limited-token.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }

bin_dir() {
  local d
  d=$("$here/build.sh" --print-dir)
  [ -f "$d/complete" ] || die "no control plane binaries in $d: run \`make kube\` first"
  echo "$d"
}

# A loopback port nothing listens on (connect is refused).
free_port() {
  local p
  while :; do
    p=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
}

# alive PIDFILE NAME: true if the pid in PIDFILE runs the binary NAME.
alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [ -n "$pid" ] && [ -e "/proc/$pid" ] || return 1
  case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
    */"$2"|*/"$2"" (deleted)") return 0 ;;
  esac
  return 1
}

stop_one() {
  local dir=$1 name=$2 pid i
  alive "$dir/$name.pid" "$name" || { rm -f "$dir/$name.pid"; return 0; }
  pid=$(cat "$dir/$name.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 200); do
    alive "$dir/$name.pid" "$name" || break
    sleep 0.1
  done
  if alive "$dir/$name.pid" "$name"; then
    echo "cluster.sh: $name did not stop within 20 s of SIGTERM; SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/$name.pid"
}

cmd_stop() {
  local dir=$1
  [ -d "$dir" ] || return 0
  stop_one "$dir" kube-controller-manager
  stop_one "$dir" kube-apiserver
  stop_one "$dir" etcd
}

tails() {
  local dir=$1 f
  for f in etcd kube-apiserver kube-controller-manager; do
    [ -f "$dir/$f.log" ] || continue
    echo "----- last lines of $dir/$f.log" >&2
    tail -n 25 "$dir/$f.log" >&2
  done
}

# wait_for NAME SECS PIDFILE CMD...: until CMD succeeds; fails early when
# the process behind PIDFILE exits.
wait_for() {
  local name=$1 secs=$2 pidfile=$3 binary=$4; shift 4
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    alive "$pidfile" "$binary" || { echo "cluster.sh: $name exited during start" >&2; return 1; }
    [ "$(date +%s)" -lt "$deadline" ] || { echo "cluster.sh: $name not ready within ${secs}s" >&2; return 1; }
    sleep 0.2
  done
}

certs() {
  local dir=$1
  (
    cd "$dir"
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
      -keyout ca.key -out ca.crt -days 30 -subj "/CN=luna-kube-ca" 2>/dev/null
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
      -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      "extendedKeyUsage=serverAuth" "keyUsage=digitalSignature,keyEncipherment" > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
      -out apiserver.crt -days 30 -extfile apiserver.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f apiserver.csr apiserver.ext ca.srl
  )
}

# kubeconfig FILE URL TOKEN USER
kubeconfig() {
  cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: luna-kube
  cluster:
    server: $2
    certificate-authority: $(dirname "$1")/ca.crt
users:
- name: $4
  user:
    token: $3
contexts:
- name: luna-kube
  context:
    cluster: luna-kube
    user: $4
current-context: luna-kube
EOF
  chmod 600 "$1"
}

start_once() {
  local dir=$1 gates=$2 runtime=$3; shift 3
  local bin etcd_port peer_port api_port kcm_port url
  bin=$(bin_dir)
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port); kcm_port=$(free_port)
  url="https://127.0.0.1:$api_port"

  rm -rf "$dir/etcd-data"
  # --unsafe-no-fsync: a throwaway store on a shared test machine.
  "$bin/etcd" --name luna-kube --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "luna-kube=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync \
    > "$dir/etcd.log" 2>&1 &
  echo $! > "$dir/etcd.pid"
  wait_for etcd 60 "$dir/etcd.pid" etcd \
    curl -fsS "http://127.0.0.1:$etcd_port/health" || return 1

  local extra=()
  [ -n "$gates" ] && extra+=("--feature-gates=$gates")
  "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --tls-cert-file "$dir/apiserver.crt" --tls-private-key-file "$dir/apiserver.key" \
    --client-ca-file "$dir/ca.crt" \
    --token-auth-file "$dir/tokens.csv" \
    --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$dir/sa.pub" \
    --service-account-signing-key-file "$dir/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 \
    --endpoint-reconciler-type none \
    --cert-dir "$dir/apiserver-certs" \
    --profiling=false \
    ${runtime:+--runtime-config "$runtime"} \
    "${extra[@]}" "$@" \
    > "$dir/kube-apiserver.log" 2>&1 &
  echo $! > "$dir/kube-apiserver.pid"
  wait_for kube-apiserver 180 "$dir/kube-apiserver.pid" kube-apiserver \
    curl -fsS --cacert "$dir/ca.crt" -H "Authorization: Bearer $(cat "$dir/token")" \
      "$url/readyz" || return 1

  kubeconfig "$dir/kubeconfig" "$url" "$(cat "$dir/token")" luna-admin
  kubeconfig "$dir/kcm.kubeconfig" "$url" "$(cat "$dir/kcm-token")" system:kube-controller-manager

  "$bin/kube-controller-manager" \
    --kubeconfig "$dir/kcm.kubeconfig" \
    --authentication-kubeconfig "$dir/kcm.kubeconfig" \
    --authorization-kubeconfig "$dir/kcm.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --cert-dir "$dir/kcm-certs" \
    --leader-elect=false \
    --use-service-account-credentials \
    --service-account-private-key-file "$dir/sa.key" \
    --root-ca-file "$dir/ca.crt" \
    --profiling=false \
    "${extra[@]}" \
    > "$dir/kube-controller-manager.log" 2>&1 &
  echo $! > "$dir/kube-controller-manager.pid"
  wait_for kube-controller-manager 120 "$dir/kube-controller-manager.pid" kube-controller-manager \
    curl -fsSk "https://127.0.0.1:$kcm_port/healthz" || return 1
  echo "$url" > "$dir/url"
}

cmd_start() {
  local dir=$1; shift
  local gates=${LUNA_KUBE_FEATURE_GATES:-} runtime=${LUNA_KUBE_RUNTIME_CONFIG:-}
  while [ $# -gt 0 ]; do
    case $1 in
      --feature-gates) gates=$2; shift 2 ;;
      --feature-gates=*) gates=${1#*=}; shift ;;
      --runtime-config) runtime=$2; shift 2 ;;
      --runtime-config=*) runtime=${1#*=}; shift ;;
      --) shift; break ;;
      *) die "unknown option $1" ;;
    esac
  done
  bin_dir >/dev/null
  command -v openssl >/dev/null || die "needs openssl (make deps)"
  command -v curl >/dev/null || die "needs curl (make deps)"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  cmd_stop "$dir"
  certs "$dir"
  local token
  token=$(openssl rand -hex 24)
  echo "$token" > "$dir/token"
  openssl rand -hex 24 > "$dir/kcm-token"
  openssl rand -hex 24 > "$dir/limited-token"
  {
    echo "$token,luna-admin,luna-admin,\"system:masters\""
    echo "$(cat "$dir/kcm-token"),system:kube-controller-manager,system:kube-controller-manager"
    echo "$(cat "$dir/limited-token"),luna-limited,luna-limited"
  } > "$dir/tokens.csv"
  chmod 600 "$dir/token" "$dir/kcm-token" "$dir/limited-token" "$dir/tokens.csv"

  local attempt
  for attempt in 1 2 3; do
    if start_once "$dir" "$gates" "$runtime" "$@"; then
      echo "KUBECONFIG=$dir/kubeconfig"
      return 0
    fi
    # A port taken between the check and the bind: try new ports.
    if grep -qs "address already in use" "$dir"/*.log; then
      echo "cluster.sh: a port was taken; retrying with new ports" >&2
      cmd_stop "$dir"
      continue
    fi
    break
  done
  tails "$dir"
  cmd_stop "$dir"
  return 1
}

# The directory `run` stops on exit (global: the EXIT trap runs after
# cmd_run has returned).
run_dir=""

cmd_run() {
  local dir="" opts=()
  while [ $# -gt 0 ]; do
    case $1 in
      --dir) dir=$2; shift 2 ;;
      --dir=*) dir=${1#*=}; shift ;;
      --) shift; break ;;
      *) opts+=("$1"); shift ;;
    esac
  done
  [ $# -gt 0 ] || die "run: no command after --"
  local bin
  bin=$(bin_dir)
  if [ -z "$dir" ]; then
    dir=$(mktemp -d /tmp/luna-kube-XXXXXX)
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  run_dir=$dir
  trap 'cmd_stop "$run_dir"' EXIT
  trap 'exit 130' INT TERM
  cmd_start "$dir" "${opts[@]}" >/dev/null || return 1
  echo "cluster.sh: control plane up: KUBECONFIG=$dir/kubeconfig ($("$bin/kube-apiserver" --version))"
  local rc=0
  KUBECONFIG="$dir/kubeconfig" PATH="$bin:$PATH" LUNA_KUBE_DIR="$dir" "$@" || rc=$?
  return "$rc"
}

case ${1:-} in
  start) [ $# -ge 2 ] || die "usage: cluster.sh start DIR [options]"; shift; cmd_start "$@" ;;
  stop)  [ $# -ge 2 ] || die "usage: cluster.sh stop DIR"; cmd_stop "$2" ;;
  run)   shift; cmd_run "$@" ;;
  *) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
