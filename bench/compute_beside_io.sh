#!/usr/bin/env bash
# compute_beside_io.sh - how much slower compute runs while a drive moves
# bytes beside it (issue 13; docs/BENCHMARKS.md, "Compute beside the
# drives' transfers"): gpt2-350m, mixed precision, 1 x 64 tokens, all state
# in memory (no I/O of its own), alone and beside a loop of O_DIRECT reads
# (dd, 1 MiB requests) of a 1 GiB file in DIR, alternated ROUNDS times;
# then what `strata probe` measures for the same (contention.compute_beside_io:
# the block timed alone and beside the I/O engine's reads and writes on DIR).
#
#   bench/compute_beside_io.sh [STRATA] [OUT_DIR] [DIR] [ROUNDS]
#   defaults: build/strata bench/results/compute_beside_io OUT_DIR/drive 2
#
# DIR must be on the drive the store would use (O_DIRECT: not tmpfs). Step
# time: the mean of steps 2..5; "computing" is the compute thread's time
# not waiting (strata train's summary).
set -euo pipefail
STRATA=${1:-build/strata}
OUT=${2:-bench/results/compute_beside_io}
DIR=${3:-$OUT/drive}
ROUNDS=${4:-2}
DATA=data/corpus-gpt2
PY=/usr/bin/python3
HELP=("$PY" "$(dirname "$0")/placement_sweep.py")
SHAPE=(--model gpt2-350m --seq 64 --precision mixed --clip 0 --micro-batch 1 --batch 1 --schedule vertical)

[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build first)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no dataset at $DATA: run scripts/demo.sh or scripts/make_corpus.sh + strata prepare" >&2; exit 1; }
mkdir -p "$OUT" "$DIR"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
started=$SECONDS
FILE=$DIR/compute-beside-io.dat
reader=
# the loop stops at its next turn (the stop file); its dd now is killed (pkill -P: the loop's child)
stop_reader() {
    [ -n "$reader" ] || return 0
    : >"$OUT/reads.stop"
    pkill -P "$reader" dd 2>/dev/null || true
    wait "$reader" 2>/dev/null || true
    reader=
}
trap 'stop_reader; rm -rf "$FILE" "$DIR/probe" "$OUT/reads.stop"' EXIT
dd if=/dev/zero of="$FILE" bs=1M count=1024 oflag=direct status=none

# NAME: one in-memory run; its step time and computing seconds on stdout
run() {
    local name=$1
    "$STRATA" train "${SHAPE[@]}" --data "$DATA" --steps 5 --eval-batches 1 --eval-every 0 --offload none \
        --run-dir "$OUT/run-$name" --overwrite </dev/null >"$OUT/run-$name.log" 2>&1 ||
        { echo "run $name failed: see $OUT/run-$name.log" >&2; return 1; }
    local step computing
    step=$("${HELP[@]}" steptime "$OUT/run-$name")
    computing=$(sed -n 's/^compute thread: computing \([0-9.]*\) s.*/\1/p' "$OUT/run-$name.log")
    rm -rf "$OUT/run-$name/store" "$OUT/run-$name/model.safetensors"
    echo "$step $computing"
}

rows=()
for ((r = 1; r <= ROUNDS; r++)); do
    log "round $r: alone"
    out=$(run "alone-r$r")
    read -r a_step a_comp <<<"$out"
    log "round $r: beside the read loop"
    : >"$OUT/reads-r$r.count"
    rm -f "$OUT/reads.stop"
    ( while [ ! -e "$OUT/reads.stop" ]; do
          dd if="$FILE" of=/dev/null bs=1M iflag=direct status=none && echo >>"$OUT/reads-r$r.count"
      done ) &
    reader=$!
    t0=$(date +%s.%N)
    out=$(run "beside-r$r")
    read -r b_step b_comp <<<"$out"
    wall=$($PY -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$t0" "$(date +%s.%N)")
    stop_reader
    gib=$(wc -l <"$OUT/reads-r$r.count")
    rate=$($PY -c "print('%.2f' % ($gib * 1.073741824 / $wall))")   # whole passes: a little low
    rows+=("| $r | $a_step | $a_comp | $b_step | $b_comp | $rate | $($PY -c "print('%.2fx' % ($b_step / $a_step))") |")
done

log "strata probe (compute beside the I/O engine's reads and writes on $DIR)"
mkdir -p "$DIR/probe"
"$STRATA" probe --store "$DIR/probe" --size 256M --model gpt2-350m --micro-batch 1 --seq 64 --trial-steps 0 \
    --out "$OUT/hw.json" >"$OUT/probe.log" 2>&1 || echo "probe failed: see $OUT/probe.log" >&2
rm -rf "$DIR/probe"
probe_line=$(grep -A1 "beside reads and writes" "$OUT/probe.log" | tail -1 | sed 's/^ *//' || true)
[ -n "$probe_line" ] || probe_line="(no measurement: see $OUT/probe.log)"

{
    echo "Compute beside a drive's transfers: gpt2-350m, mixed, 1 x 64, vertical, all state in memory; step = mean of steps 2..5; the read loop: dd bs=1M iflag=direct over a 1 GiB file in $DIR, from before the run starts to after it ends"
    echo
    echo "| round | alone s | computing s | beside the read loop s | computing s | loop GB/s (whole run) | slower |"
    echo "|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "strata probe: $probe_line"
    echo "bench: $(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s"
} >"$OUT/compute_beside_io.md"
cat "$OUT/compute_beside_io.md"
