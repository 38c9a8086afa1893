#!/usr/bin/env bash
# mpi_netns.sh STRATA SOURCE_DIR - data-parallel training across a network:
# two ranks on two "hosts" (network namespaces joined by a veth pair,
# scripts/netns_cluster.sh), OpenMPI over TCP only, each with store
# directories of its own (--store with %r), end with the weights and losses
# of one process, as over shared memory. Needs root (ip netns), as CI has.
. "$(dirname "$0")/common.bash" "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}fast_unwind_on_malloc=0"
cluster="$SRC/scripts/netns_cluster.sh"
prefix="stt$$"   # this test's namespaces, removed at the end
trap '"$cluster" down "$prefix"; chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

"$PY" - "$tmp/tokens.bin" <<'PY'
import random, struct, sys
random.seed(3)
open(sys.argv[1], "wb").write(struct.pack("<%dH" % 20000, *[random.randrange(97) for _ in range(20000)]))
PY
model=(--n-layer 2 --n-head 2 --d-model 32 --vocab 97 --seq 16 --batch 4 --micro-batch 1 --steps 4
       --eval-every 2 --eval-batches 2 --data "$tmp/tokens.bin" --offload weights,optim,acts)

check "two hosts: namespaces up" "$cluster" up "$prefix"
"$STRATA" train "${model[@]}" --run-dir "$tmp/one" >"$tmp/one.out" 2>&1
check "one process trains (the reference)" test $? -eq 0
timeout 120 "$cluster" mpirun "$prefix" -x OMP_NUM_THREADS -x ASAN_OPTIONS "$STRATA" train "${model[@]}" \
  --run-dir "$tmp/net" --store "$tmp/host%r/store" >"$tmp/net.out" 2>&1
check "two ranks on two hosts over TCP train" test $? -eq 0 -a -s "$tmp/net/model.safetensors"
check "each host's rank has its own store" test -s "$tmp/host0/store/strata-store.manifest" \
  -a -s "$tmp/host1/store/strata-store.manifest"
check "the ranks sent their collectives to each other" grep -q "^ranks: 2; .* sent [1-9]" "$tmp/net.out"
check "two hosts: the weights and losses of one process" "$PY" "$SRC/tests/cli/same_run.py" "$tmp/net" "$tmp/one"
finish
