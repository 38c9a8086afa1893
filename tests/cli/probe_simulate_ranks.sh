#!/usr/bin/env bash
# probe_simulate_ranks.sh STRATA SOURCE_DIR - `strata probe` under mpirun
# with 2 ranks also measures the ranks (issue 14): rank 0 alone prints and
# writes a description whose cluster says 1 node of 2 ranks with a shared-
# memory rate; `strata simulate` predicts 2 ranks from it by default and 1
# with --ranks 1; the cluster's refusals name the field or the flag.
. "$(dirname "$0")/common.bash" "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# sanitizer builds: whole stacks, so that tests/lsan.supp matches what OpenMPI leaks
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}fast_unwind_on_malloc=0"
MPIRUN=(mpirun --oversubscribe --bind-to none --timeout 100)
small=(--model gpt2-tiny --micro-batch 2 --seq 32 --reps 1)

"${MPIRUN[@]}" -np 2 "$STRATA" probe "${small[@]}" --out "$tmp/hw.json" >"$tmp/probe.out" 2>"$tmp/probe.err"
check "probe under mpirun -np 2 succeeds" test $? -eq 0
check "probe: one summary, from rank 0" test "$(grep -c '^compute: ' "$tmp/probe.out")" -eq 1
check "probe: the ranks' line" grep -Eq "^ranks: 2 on 1 node; each rank received [0-9.e+-]+ GB/s in an all-gather" "$tmp/probe.out"
check "probe: the cluster written" "$PY" -c "
import json, sys
d = json.load(open('$tmp/hw.json'))
c, p = d['cluster'], d['probe']
sys.exit(0 if c['nodes'] == 1 and c['ranks_per_node'] == 2 and c['shm_gbps'] > 0 and c['shm_latency_s'] > 0
         and p['ranks_allgather_gbps'] > 0 and p['ranks_reduce_scatter_gbps'] > 0 else 1)"

sim=(simulate --hw "$tmp/hw.json" --model gpt2-tiny --seq 32 --micro-batch 2 --global-batch 8 --json)
"$STRATA" "${sim[@]}" >"$tmp/two.json" 2>"$tmp/two.err"
check "simulate: the description's 2 ranks" "$PY" -c "
import json, sys
d = json.load(open('$tmp/two.json'))
sys.exit(0 if d['ranks'] == 2 and d['grad_accum'] == 2 and d['global_batch'] == 8 and d['comm_sent'] > 0 else 1)"
"$STRATA" "${sim[@]}" --ranks 1 >"$tmp/one.json" 2>"$tmp/one.err"
check "simulate --ranks 1: one process" "$PY" -c "
import json, sys
d = json.load(open('$tmp/one.json'))
sys.exit(0 if d['ranks'] == 1 and d['grad_accum'] == 4 and d['comm_sent'] == 0 else 1)"
check "simulate: the ranks' lines in text" bash -c "'$STRATA' simulate --hw '$tmp/hw.json' --model gpt2-tiny --seq 32 \
  --micro-batch 2 --global-batch 8 | grep -q '^ranks per iteration: rank 0 sends'"
expect_rc "simulate --ranks on a gpu description" 2 "ranks are modelled on a cpu backend" \
  "$STRATA" simulate --hw "$SRC/configs/hw/a100-80g-x4.json" --model gpt2-tiny --ranks 2
expect_rc "simulate --ranks that do not sit on the nodes" 2 "20 ranks on the description.s 8 nodes" \
  "$STRATA" simulate --hw "$SRC/configs/hw/cpu-2s32c-x8.json" --model gpt2-tiny --ranks 20 --seq 32 --micro-batch 1
expect_rc "simulate: a global batch the ranks do not divide" 2 "not a multiple of 16 ranks" \
  "$STRATA" simulate --hw "$SRC/configs/hw/cpu-2s32c-x8.json" --model gpt2-tiny --seq 32 --micro-batch 1 --global-batch 8
"$PY" -c "
import json
d = json.load(open('$tmp/hw.json'))
d['cluster']['ranks_per_node'] = 4
d['cluster']['shm_gbps'] = 0
json.dump(d, open('$tmp/bad.json', 'w'))"
expect_fail "simulate: a cluster without its rate names the field" "cluster.shm_gbps: must be > 0" \
  "$STRATA" simulate --hw "$tmp/bad.json" --model gpt2-tiny --seq 32
finish
