#!/usr/bin/env bash
# placement_sweep.sh - issue 13's benchmark: fractional against binary
# placement over a host-memory budget sweep. gpt2-350m, mixed precision, no
# clipping, a batch where the SSD matters (1 x 128 tokens); host budgets
# from the smallest that plans (everything on the SSD) to the whole state in
# memory, POINTS evenly spaced plus half the state (the target point).
#
#   bench/placement_sweep.sh [STRATA] [OUT_DIR] [STEPS]
#   defaults: build/strata bench/results/placement 4
#   env: POINTS (7) budgets evenly spaced; ROUNDS (3) rounds of every run
#   (the median counts), HALF_ROUNDS (5) at half the state; RETRIES (1)
#   attempts more of a run whose drive changed speed under it by more than
#   HELD (0.05) of its predicted time;
#   MODEL (gpt2-350m) and SEQ (128) to try the script on a small model
#   (MODEL=gpt2-mini SEQ=64 POINTS=5);
#   PROBE_TRIES (3) full probes at most, the next when the one before's check
#   of its own trial on the drives (the simulator's step against the
#   executor's) is off by more than PROBE_CHECK (10) percent: a probe taken
#   in a slow minute sets every prediction off (docs/BENCHMARKS.md);
#   START_PROBES (2) full probes before the runs, the in-memory trainer run
#   between the first and the second: the one whose description simulates
#   the whole state in memory faster is the sweep's (a start probe put
#   compute 12-22% slower than the runs went in 6 of 15 sweeps, the probe at
#   the end within 8% in 5 of them: docs/BENCHMARKS.md, "The start probe
#   against the end probe"; the machine's stalls only slow a probe);
#   PROBE_SIZE (256M) the probe's test file per disk measurement; RESUME=1 keeps the
#   runs (and the first disk measurement, so that the plans come out the
#   same) that finished in OUT_DIR before and runs the rest.
#
# Per budget (every executor run gets --mem-host = the budget, so that the
# executor enforces it too):
#   - binary: strata plan --whole (each kind of state all in memory or all
#     on the SSD), its first two distinct placements in rank order, each with
#     the schedule and alpha ranked first for it, both measured; the best
#     binary placement is the faster measured one;
#   - fractional: strata plan's best (kinds may be split, optim=0.56); when
#     that is a whole placement already measured it is not run again;
#   - for every run the simulator's prediction: strata simulate --json with
#     the same flags, against this machine measured at the start (compute at
#     the sweep's shape) with the disk re-measured right before the run (and,
#     for comparison, against the description measured at the end, and
#     against the one before the run with the disk's rates replaced by those
#     the run's steps after the first saw while its reads and writes were in
#     flight: the model's error without the disk's drift).
# A run whose two predictions (the disk before it, the disk it saw) differ
# by more than HELD ran on another drive than the one described: it is set
# aside (OUT/setaside/) and measured again, RETRIES times at most, and the
# report says how many were and what the check gives on the first attempts.
# Then ROUNDS - 1 more rounds of every run at the budget (HALF_ROUNDS - 1 at
# half the state), alternated in the same order: the budget's row takes
# each placement's median (the best binary placement is the one with the
# smaller median), the curve the fractional placement's, and the prediction
# check each placement's median measured and predicted time (each round
# alone is reported too). The speed-up at half the state compares rounds at
# one drive speed: every pair of a binary placement's round and the
# fractional placement's whose drives read within 10% of each other while
# busy, the median of their ratios, the smaller of the two binary
# placements'; the ratio of all rounds' medians is reported beside it.
# Once, between the start probes: the in-memory trainer (--schedule
# memory), the bound.
# Step time: the mean of steps 2..STEPS of metrics.jsonl (the first
# iteration warms buffers up). The machine is probed (strata probe at the
# sweep's model and batch: compute, AdamW, contention, the disk) at the
# start START_PROBES times into OUT_DIR/hw-startN.json (the faster one
# copied to OUT_DIR/hw.json) and at the end into OUT_DIR/hw-end.json, and
# the disk again (strata probe --update) before each run: this machine's
# compute and disk rates drift by tens of percent within minutes.
#
# Output: OUT_DIR/placement_sweep.md (also printed), one row per budget and
# the issue's three target checks (with the machine's own spread between a
# placement's rounds: the ceiling for the prediction check), then every run; raw logs in
# OUT_DIR/run-*.log, plans in OUT_DIR/plan-*.txt, predictions in
# OUT_DIR/run-*.sim-{start,end,run,plan}.json (run: against OUT_DIR/run-*.hw-run.json,
# the run's own disk rates; plan: against OUT_DIR/hw.json, the description
# strata plan ranked with, to check that both give the same times). Stores
# and weights are deleted after each run.
set -euo pipefail
STRATA=${1:-build/strata}
OUT=${2:-bench/results/placement}
STEPS=${3:-4}
POINTS=${POINTS:-7}
MODEL=${MODEL:-gpt2-350m}
SEQ=${SEQ:-128}
PROBE_SIZE=${PROBE_SIZE:-256M}
PROBE_TRIES=${PROBE_TRIES:-3}
PROBE_CHECK=${PROBE_CHECK:-10}
START_PROBES=${START_PROBES:-2}
BINARY=2                       # binary placements measured per budget
ROUNDS=${ROUNDS:-3}            # rounds of every run
HALF_ROUNDS=${HALF_ROUNDS:-5}  # rounds of every run at half the state (the speed-up's point)
RETRIES=${RETRIES:-1}          # attempts more of a run whose drive changed speed under it
HELD=${HELD:-0.05}             # ... by this much of the predicted time
DATA=data/corpus-gpt2
PY=/usr/bin/python3
HELP="$PY $(dirname "$0")/placement_sweep.py"
SHAPE=(--model "$MODEL" --seq "$SEQ" --precision mixed --clip 0)

[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build first)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no dataset at $DATA: run scripts/demo.sh or scripts/make_corpus.sh + strata prepare" >&2; exit 1; }
[ "$STEPS" -ge 2 ] || { echo "STEPS must be at least 2 (step 1 is left out)" >&2; exit 1; }
[ "$START_PROBES" -ge 1 ] || { echo "START_PROBES must be at least 1" >&2; exit 1; }
mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
started=$SECONDS

# This machine now, into FILE: everything (no FROM), or the disk of FROM
# again (the rest of FROM kept).
probe() {
    local file=$1 from=${2:-}
    rm -rf "$OUT/probe"
    mkdir -p "$OUT/probe"
    if [ -z "$from" ]; then
        local try check rc=0
        for try in $(seq 1 "$PROBE_TRIES"); do
            log "probe: this machine at ${MODEL} 1 x ${SEQ} into $file"
            "$STRATA" probe --store "$OUT/probe" --size "$PROBE_SIZE" --model "$MODEL" --micro-batch 1 --seq "$SEQ" \
                --out "$file" >"$file.log" 2>&1 || { rc=1; break; }
            check=$($HELP trialcheck "$file.log")
            if [ -n "$check" ] && [ "$try" -lt "$PROBE_TRIES" ] &&
                awk -v c="$check" -v m="$PROBE_CHECK" 'BEGIN { exit !(c > m || c < -m) }'; then
                log "  its trial on the drives predicted ${check}% off the executor's: probing again"
                mv "$file.log" "$file.log.try$try"
                rm -rf "$OUT/probe"
                mkdir -p "$OUT/probe"
            else
                break
            fi
        done
        [ "$rc" = 0 ]
    else
        "$STRATA" probe --update "$from" --store "$OUT/probe" --size "$PROBE_SIZE" --out "$file" >"$file.log" 2>&1
    fi || { echo "probe failed:" >&2; tail -3 "$file.log" >&2; exit 1; }
    rm -rf "$OUT/probe"
}

# One training run; its log and metrics stay in $OUT/run-NAME, its store
# (as large as the model's state) and weights are deleted afterwards. A run that already
# finished in $OUT is kept (RESUME=1), and so is one this sweep ran already.
# A failed run is reported and the sweep goes on (the report says 'failed').
declare -A ran=()
failures=0
train() {
    local name=$1; shift
    [ -z "${ran[$name]:-}" ] || return 0
    ran[$name]=1
    if [ "${RESUME:-0}" = 1 ] && grep -q "^done:" "$OUT/run-$name.log" 2>/dev/null; then
        log "run $name: kept from before"
        return
    fi
    log "run $name"
    if ! "$STRATA" train "${SHAPE[@]}" --data "$DATA" --batch 1 --steps "$STEPS" --eval-batches 1 --eval-every 0 \
        --run-dir "$OUT/run-$name" --overwrite "$@" </dev/null >"$OUT/run-$name.log" 2>&1; then
        echo "run $name failed:" >&2
        tail -5 "$OUT/run-$name.log" >&2
        failures=$((failures + 1))
    else
        log "  $($HELP steptime "$OUT/run-$name") s per step (steps 2..$STEPS)"
    fi
    rm -rf "$OUT/run-$name/store" "$OUT/run-$name/model.safetensors"    # gpt2-350m: 1.4 GB a run
}

# strata simulate's prediction of a configuration against HW_FILE, into
# $OUT/run-NAME.sim-WHEN.json.
predict() {
    local name=$1 when=$2 hw=$3 sched=$4 mb=$5 alpha=$6 gbufs=$7 offload=$8
    "$STRATA" simulate --hw "$hw" "${SHAPE[@]}" --micro-batch "$mb" --schedule "$sched" --alpha "$alpha" \
        --grad-buffers "$gbufs" --offload "$offload" --json </dev/null >"$OUT/run-$name.sim-$when.json"
}

# A run's name: budget, schedule, alpha, gradient buffers when not the
# default, placement (weights=0.5,optim -> weights0.5_optim).
run_name() {
    local mib=$1 sched=$2 alpha=$3 gbufs=$4 offload=$5 more=
    offload=${offload//,/_}
    [ "$gbufs" = 3 ] || more="-g$gbufs"
    echo "b$mib-$sched-a$alpha$more-${offload//=/}"
}

if [ "${RESUME:-0}" = 1 ] && [ -s "$OUT/hw.json" ]; then
    log "probe: kept $OUT/hw.json from before"
else
    rm -rf "$OUT"/run-* "$OUT"/plan-* "$OUT/setaside" "$OUT"/hw-start*
    nones=()
    for n in $(seq 1 "$START_PROBES"); do
        probe "$OUT/hw-start$n.json"
        # the whole state in memory as this description simulates it: compute alone, no disk
        "$STRATA" simulate --hw "$OUT/hw-start$n.json" "${SHAPE[@]}" --micro-batch 1 --schedule horizontal \
            --offload none --json >"$OUT/hw-start$n.none.json"
        nones+=("$OUT/hw-start$n.none.json")
        log "  the whole state in memory on it: $($HELP json "$OUT/hw-start$n.none.json" iter_s) s"
        [ "$n" -lt "$START_PROBES" ] || break
        train memory --micro-batch 1 --schedule memory   # the bound, and the machine busy between the probes
    done
    start=$($HELP faster "${nones[@]}")
    cp "$OUT/hw-start$start.json" "$OUT/hw.json"
    cp "$OUT/hw-start$start.json.log" "$OUT/hw.json.log"
    log "  the sweep's description: start probe $start of $START_PROBES"
fi

# The whole state in memory: the host memory strata simulate budgets with
# everything in memory (the same for both schedules; the larger is taken).
whole=0
for sched in vertical horizontal; do
    "$STRATA" simulate --hw "$OUT/hw.json" "${SHAPE[@]}" --micro-batch 1 --schedule "$sched" --offload none \
        --json >"$OUT/whole-$sched.json"
    h=$($HELP json "$OUT/whole-$sched.json" memory.host)
    if [ "$h" -gt "$whole" ]; then whole=$h; fi
done
# The smallest budget: strata plan's smallest host share (it says so when
# nothing fits), rounded up to a MiB, raised a MiB at a time until plan fits.
plan() { "$STRATA" plan --hw "$OUT/hw.json" "${SHAPE[@]}" --global-batch 1 "$@"; }
if plan --mem-host 1M >"$OUT/plan-nothing.txt" 2>&1; then
    echo "strata plan found a configuration in 1 MiB of host memory; no smallest budget" >&2
    exit 1
fi
small=$($HELP smallest "$OUT/plan-nothing.txt")
tries=0
until plan --whole --mem-host "${small}M" >/dev/null 2>&1 && plan --mem-host "${small}M" >/dev/null 2>&1; do
    small=$((small + 1)) tries=$((tries + 1))
    [ "$tries" -le 64 ] || { echo "strata plan fits nothing up to ${small} MiB of host memory" >&2; exit 1; }
done
log "whole state in memory: $whole bytes; smallest budget that plans: $small MiB"
printf 'whole_bytes\t%s\nsmall_mib\t%s\nheld\t%s\nretries\t%s\n' "$whole" "$small" "$HELD" "$RETRIES" \
    >"$OUT/sweep.meta"

# One run at budget MIB with its predictions: the disk re-measured right
# before it, the run, and the prediction with the rates its drive showed.
# When those two predictions differ by more than HELD (the drive changed
# speed between its re-measurement and the run's steps, so the prediction
# described another machine than the one measured), the attempt is set
# aside in OUT/setaside/ (as run-NAME.tN: N the attempt) and the run measured
# again, at most RETRIES times; the last attempt counts whatever its drive
# did.
declare -A repeated=()
measure() {
    local mib=$1 sched=$2 mb=$3 alpha=$4 gbufs=$5 offload=$6 name=$7 try=0
    [ -z "${ran[$name]:-}" ] || return 0     # the fractional placement may be a binary one
    while [ -e "$OUT/setaside/run-$name.t$((try + 1)).log" ]; do try=$((try + 1)); done   # RESUME=1: set aside before
    for (( ; ; try++)); do
        if [ -z "${ran[$name]:-}" ] && ! { [ "${RESUME:-0}" = 1 ] && [ -s "$OUT/run-$name.hw.json" ]; }; then
            probe "$OUT/run-$name.hw.json" "$OUT/hw.json"
        fi
        predict "$name" start "$OUT/run-$name.hw.json" "$sched" "$mb" "$alpha" "$gbufs" "$offload"
        train "$name" --micro-batch "$mb" --schedule "$sched" --alpha "$alpha" --grad-buffers "$gbufs" \
            --offload "$offload" --mem-host "${mib}M"
        grep -q "^done:" "$OUT/run-$name.log" 2>/dev/null || return 0
        # the model alone: the same prediction with the disk's rates those the run itself saw
        $HELP runhw "$OUT/run-$name.hw.json" "$OUT/run-$name.log" "$OUT/run-$name.hw-run.json"
        predict "$name" run "$OUT/run-$name.hw-run.json" "$sched" "$mb" "$alpha" "$gbufs" "$offload"
        [ "$try" -lt "$RETRIES" ] || return 0
        $HELP held "$OUT/run-$name.sim-start.json" "$OUT/run-$name.sim-run.json" "$HELD" && return 0
        log "  the drive changed speed under run $name (its prediction on the re-measured disk and on the run's own" \
            "rates differ by more than $HELD): set aside, measured again"
        mkdir -p "$OUT/setaside"
        for f in "" .log .hw.json .hw.json.log .hw-run.json .sim-start.json .sim-run.json; do
            [ ! -e "$OUT/run-$name$f" ] || mv "$OUT/run-$name$f" "$OUT/setaside/run-$name.t$((try + 1))$f"
        done
        unset "ran[$name]"
    done
}

# The plans and the runs, budget by budget; OUT/sweep.tsv: budget MiB,
# half or -, role (binaryN, fractional, fractional-whole, or repeat: round N
# of run NAME is NAME-rN), run, schedule, micro-batch, alpha, gradient buffers,
# placement, the plan's seconds (its best line's) or -.
: >"$OUT/sweep.tsv"
while read -r mib half; do
    log "budget $mib MiB${half:+ (half the state)}"
    plan --whole --top 16 --mem-host "${mib}M" >"$OUT/plan-b$mib-whole.txt" 2>&1 ||
        { echo "strata plan --whole failed at $mib MiB:" >&2; tail -3 "$OUT/plan-b$mib-whole.txt" >&2; exit 1; }
    plan --top 16 --mem-host "${mib}M" >"$OUT/plan-b$mib.txt" 2>&1 ||
        { echo "strata plan failed at $mib MiB:" >&2; tail -3 "$OUT/plan-b$mib.txt" >&2; exit 1; }
    read -r _ _ _ _ _ whole_best_s < <($HELP best "$OUT/plan-b$mib-whole.txt")
    binaries=()
    i=0
    while read -r sched mb alpha gbufs offload; do
        i=$((i + 1))
        name=$(run_name "$mib" "$sched" "$alpha" "$gbufs" "$offload")
        binaries+=("$sched $mb $alpha $gbufs $offload $name")
        plan_s=-
        if [ "$i" = 1 ]; then plan_s=$whole_best_s; fi     # the plan prints seconds only for its best
        printf '%s\t%s\tbinary%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mib" "${half:--}" "$i" "$name" "$sched" "$mb" \
            "$alpha" "$gbufs" "$offload" "$plan_s" >>"$OUT/sweep.tsv"
    done < <($HELP placements "$OUT/plan-b$mib-whole.txt" "$BINARY")
    read -r sched mb alpha gbufs offload frac_s < <($HELP best "$OUT/plan-b$mib.txt")
    name=$(run_name "$mib" "$sched" "$alpha" "$gbufs" "$offload")
    role=fractional
    [[ $offload == *=* ]] || { role=fractional-whole; log "  plan's best at $mib MiB is a whole placement: $offload"; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mib" "${half:--}" "$role" "$name" "$sched" "$mb" "$alpha" \
        "$gbufs" "$offload" "$frac_s" >>"$OUT/sweep.tsv"
    binaries+=("$sched $mb $alpha $gbufs $offload $name")
    for b in "${binaries[@]}"; do measure "$mib" $b; done
    # more rounds, alternated, so that a drive slow (or fast) for one run
    # decides no point alone (neither the curve, the speed-up nor a
    # prediction): the report takes each placement's median
    rounds=$ROUNDS
    [ -z "$half" ] || rounds=$HALF_ROUNDS
    for ((round = 2; round <= rounds; round++)); do
        for b in "${binaries[@]}"; do
            read -r sched mb alpha gbufs offload name <<<"$b"
            [ -z "${repeated[$name-r$round]:-}" ] || continue   # the fractional placement may be a binary one
            repeated[$name-r$round]=1
            printf '%s\t%s\trepeat\t%s\t%s\t%s\t%s\t%s\t%s\t-\n' "$mib" "${half:--}" "$name-r$round" "$sched" "$mb" \
                "$alpha" "$gbufs" "$offload" >>"$OUT/sweep.tsv"
            measure "$mib" "$sched" "$mb" "$alpha" "$gbufs" "$offload" "$name-r$round"
        done
    done
done < <($HELP budgets "$small" "$whole" "$POINTS")

train memory --micro-batch 1 --schedule memory   # when the start probes did not (one, or RESUME=1)

probe "$OUT/hw-end.json"
while IFS=$'\t' read -r mib half role name sched mb alpha gbufs offload plan_s; do
    predict "$name" end "$OUT/hw-end.json" "$sched" "$mb" "$alpha" "$gbufs" "$offload"
    predict "$name" plan "$OUT/hw.json" "$sched" "$mb" "$alpha" "$gbufs" "$offload"   # strata plan's description
done <"$OUT/sweep.tsv"

$HELP report "$OUT" "$MODEL" "$SEQ" "$STEPS" >"$OUT/placement_sweep.md"
echo "sweep: $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s" >>"$OUT/placement_sweep.md"
cat "$OUT/placement_sweep.md"
[ "$failures" = 0 ] || { echo "$failures run(s) failed: see $OUT/run-*.log" >&2; exit 1; }
