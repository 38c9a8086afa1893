#!/usr/bin/env bash
# omp_wait.sh - what OpenMP's wait policy costs the executor: strata's own
# default (passive: a thread waiting for the next parallel region sleeps; set
# in src/cli/main.c) against libgomp's (spin some 300k turns first,
# GOMP_SPINCOUNT=300000), on gpt2-350m, mixed precision, 1 x 128 tokens, with
# the optimizer's state in memory, on the SSD, and split as issue 13's
# benchmark splits it at half the state; plus the in-memory trainer and a
# small model (gpt2-mini, 1 x 64), whose parallel regions are short.
#
#   bench/omp_wait.sh [STRATA] [OUT_DIR] [STEPS] [ROUNDS]
#   defaults: build/strata bench/results/omp_wait 5 2
#
# This machine's compute drifts by several percent within minutes, so the
# two policies run back to back, alternating, ROUNDS times per
# configuration, and each pair gives a ratio (passive / spinning: below 1,
# passive is faster). Step time: the mean of steps 2..STEPS.
set -euo pipefail
STRATA=${1:-build/strata}
OUT=${2:-bench/results/omp_wait}
STEPS=${3:-5}
ROUNDS=${4:-2}
DATA=data/corpus-gpt2
PY=/usr/bin/python3
HELP="$PY $(dirname "$0")/placement_sweep.py"
# name | model seq | flags
CONFIGS=(
    "in-memory|gpt2-350m 128|--schedule vertical --offload none"
    "optim-ssd|gpt2-350m 128|--schedule vertical --offload optim"
    "optim0.64-grads0.92|gpt2-350m 128|--schedule vertical --offload optim=0.64,grads=0.92"
    "memory-trainer|gpt2-350m 128|--schedule memory"
    "mini-memory-trainer|gpt2-mini 64|--schedule memory"
)

[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build first)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no dataset at $DATA: run scripts/demo.sh or scripts/make_corpus.sh + strata prepare" >&2; exit 1; }
[ "$STEPS" -ge 2 ] || { echo "STEPS must be at least 2 (step 1 is left out)" >&2; exit 1; }
mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

run() {   # NAME POLICY MODEL SEQ FLAGS...
    local name=$1 policy=$2 model=$3 seq=$4; shift 4
    local dir="$OUT/run-$name-$policy" env=()
    [ "$policy" = spin ] && env=(GOMP_SPINCOUNT=300000)
    env "${env[@]}" "$STRATA" train --model "$model" --seq "$seq" --data "$DATA" --batch 1 --micro-batch 1 \
        --steps "$STEPS" --precision mixed --clip 0 --eval-batches 1 --eval-every 0 --alpha 0 "$@" \
        --run-dir "$dir" --overwrite </dev/null >"$dir.log" 2>&1 ||
        { echo "run $name ($policy) failed:" >&2; tail -5 "$dir.log" >&2; exit 1; }
    rm -rf "$dir/store" "$dir/model.safetensors"
    $HELP steptime "$dir"
}

{
    echo "OpenMP wait policy: passive (strata's default) against spinning first (libgomp's default, GOMP_SPINCOUNT=300000); batch 1, mixed, clipping off, alpha 0; step time = mean of steps 2..$STEPS; $ROUNDS rounds, the two policies back to back"
    echo
    echo "| configuration | model, tokens | flags | passive s | spinning s | passive / spinning per round |"
    echo "|---|---|---|---|---|---|"
} >"$OUT/omp_wait.md"
started=$SECONDS
for cfg in "${CONFIGS[@]}"; do
    IFS='|' read -r name shape flags <<<"$cfg"
    set -- $shape
    model=$1 seq=$2
    p=() s=() r=()
    for ((i = 0; i < ROUNDS; i++)); do
        # the order alternates too, so that neither policy always runs first
        if ((i % 2 == 0)); then
            a=$(run "$name" passive "$model" "$seq" $flags); b=$(run "$name" spin "$model" "$seq" $flags)
        else
            b=$(run "$name" spin "$model" "$seq" $flags); a=$(run "$name" passive "$model" "$seq" $flags)
        fi
        p+=("$a"); s+=("$b"); r+=("$($PY -c "print(f'{$a/$b:.3f}')")")
        log "$name round $((i + 1)): passive $a s, spinning $b s"
    done
    echo "| $name | $model, 1 x $seq | \`$flags\` | ${p[*]} | ${s[*]} | ${r[*]} |" >>"$OUT/omp_wait.md"
done
echo "bench: $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s" >>"$OUT/omp_wait.md"
cat "$OUT/omp_wait.md"
