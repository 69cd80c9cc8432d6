#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for Berth's tests: kube-apiserver, kubelet,
# kube-scheduler and kube-controller-manager (built from the Go module proxy by build.sh), etcd,
# containerd, runc and the CNI plugins from Debian. Everything listens on loopback; pods sit on a
# bridge of their own with no gateway and no masquerade, so no pod traffic leaves the machine; image
# pulls go to a closed loopback port and fail at once. The local test images are imported from the
# Docker engine. The Docker engine's own containerd is left alone: this one has its own config,
# socket, root and state.
#
#   cluster.sh start    build if needed, install what is missing, start, wait until a pod can run
#   cluster.sh stop     delete every pod, stop what start started (by PID), unmount, remove the bridge
#   cluster.sh status   what runs
#   cluster.sh running  exit 0 when the cluster runs and answers (quiet)
#   cluster.sh restart-apiserver TERM|KILL
#                       stop kube-apiserver with that signal, then start it again (tests of a
#                       restart mid-build); waits until it answers. After SIGTERM the new one
#                       starts once the old one stopped listening, while the old one drains
#   cluster.sh import IMAGE…  copy images of the Docker engine into the cluster's containerd (when changed)
#   cluster.sh env      KUBECONFIG=… lines for the test kubeconfig (user `berth`, in the audit log)
#
# Idempotent: `start` returns at once when the cluster answers; `stop` when nothing runs. When a
# component fails to come up the error names it and shows the tail of its log.
#
#   BERTH_KUBE_STATE   state folder: PKI, containerd's image store, logs (default /var/lib/berth-kube)
#   BERTH_KUBE_PORT    kube-apiserver's port on 127.0.0.1 (default 16443)
#   KUBE_VERSION       the Kubernetes version to build (default v1.35.4)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../env.sh"

say() { printf '[kube-cluster] %s\n' "$*"; }
fail() { printf '[kube-cluster] %s\n' "$*" >&2; exit 1; }

version="${KUBE_VERSION:-v1.35.4}"
bin="${BERTH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/kubernetes}/$version/bin"
state="${BERTH_KUBE_STATE:-/var/lib/berth-kube}"
run="/run/berth-kube"
port="${BERTH_KUBE_PORT:-16443}"
etcd_port=12379
node=localhost
bridge=berth-pods0
pod_subnet=10.244.0.0/24
service_range=10.96.0.0/24
pki="$state/pki"
logs="$state/logs"
kubelet_root="$state/kubelet"
cni_conf="$state/cni/net.d"
sock="$run/containerd.sock"
admin_kubeconfig="$state/admin.kubeconfig"
test_kubeconfig="$state/berth.kubeconfig"
images=("${BERTH_BUSYBOX_IMAGE:-berth/busybox:1.35}" "${BERTH_PAUSE_IMAGE:-berth/pause:1}")
components=(etcd containerd kube-apiserver kubelet kube-scheduler kube-controller-manager)

pid_of() { cat "$run/$1.pid" 2>/dev/null || true; }
alive() { local pid; pid=$(pid_of "$1"); [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; }
kubectl_admin() { kubectl --kubeconfig "$admin_kubeconfig" --request-timeout=10s "$@"; }
api_up() { [ -r "$admin_kubeconfig" ] && kubectl_admin get --raw /readyz >/dev/null 2>&1; }
ctr_() { ctr --address "$sock" --namespace k8s.io "$@"; }
quiet() { "$@" >/dev/null 2>&1; }

# Shows why a component did not come up, and fails.
broke() {
  local name="$1" why="$2"
  printf '[kube-cluster] %s %s. The last lines of %s:\n' "$name" "$why" "$logs/$name.log" >&2
  tail -n 25 "$logs/$name.log" >&2 2>/dev/null || true
  fail "the cluster did not start (see above); \`bash tools/kube-cluster/cluster.sh stop\` cleans up what did"
}

# Runs `cmd…` in the background as component `name`, its output in logs/name.log and its PID in run/.
launch() {
  local name="$1"; shift
  alive "$name" && return 0
  "$@" >>"$logs/$name.log" 2>&1 &
  echo $! >"$run/$name.pid"
}

# Waits up to `secs` for `check` to succeed while `name` lives.
await() {
  local name="$1" secs="$2"; shift 2
  local i
  for ((i = 0; i < secs * 4; i++)); do
    "$@" && return 0
    alive "$name" || broke "$name" "exited"
    sleep 0.25
  done
  broke "$name" "did not answer within $secs s"
}

install_debian() {
  local want=()
  command -v etcd >/dev/null || want+=(etcd-server)
  command -v containerd >/dev/null || want+=(containerd)
  command -v runc >/dev/null || want+=(runc)
  [ -x /usr/lib/cni/bridge ] || want+=(containernetworking-plugins)
  command -v openssl >/dev/null || want+=(openssl)
  # The fleet lane (tools/fleet) reads KEDA's CRDs out of its Go module's zip.
  command -v unzip >/dev/null || want+=(unzip)
  command -v kubectl >/dev/null || fail "kubectl is needed (Debian: the kubernetes-client package, or kubectl from the Kubernetes release)"
  [ ${#want[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || fail "missing: ${want[*]}; install them (Debian: apt-get install ${want[*]}) and run again"
  say "installing ${want[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || true
  apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
}

check_machine() {
  [ "$(id -u)" = 0 ] || fail "the kubelet and containerd need root (mounts, cgroups, network namespaces)"
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
    fail "no usable cgroup hierarchy at /sys/fs/cgroup (neither v1 with a memory controller nor v2): the kubelet cannot run pods here"
  ip link add berth-probe0 type bridge 2>/dev/null && ip link del berth-probe0 ||
    fail "cannot create a network bridge (ip link add … type bridge failed): pods need one"
}

# A CA, the apiserver's serving certificate, its client certificate for the kubelet, the kubelet's
# serving certificate, the service-account key pair, and the static tokens of each user.
make_pki() {
  [ -s "$pki/tokens.csv" ] && return 0
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=berth-kube-ca" 2>/dev/null
    sign() { # name subject sans
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 -extfile "$1.ext" 2>/dev/null
      rm -f "$1.csr" "$1.ext"
    }
    sign apiserver "/CN=kube-apiserver" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.96.0.1"
    sign kubelet-client "/CN=kube-apiserver-kubelet-client/O=system:masters" "DNS:kube-apiserver"
    sign kubelet "/CN=localhost" "DNS:localhost,IP:127.0.0.1"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
    {
      echo "$(token),admin,admin,system:masters"
      echo "$(token),system:node:$node,system:node:$node,system:nodes"
      echo "$(token),system:kube-scheduler,system:kube-scheduler,system:masters"
      echo "$(token),system:kube-controller-manager,system:kube-controller-manager,system:masters"
      echo "$(token),berth,berth,system:masters"
    } >tokens.csv.partial
    mv tokens.csv.partial tokens.csv
  )
}

write_kubeconfig() { # file user
  local token
  token=$(awk -F, -v u="$2" '$2 == u { print $1 }' "$pki/tokens.csv")
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: berth-kube
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $pki/ca.crt
users:
- name: $2
  user:
    token: $token
contexts:
- name: berth-kube
  context: { cluster: berth-kube, user: "$2", namespace: default }
current-context: berth-kube
EOF
}

write_configs() {
  mkdir -p "$state/config" "$cni_conf" "$state/containerd/certs.d/docker.io" "$state/cni/ipam"
  write_kubeconfig "$admin_kubeconfig" admin
  write_kubeconfig "$test_kubeconfig" berth
  write_kubeconfig "$state/config/kubelet.kubeconfig" "system:node:$node"
  write_kubeconfig "$state/config/scheduler.kubeconfig" system:kube-scheduler
  write_kubeconfig "$state/config/controller-manager.kubeconfig" system:kube-controller-manager

  # Registry pulls go to a port nothing listens on: a pull fails at once and nothing leaves the machine.
  cat >"$state/containerd/certs.d/docker.io/hosts.toml" <<'EOF'
server = "https://127.0.0.1:9"
[host."https://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
EOF
  cat >"$state/config/containerd.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$run/containerd"
oom_score = 0
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/${images[1]}"
  # The VM drops CAP_SYS_RESOURCE: without this every sandbox fails in runc ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$cni_conf"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$state/containerd/certs.d"
EOF

  # No gateway and no masquerade: a pod reaches its own bridge and nothing beyond this machine.
  cat >"$cni_conf/10-berth.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "berth-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$pod_subnet" }]], "dataDir": "$state/cni/ipam" }
    },
    { "type": "loopback" }
  ]
}
EOF

  local cgroupv1=false
  [ -f /sys/fs/cgroup/cgroup.controllers ] || cgroupv1=true
  cat >"$state/config/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
failCgroupV1: $( $cgroupv1 && echo false || echo true )
failSwapOn: false
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: false }
  x509: { clientCAFile: $pki/ca.crt }
authorization: { mode: AlwaysAllow }
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# A test machine's disk is often fuller than production thresholds: neither evict pods nor
# collect the imported images (nothing can pull them back).
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%" }
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF

  cat >"$state/config/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [berth]
- level: None
EOF
}

start_containerd() {
  mkdir -p "$run/containerd"
  launch containerd containerd --config "$state/config/containerd.toml"
  await containerd 30 quiet ctr_ version
}

import_images() {
  local missing=() image id stamp
  mkdir -p "$state/imported"
  for image in "$@"; do
    id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || fail "the test image $image is missing from the Docker engine: run bash tools/images/build.sh"
    stamp="$state/imported/$(echo "$image" | tr '/:' '__')"
    [ "$(cat "$stamp" 2>/dev/null)" = "$id" ] && ctr_ images ls -q "name==docker.io/$image" 2>/dev/null | grep -q . && continue
    missing+=("$image")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  say "importing ${missing[*]} into the cluster's containerd"
  docker save "${missing[@]}" | ctr_ images import - >/dev/null || fail "importing ${missing[*]} into containerd failed"
  for image in "${missing[@]}"; do
    docker image inspect --format '{{.Id}}' "$image" >"$state/imported/$(echo "$image" | tr '/:' '__')"
  done
}

start_etcd() {
  mkdir -p "$state/etcd"
  launch etcd etcd --name berth --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-cluster "berth=http://127.0.0.1:$((etcd_port + 1))" --log-level warn
  await etcd 30 quiet curl -fsS "http://127.0.0.1:$etcd_port/health"
}

start_apiserver() {
  launch kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$port" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
    --authorization-mode Node,RBAC --allow-privileged=true \
    --service-cluster-ip-range "$service_range" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --kubelet-client-certificate "$pki/kubelet-client.crt" --kubelet-client-key "$pki/kubelet-client.key" \
    --kubelet-preferred-address-types Hostname \
    --audit-policy-file "$state/config/audit-policy.yaml" --audit-log-path "$logs/audit.log" \
    --audit-log-maxsize 200 --audit-log-maxbackup 1 \
    --profiling=false --enable-priority-and-fairness=false
  await kube-apiserver 90 api_up
}

start_kubelet() {
  mkdir -p "$kubelet_root"
  launch kubelet "$bin/kubelet" --config "$state/config/kubelet.yaml" \
    --kubeconfig "$state/config/kubelet.kubeconfig" --hostname-override "$node" --root-dir "$kubelet_root"
}

start_scheduler() {
  launch kube-scheduler "$bin/kube-scheduler" --kubeconfig "$state/config/scheduler.kubeconfig" \
    --authentication-kubeconfig "$state/config/scheduler.kubeconfig" --authorization-kubeconfig "$state/config/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false
}

start_controller_manager() {
  launch kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$state/config/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$state/config/controller-manager.kubeconfig" --authorization-kubeconfig "$state/config/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --leader-elect=false \
    --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route' \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt"
}

node_ready() {
  [ "$(kubectl_admin get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] &&
    [ -z "$(kubectl_admin get node "$node" -o jsonpath='{.spec.taints}' 2>/dev/null)" ]
}
default_sa() { kubectl_admin -n default get serviceaccount default >/dev/null 2>&1; }
all_alive() { local c; for c in "${components[@]}"; do alive "$c" || return 1; done; }

cmd_start() {
  if all_alive && api_up && node_ready; then
    say "running (kubeconfig: $test_kubeconfig)"
    return 0
  fi
  check_machine
  install_debian
  bash "$here/build.sh"
  # A component left from a run that broke half-way is stopped first: the cluster starts whole.
  if [ -d "$run" ] && ls "$run"/*.pid >/dev/null 2>&1; then cmd_stop; fi
  mkdir -p "$run" "$logs"
  : >"$logs/audit.log"
  # A fresh cluster each time: etcd's data, the kubelet's pods and the CNI leases start empty;
  # the image store is kept.
  rm -rf "$state/etcd" "$kubelet_root" "$state/cni/ipam" "$state/containerd/root/io.containerd.grpc.v1.cri/sandboxes" "$state/containerd/root/io.containerd.grpc.v1.cri/containers"
  make_pki
  write_configs
  local started
  started=$(date +%s)
  start_etcd
  start_containerd
  start_apiserver
  start_controller_manager
  start_scheduler
  start_kubelet
  import_images "${images[@]}"
  await kubelet 120 node_ready
  await kube-controller-manager 60 default_sa
  say "up in $(( $(date +%s) - started )) s: Kubernetes $version, node $node (kubeconfig: $test_kubeconfig)"
}

# Unmounts every mount under `dir`, deepest first.
unmount_under() {
  local dir="$1" target
  while read -r target; do
    umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || true
  done < <(awk -v d="$dir" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
}

stop_pid() { # name
  local pid i
  pid=$(pid_of "$1")
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$run/$1.pid"
}

cmd_stop() {
  local any=false c
  for c in "${components[@]}"; do [ -n "$(pid_of "$c")" ] && any=true; done
  if $any; then say "stopping"; fi
  # Pods first, through the kubelet, so that CNI takes down their network namespaces.
  if alive kubelet && api_up; then
    kubectl_admin delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    local i
    for ((i = 0; i < 80; i++)); do
      [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
  # An apiserver still draining after `restart-apiserver TERM` (its pid only if it is still one).
  [ "$(cat "/proc/$(pid_of kube-apiserver-draining)/comm" 2>/dev/null)" = kube-apiserver ] || rm -f "$run/kube-apiserver-draining.pid"
  for c in kube-scheduler kube-controller-manager kubelet kube-apiserver-draining kube-apiserver etcd; do stop_pid "$c"; done
  # What the kubelet did not stop: every task and sandbox of this containerd.
  if alive containerd; then
    local task
    for task in $(ctr_ tasks ls -q 2>/dev/null); do
      ctr_ tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for task in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$task" >/dev/null 2>&1 || true; done
    for task in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$task" >/dev/null 2>&1 || true; done
  fi
  stop_pid containerd
  # Shims whose containerd is gone.
  pkill -KILL -f "containerd-shim.* -address $sock" 2>/dev/null || true
  unmount_under "$kubelet_root"
  unmount_under "$run"
  unmount_under "$state/containerd"
  local ns
  for ns in /var/run/netns/cni-*; do
    [ -e "$ns" ] || continue
    ip netns delete "$(basename "$ns")" 2>/dev/null || { umount "$ns" 2>/dev/null; rm -f "$ns"; }
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$run"
  if $any; then say "stopped"; fi
}

cmd_status() {
  local c
  for c in "${components[@]}"; do
    if alive "$c"; then say "$c: running (pid $(pid_of "$c"))"; else say "$c: not running"; fi
  done
  api_up && kubectl_admin get nodes -o wide 2>/dev/null || true
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  running) all_alive && api_up ;;
  restart-apiserver)
    signal="${2:-TERM}"
    case "$signal" in TERM | KILL) ;; *) fail "usage: cluster.sh restart-apiserver TERM|KILL" ;; esac
    alive kube-apiserver || fail "kube-apiserver is not running: bash tools/kube-cluster/cluster.sh start"
    pid=$(pid_of kube-apiserver)
    kill -"$signal" "$pid"
    if [ "$signal" = TERM ]; then
      # A graceful stop: kube-apiserver stops listening at once, then drains what it serves (open
      # watches and log follows, up to its 60 s shutdown timeout). The new one starts as soon as the
      # port is free and takes the new connections while the old one drains, as an HA apiserver's
      # replacement would. Waiting for the old one to exit first kept the API away for over a
      # minute: client-go's reflectors back off up to 30 s (doubled by jitter) while it is away, and
      # kube-scheduler then bound no new pod for 50-70 s after the restart.
      for ((i = 0; i < 240; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
      done
      # `stop` stops it too if it still drains then.
      kill -0 "$pid" 2>/dev/null && echo "$pid" >"$run/kube-apiserver-draining.pid"
    else
      # A killed one is gone at once.
      for ((i = 0; i < 240; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$run/kube-apiserver.pid"
    start_apiserver
    say "kube-apiserver restarted after SIG$signal (pid $(pid_of kube-apiserver))"
    ;;
  import)
    shift
    [ $# -gt 0 ] || fail "usage: cluster.sh import IMAGE… (images of the local Docker engine)"
    alive containerd || fail "the cluster is not running: bash tools/kube-cluster/cluster.sh start"
    import_images "$@"
    ;;
  env) echo "KUBECONFIG=$test_kubeconfig" ;;
  *) echo "usage: bash tools/kube-cluster/cluster.sh start|stop|status|running|restart-apiserver|import|env" >&2; exit 2 ;;
esac
