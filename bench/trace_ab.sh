#!/bin/bash
# trace_ab.sh - placements of one model run alternated in rounds, each traced,
# beside the simulator's prediction and timeline of the same configuration:
# which tasks slow down beside what, and how much the machine drifts between
# rounds minutes apart (issue 13).
#
#   bench/trace_ab.sh STRATA HW_JSON OUT_DIR [ROUNDS]
#
# gpt2-350m, mixed precision, 1 x 64 tokens, clipping off, vertical, alpha 0,
# 5 steps a run (env: MODEL, SEQ, STEPS, DATA), ROUNDS rounds (2) of three
# placements at half the state's budget (3050 MiB): the planner's split
# (optim=0.64,grads=0.88, 6 gradient buffers), the best binary one there
# (optim,grads, 6 buffers), and everything in memory. Each run's trace,
# log and metrics stay in OUT_DIR; the report (OUT_DIR/trace_ab.txt) has
# each run's steps after the first, its median step, the prediction on
# HW_JSON and bench/trace_tasks.py's line for the run and for the
# simulator's timeline. With BASE=another strata build, each placement runs
# with BASE first and then STRATA in every round (NAME-base-rN, NAME-rN):
# the two builds side by side, minutes apart at most.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,19p "$0"; exit 2; }
STRATA=$1 HW=$2 OUT=$3 ROUNDS=${4:-2}
MODEL=${MODEL:-gpt2-350m} SEQ=${SEQ:-64} STEPS=${STEPS:-5} DATA=${DATA:-data/corpus-gpt2}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
SHAPE=(--model "$MODEL" --seq "$SEQ" --precision mixed --clip 0 --micro-batch 1 --schedule vertical --alpha 0)
PLACEMENTS=("split|--grad-buffers 6 --offload optim=0.64,grads=0.88 --mem-host 3050M"
            "binary|--grad-buffers 6 --offload optim,grads --mem-host 3050M"
            "memory|--offload none")
report=$OUT/trace_ab.txt
: >"$report"
for p in "${PLACEMENTS[@]}"; do
    name=${p%%|*} flags=${p#*|}
    # shellcheck disable=SC2086  # the flags split into words
    "$STRATA" simulate --hw "$HW" "${SHAPE[@]}" ${flags/--mem-host*/} --trace "$OUT/sim-$name.json" --json \
        >"$OUT/sim-$name.out"
done
BUILDS=("$STRATA|")
[ -z "${BASE:-}" ] || BUILDS=("$BASE|-base" "$STRATA|")
for ((r = 1; r <= ROUNDS; r++)); do
    for p in "${PLACEMENTS[@]}"; do
      for b in "${BUILDS[@]}"; do
        name=${p%%|*}${b#*|} flags=${p#*|} exe=${b%%|*}
        run=$OUT/$name-r$r
        # shellcheck disable=SC2086
        "$exe" train "${SHAPE[@]}" --data "$DATA" --batch 1 --steps "$STEPS" --eval-batches 1 --eval-every 0 \
            --run-dir "$run" --overwrite --trace "$run.trace.json" $flags </dev/null >"$run.log" 2>&1
        rm -rf "$run/store" "$run/model.safetensors"
        python3 - "$run/metrics.jsonl" "$OUT/sim-${p%%|*}.out" "$name-r$r" "$(date -u +%H:%M:%S)" >>"$report" <<'EOF'
import json, statistics, sys
steps = [json.loads(l)["step_s"] for l in open(sys.argv[1]) if '"step_s"' in l][1:]
pred = json.load(open(sys.argv[2]))["iter_s"]
m = statistics.median(steps)
print(f"{sys.argv[3]} (ended {sys.argv[4]} UTC): steps 2.. {', '.join(f'{t:.2f}' for t in steps)}; "
      f"median {m:.3f} s, predicted {pred:.3f} ({100 * (pred - m) / m:+.1f}%)")
EOF
        tail -1 "$report"
      done
    done
done
python3 "$HERE/trace_tasks.py" "$OUT"/*-r*.trace.json "$OUT"/sim-*.json | tee -a "$report"
