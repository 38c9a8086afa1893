#!/usr/bin/env bash
# netns_cluster.sh - two "hosts" on this machine for testing runs that cross a
# network: network namespaces PREFIX-a (10.77.0.1) and PREFIX-b (10.77.0.2),
# joined by a veth pair and nothing else, so MPI traffic between them goes
# over TCP through a network device, not shared memory. Needs root (or
# CAP_NET_ADMIN).
#
#   scripts/netns_cluster.sh up [PREFIX]          create them (PREFIX: strata)
#   scripts/netns_cluster.sh down [PREFIX]        remove them
#   scripts/netns_cluster.sh mpirun [PREFIX] ARGS run `mpirun ARGS` across them:
#       one slot per host, mpirun in PREFIX-a, OpenMPI's daemon on PREFIX-b
#       started by this script's rsh mode instead of ssh, TCP only, on the
#       veth addresses. Ranks fill host a first (rank 0 on 10.77.0.1).
#
# On real hosts the same run is mpirun --hostfile with one line per host
# (docs/ARCHITECTURE.md, data parallelism); this script only stands in for
# the hosts.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
A=10.77.0.1
B=10.77.0.2
NET=10.77.0.0/24

ns_of() {   # the namespace that holds an address
  case "$2" in
    "$A") echo "$1-a" ;;
    "$B") echo "$1-b" ;;
    *) echo "netns_cluster: no namespace holds $2" >&2; return 1 ;;
  esac
}

cmd="${1:-}"
shift || true
case "$cmd" in
  up)
    p="${1:-strata}"
    if ip netns list | grep -q "^$p-a\b"; then
      echo "netns_cluster: $p-a exists (scripts/netns_cluster.sh down $p first)" >&2
      exit 1
    fi
    ip netns add "$p-a"
    ip netns add "$p-b"
    ip link add "$p-va" type veth peer name "$p-vb"
    ip link set "$p-va" netns "$p-a"
    ip link set "$p-vb" netns "$p-b"
    ip -n "$p-a" addr add "$A/24" dev "$p-va"
    ip -n "$p-b" addr add "$B/24" dev "$p-vb"
    for side in a b; do
      ip -n "$p-$side" link set lo up
      ip -n "$p-$side" link set "$p-v$side" up
    done
    ;;
  down)
    p="${1:-strata}"
    ip netns del "$p-a" 2>/dev/null || true
    ip netns del "$p-b" 2>/dev/null || true   # the veth pair goes with its namespaces
    ;;
  rsh)   # OpenMPI's launch agent: rsh PREFIX HOST COMMAND...
    p="$1"
    host="$2"
    shift 2
    ns="$(ns_of "$p" "$host")"
    exec ip netns exec "$ns" /bin/sh -c "$*"
    ;;
  mpirun)
    p="strata"
    if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && ip netns list | grep -q "^$1-a\b"; then
      p="$1"
      shift
    fi
    # the agent is given as one string: mpirun appends the host and the command
    exec ip netns exec "$p-a" mpirun --host "$A:1,$B:1" \
      --mca plm_rsh_agent "$here/netns_cluster.sh rsh $p" \
      --mca oob_tcp_if_include "$NET" --mca btl tcp,self --mca btl_tcp_if_include "$NET" "$@"
    ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
