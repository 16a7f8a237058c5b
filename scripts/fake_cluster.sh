#!/usr/bin/env bash
# A cluster on one machine: K "nodes", each a network + UTS namespace with its
# own host name, joined by veth links to a bridge in a switch namespace, with
# addresses (192.0.2.0/24) that exist only inside those namespaces. Nothing is
# sent off the machine. Needs root and iproute2 (ip netns, veth, bridge; tc for
# a slow link).
#
#   fake_cluster.sh run [-n NODES] [-r RANKS_PER_NODE] [-p PREFIX] -- CMD...
#       creates the cluster, runs `mpiexec ... CMD` across it from node 0 (as a
#       job script runs mpiexec on the first node of its allocation), tears the
#       cluster down (also after a failure or a signal) and exits with
#       mpiexec's status. Ranks talk over TCP between nodes (UCX_TLS=tcp,self)
#       and through MPICH's shared memory within a node.
#   fake_cluster.sh up [-n NODES] [-p PREFIX]     create and leave running
#   fake_cluster.sh exec [-p PREFIX] NODE -- CMD  run CMD as NODE (node0, ...)
#   fake_cluster.sh mpiexec [-n N] [-r R | --np TOTAL] [-p PREFIX] -- CMD
#       mpiexec across a cluster made by `up` (no teardown); --np spreads
#       TOTAL ranks evenly over at most N nodes (1 -> node0; 4 on 2 -> 2 + 2),
#       as jobs/scale.sh's LAUNCHER template wants: --np {n}
#   fake_cluster.sh down [-p PREFIX]              end every process, remove all
#   fake_cluster.sh pids [-p PREFIX] NODE         processes running on NODE
#   fake_cluster.sh check [-p PREFIX]             exit 0 when the cluster can be made here
# Faults (on a cluster made by `up`):
#   partition NODE | heal NODE    link down / up (the node's ranks keep running)
#   freeze NODE | thaw NODE       SIGSTOP / SIGCONT every process on the node
#   crash NODE                    SIGKILL every process on the node
#   slow NODE RATE                tc tbf on the node's link (e.g. 2mbit)
#
# PREFIX (default "lsc") names the namespaces (PREFIX-sw, PREFIX-node0, ...)
# so that two clusters can exist at once; node host names are `node0`...
set -euo pipefail

prefix=${FAKE_CLUSTER_PREFIX:-lsc}
nodes=2
ranks=1
total=""
here=$(cd "$(dirname "$0")" && pwd)

die() {
  echo "fake_cluster: $*" >&2
  exit 2
}

parse_options() {
  rest=()
  while [ $# -gt 0 ]; do
    case "$1" in
      -n) nodes=$2; shift 2 ;;
      -r) ranks=$2; shift 2 ;;
      --np) total=$2; shift 2 ;;
      -p) prefix=$2; shift 2 ;;
      --) shift; rest+=("$@"); break ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  [[ "$nodes" =~ ^[1-9][0-9]?$ ]] || die "-n wants 1-99 nodes, got '$nodes'"
  [[ "$ranks" =~ ^[1-9][0-9]?$ ]] || die "-r wants 1-99 ranks per node, got '$ranks'"
  [[ "$prefix" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "-p wants a short lower-case name, got '$prefix'"
  if [ -n "$total" ]; then
    [[ "$total" =~ ^[1-9][0-9]{0,3}$ ]] || die "--np wants 1-9999 ranks, got '$total'"
    [ "$total" -lt "$nodes" ] && nodes=$total
    ranks=$(((total + nodes - 1) / nodes))
  fi
}

switch_ns() { echo "$prefix-sw"; }
node_ns() { echo "$prefix-$1"; }
node_address() { echo "192.0.2.$((10 + ${1#node}))"; }

existing_nodes() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-node[0-9]+$" | sed "s/^$prefix-//" |
    sort -V || true
}

need_node() {
  [ -e "/run/netns/$(node_ns "$1")" ] ||
    die "no node '$1' in cluster '$prefix' (nodes: $(existing_nodes | tr '\n' ' '))"
}

check() {
  [ "$(id -u)" -eq 0 ] || { echo "fake_cluster: needs root (network namespaces)"; return 1; }
  command -v ip >/dev/null || { echo "fake_cluster: needs iproute2 (ip)"; return 1; }
  command -v unshare >/dev/null || { echo "fake_cluster: needs unshare (util-linux)"; return 1; }
  local probe="$prefix-probe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "fake_cluster: network namespaces are not allowed here (ip netns add failed)"
    return 1
  fi
  local ok=0
  ip -n "$probe" link add b0 type bridge 2>/dev/null || ok=1
  ip -n "$probe" link add v0 type veth peer name v1 2>/dev/null || ok=1
  ip netns del "$probe"
  [ $ok -eq 0 ] || { echo "fake_cluster: veth or bridge links are not allowed here"; return 1; }
  return 0
}

up() {
  [ -z "$(existing_nodes)" ] || die "cluster '$prefix' exists already: '$0 down -p $prefix' first"
  local sw
  sw=$(switch_ns)
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local hosts="127.0.0.1 localhost"$'\n'
  for ((i = 0; i < nodes; i++)); do
    hosts+="$(node_address "node$i") node$i"$'\n'
  done
  for ((i = 0; i < nodes; i++)); do
    local node="node$i" ns
    ns=$(node_ns "$node")
    ip netns add "$ns"
    # `ip netns exec` bind-mounts /etc/netns/NS/* over /etc: each node
    # resolves the others' names, and only inside the cluster.
    mkdir -p "/etc/netns/$ns"
    printf '%s' "$hosts" >"/etc/netns/$ns/hosts"
    echo "$node" >"/etc/netns/$ns/hostname"
    ip -n "$ns" link set lo up
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$ns" addr add "$(node_address "$node")/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

# Runs "$@" as NODE: in its network namespace, with its host name.
node_exec() {
  local node=$1
  shift
  need_node "$node"
  # shellcheck disable=SC2016 # expanded by the node's shell
  exec ip netns exec "$(node_ns "$node")" unshare --uts -- \
    sh -c 'hostname "$0" && exec "$@"' "$node" "$@"
}

node_pids() {
  ip netns pids "$(node_ns "$1")" 2>/dev/null || true
}

signal_node() {
  local signal=$1 node=$2 pid
  need_node "$node"
  for pid in $(node_pids "$node"); do
    kill "-$signal" "$pid" 2>/dev/null || true
  done
}

down() {
  local node ns
  for node in $(existing_nodes); do
    signal_node KILL "$node"
  done
  for node in $(existing_nodes); do
    ns=$(node_ns "$node")
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  ip netns del "$(switch_ns)" 2>/dev/null || true
}

# mpiexec from node 0 across the cluster; proxies start through the
# launcher wrapper (this script's `launch`), which hydra calls like ssh:
# WRAPPER [ssh options] HOST COMMAND-STRING.
cluster_mpiexec() {
  [ ${#rest[@]} -gt 0 ] || die "mpiexec needs a command after --"
  local hosts="" i
  for ((i = 0; i < nodes; i++)); do
    hosts+="${hosts:+,}node$i:$ranks"
  done
  local np=${total:-$((nodes * ranks))}
  (node_exec node0 env FAKE_CLUSTER_PREFIX="$prefix" UCX_TLS="${UCX_TLS:-tcp,self}" \
    UCX_NET_DEVICES="${UCX_NET_DEVICES:-eth0}" \
    mpiexec -launcher ssh -launcher-exec "$here/fake_cluster.sh" -iface eth0 \
    -hosts "$hosts" -n "$np" -genvlist UCX_TLS,UCX_NET_DEVICES,FAKE_CLUSTER_PREFIX \
    "${rest[@]}")
}

launch() {
  # Called by hydra as an ssh stand-in: skip ssh options, then HOST CMD.
  while [ $# -gt 0 ] && [[ "$1" == -* ]]; do shift; done
  [ $# -ge 2 ] || die "launch: want HOST COMMAND, got '$*'"
  local node=$1
  shift
  node_exec "$node" sh -c "$*"
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  check) check ;;
  up) parse_options "$@"; up ;;
  down) parse_options "$@"; down ;;
  exec)
    parse_options "$@"
    [ ${#rest[@]} -ge 2 ] || die "exec wants NODE -- CMD"
    node_exec "${rest[@]}"
    ;;
  pids) parse_options "$@"; node_pids "${rest[0]:?pids wants NODE}" ;;
  mpiexec) parse_options "$@"; cluster_mpiexec ;;
  run)
    parse_options "$@"
    check >/dev/null || die "$(check)"
    down
    trap down EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    up
    status=0
    cluster_mpiexec || status=$?
    exit $status
    ;;
  partition | heal)
    parse_options "$@"
    node=${rest[0]:?$command wants NODE}
    need_node "$node"
    state=down
    [ "$command" = heal ] && state=up
    ip -n "$(switch_ns)" link set "p${node#node}" "$state"
    if [ "$state" = up ]; then
      # Neighbours that went unanswered during the partition are marked
      # failed ("No route to host" for a while): forget them.
      for other in $(existing_nodes); do ip -n "$(node_ns "$other")" neigh flush all; done
    fi
    ;;
  freeze) parse_options "$@"; signal_node STOP "${rest[0]:?freeze wants NODE}" ;;
  thaw) parse_options "$@"; signal_node CONT "${rest[0]:?thaw wants NODE}" ;;
  crash) parse_options "$@"; signal_node KILL "${rest[0]:?crash wants NODE}" ;;
  slow)
    parse_options "$@"
    node=${rest[0]:?slow wants NODE RATE}
    rate=${rest[1]:?slow wants NODE RATE}
    need_node "$node"
    ip netns exec "$(node_ns "$node")" tc qdisc replace dev eth0 root tbf rate "$rate" \
      burst 32kbit latency 400ms
    ;;
  *)
    # hydra's ssh launcher: anything else is a launch (ssh options first).
    if [ -n "$command" ] && { [[ "$command" == -* ]] || [ $# -gt 0 ]; }; then
      launch "$command" "$@"
    else
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
      exit 2
    fi
    ;;
esac
