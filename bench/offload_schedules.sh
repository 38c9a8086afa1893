#!/usr/bin/env bash
# offload_schedules.sh - issue 5's benchmark: SSD-offloaded training of a
# model whose state is several times the host budget, horizontal (ZeRO-
# Infinity's order) against vertical (GreedySnake's snake), a fixed global
# batch split into M = 1, 2, 4, 8, 16 micro-batches, each beside its
# roofline bound, all measured in one run.
#
#   bench/offload_schedules.sh [STRATA] [MODEL] [HOST_BUDGET] [STEPS] [OUT_DIR]
#   defaults: build/strata gpt2-350m 1G 3 bench/results/offload
#   RESUME=1 keeps the runs (and the bandwidth measurement) that finished in
#   OUT_DIR before and runs the rest.
#   PROBE_HW=FILE (a description from strata probe) re-measures the store's
#   disk right before and right after each executor run (strata probe
#   --update, 2 GiB) into OUT_DIR/run-NAME.hw-before.json and .hw-after.json,
#   for bench/sim_vs_measured.sh: this disk's rates drift by tens of percent
#   within minutes.
#
# Everything on the SSD (weights, optimizer state, checkpoints, gradients),
# O_DIRECT through the store, mixed precision, no clipping (so that vertical
# steps each block during backward and horizontal after it: alpha 0 for
# both). Per configuration: the mean step time of steps 2..STEPS (the first
# iteration warms buffers up).
#
# Roofline bound of a configuration (DESIGN.md): the larger of
#   - compute: the in-memory trainer's step time for the same batch split
#     the same way (`--schedule memory`, state in RAM, same threads), and
#   - I/O: the SSD bytes that schedule and placement must move per step
#     (printed by strata train, computed from the task list, padding
#     included) read / read GB/s + written / write GB/s, with bandwidths
#     from `strata iobench` in this run, on the store's disk.
# Then a compute-bound point: a larger batch, in-memory against vertical
# with everything on the SSD (target: >= 90% of in-memory tokens/s).
set -euo pipefail
STRATA=${1:-build/strata}
MODEL=${2:-gpt2-350m}
HOST=${3:-1G}
STEPS=${4:-3}
OUT=${5:-bench/results/offload}
SEQS=16 SEQ=32                 # the fixed global batch of the sweep: 16 x 32 = 512 tokens
BIG_SEQ=128 BIG_MB=4           # the compute-bound point: 16 x 128 tokens in 4 micro-batches
DATA=data/corpus-gpt2
PY=/usr/bin/python3

[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build first)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no dataset at $DATA: run scripts/demo.sh or scripts/make_corpus.sh + strata prepare" >&2; exit 1; }
mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

# One training run; its log and metrics stay in $OUT/run-NAME, its store
# (as large as the model's state) is deleted afterwards. A run that already
# finished in $OUT is kept (RESUME=1, e.g. after fixing a failed run).
train() {
    local name=$1 seq=$2 mb=$3; shift 3
    if [ "${RESUME:-0}" = 1 ] && grep -q "^done:" "$OUT/run-$name.log" 2>/dev/null; then
        log "run $name: kept from before"
        return
    fi
    log "run $name"
    probe "$name" before "$@"
    "$STRATA" train --model "$MODEL" --data "$DATA" --batch "$SEQS" --micro-batch "$mb" --seq "$seq" \
        --steps "$STEPS" --precision mixed --clip 0 --eval-batches 1 --eval-every 0 \
        --run-dir "$OUT/run-$name" --overwrite "$@" >"$OUT/run-$name.log" 2>&1 ||
        { echo "run $name failed:" >&2; tail -5 "$OUT/run-$name.log" >&2; exit 1; }
    rm -rf "$OUT/run-$name/store"
    probe "$name" after "$@"
}

# The disk's rates now (PROBE_HW), for the executor's runs.
probe() {
    local name=$1 when=$2; shift 2
    [ -n "${PROBE_HW:-}" ] && [[ " $* " == *" --offload "* ]] || return 0
    mkdir -p "$OUT/probe"
    "$STRATA" probe --update "$PROBE_HW" --store "$OUT/probe" --size 2G --out "$OUT/run-$name.hw-$when.json" \
        >/dev/null 2>"$OUT/run-$name.probe-$when.log" ||
        { echo "probe for $name failed:" >&2; tail -3 "$OUT/run-$name.probe-$when.log" >&2; exit 1; }
    rm -rf "$OUT/probe"
}

if [ "${RESUME:-0}" != 1 ] || [ ! -s "$OUT/iobench.log" ]; then
    log "SSD bandwidth (strata iobench, O_DIRECT, 2 GiB, in the directory the stores use)"
    rm -rf "$OUT"/run-* "$OUT/iobench"
    mkdir -p "$OUT/iobench"
    "$STRATA" iobench --path "$OUT/iobench" --size 2G >"$OUT/iobench.log" 2>&1
    rm -rf "$OUT/iobench"
fi
cat "$OUT/iobench.log" >&2

ssd="weights,optim,acts,grads"
for M in 1 2 4 8 16; do
    mb=$((SEQS / M))
    train "memory-M$M" "$SEQ" "$mb" --schedule memory
    train "vertical-M$M" "$SEQ" "$mb" --schedule vertical --offload "$ssd" --mem-host "$HOST"
    train "horizontal-M$M" "$SEQ" "$mb" --schedule horizontal --offload "$ssd" --mem-host "$HOST"
done
train "memory-big" "$BIG_SEQ" "$BIG_MB" --schedule memory
train "vertical-big" "$BIG_SEQ" "$BIG_MB" --schedule vertical --offload "$ssd" --mem-host "$HOST"
# Other placements (no host budget), for the simulator's check (bench/sim_vs_measured.sh)
train "vertical-M4-acts" "$SEQ" 4 --schedule vertical --offload acts
train "horizontal-M4-acts" "$SEQ" 4 --schedule horizontal --offload acts
train "vertical-M8-weights-acts" "$SEQ" 2 --schedule vertical --offload weights,acts
train "horizontal-big-acts" "$BIG_SEQ" "$BIG_MB" --schedule horizontal --offload acts

"$PY" - "$OUT" "$MODEL" "$HOST" "$SEQS" "$SEQ" "$BIG_SEQ" "$STEPS" <<'PY'
import json, re, sys
out, model, host, seqs, seq, big_seq, steps = sys.argv[1:8]
seqs, seq, big_seq, steps = int(seqs), int(seq), int(big_seq), int(steps)
io = open(f"{out}/iobench.log").read().strip().splitlines()[-1].split()
write_bw, read_bw = float(io[-2]) * 1e9, float(io[-1]) * 1e9

def run(name):
    text = open(f"{out}/run-{name}.log").read()
    rows = [json.loads(l) for l in open(f"{out}/run-{name}/metrics.jsonl") if '"step_s"' in l]
    times = [r["step_s"] for r in rows if r["step"] >= 2]
    r = {"step_s": sum(times) / len(times), "text": text}
    m = re.search(r"SSD traffic per step of this schedule and placement: .* \((\d+), (\d+) bytes\)", text)
    if m: r["read"], r["written"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"compute thread: computing ([\d.]+) s, waiting [\d.]+ s \(on the SSD ([\d.]+) s, "
                  r"the optimizer ([\d.]+) s\)", text)
    if m: r["compute"], r["io_wait"], r["opt_wait"] = float(m.group(1)), float(m.group(2)), float(m.group(3))
    m = re.search(r"memory: device working set ([\d.]+ \w+), host ([\d.]+ \w+)", text)
    if m: r["mem"] = f"{m.group(1)} + {m.group(2)}"
    m = re.search(r"peak resident ([\d.]+ \S+)", text)
    if m: r["rss"] = m.group(1)
    return r

def gb(b): return f"{b / 1e9:.2f}"
print(f"model {model}, mixed precision, everything on the SSD, host budget {host}; "
      f"global batch {seqs} x {seq} tokens; SSD read {read_bw / 1e9:.3f} GB/s, write {write_bw / 1e9:.3f} GB/s "
      f"(strata iobench, this run); step time = mean of steps 2..{steps}")
print()
print("| M | micro-batch | in-memory s | horizontal s | its bound s (I/O GB r/w) | vertical s | its bound s (I/O GB r/w) "
      "| vertical speed-up | vertical / bound |")
print("|---|---|---|---|---|---|---|---|---|")
for M in (1, 2, 4, 8, 16):
    mem, hor, ver = run(f"memory-M{M}"), run(f"horizontal-M{M}"), run(f"vertical-M{M}")
    def bound(r):
        return max(mem["step_s"], r["read"] / read_bw + r["written"] / write_bw)
    print(f"| {M} | {seqs // M} x {seq} | {mem['step_s']:.2f} | {hor['step_s']:.2f} | {bound(hor):.2f} "
          f"({gb(hor['read'])}/{gb(hor['written'])}) | {ver['step_s']:.2f} | {bound(ver):.2f} "
          f"({gb(ver['read'])}/{gb(ver['written'])}) | {hor['step_s'] / ver['step_s']:.2f}x | "
          f"{ver['step_s'] / bound(ver):.2f} |")
print()
print("| M | schedule | computing s | waiting on SSD s | waiting for optimizer s | memory budgeted (device + host) | peak RSS |")
print("|---|---|---|---|---|---|---|")
for M in (1, 2, 4, 8, 16):
    for s in ("horizontal", "vertical"):
        r = run(f"{s}-M{M}")
        print(f"| {M} | {s} | {r.get('compute', 0):.2f} | {r.get('io_wait', 0):.2f} | {r.get('opt_wait', 0):.2f} | "
              f"{r.get('mem', '?')} | {r.get('rss', '?')} |")
mem, ver = run("memory-big"), run("vertical-big")
tokens = seqs * big_seq
print()
print(f"compute-bound point, {seqs} x {big_seq} tokens in {4} micro-batches: in-memory {tokens / mem['step_s']:.1f} tok/s, "
      f"vertical on the SSD {tokens / ver['step_s']:.1f} tok/s = {100 * mem['step_s'] / ver['step_s']:.0f}% "
      f"(I/O bound of vertical {(ver['read'] / read_bw + ver['written'] / write_bw):.1f} s vs compute {mem['step_s']:.1f} s)")
PY
