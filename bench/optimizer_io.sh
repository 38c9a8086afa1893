#!/usr/bin/env bash
# optimizer_io.sh - issue 13's SSD concurrency measurement: the optimizer's
# state streamed from and to the SSD with its reads and writes phased (groups
# of segments read, stepped, written back: never queued together) against
# interleaved (read ahead, step, write behind), on gpt2-350m, mixed precision.
#
#   bench/optimizer_io.sh [STRATA] [OUT_DIR] [STEPS]
#   defaults: build/strata bench/results/optimizer_io 14
#
# This disk's rates drift by tens of percent within minutes, more than the
# difference measured, so the two orders are never compared across runs:
# each run trains with --optimizer-io alternating (phased on even steps,
# interleaved on odd) and each phased step i > 2 is compared with the mean
# of its two interleaved neighbours, t_i / ((t_{i-1} + t_{i+1}) / 2), which
# cancels a drift that is linear over three steps. Per configuration: the
# median of those ratios (below 1: phased is faster) and their range.
set -euo pipefail
STRATA=${1:-build/strata}
OUT=${2:-bench/results/optimizer_io}
STEPS=${3:-14}
DATA=data/corpus-gpt2
PY=/usr/bin/python3
CONFIGS=("optim 32" "optim 128" "weights,optim,grads 32" "weights,optim 128")   # placement, tokens

[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build first)" >&2; exit 1; }
[ -d "$DATA" ] || { echo "no dataset at $DATA: run scripts/demo.sh or scripts/make_corpus.sh + strata prepare" >&2; exit 1; }
mkdir -p "$OUT"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

for cfg in "${CONFIGS[@]}"; do
    set -- $cfg
    name="${1//,/-}-seq$2"
    log "run $name: --offload $1, 1 x $2 tokens, $STEPS steps, --optimizer-io alternating"
    "$STRATA" train --model gpt2-350m --data "$DATA" --batch 1 --micro-batch 1 --seq "$2" --steps "$STEPS" \
        --precision mixed --clip 0 --eval-batches 1 --eval-every 0 --schedule vertical --offload "$1" \
        --optimizer-io alternating --run-dir "$OUT/run-$name" --overwrite >"$OUT/run-$name.log" 2>&1 ||
        { echo "run $name failed:" >&2; tail -5 "$OUT/run-$name.log" >&2; exit 1; }
    rm -rf "$OUT/run-$name/store" "$OUT/run-$name/model.safetensors"
done

"$PY" - "$OUT" "${CONFIGS[@]}" <<'EOF' | tee "$OUT/optimizer_io.md"
import json, statistics, sys
out, configs = sys.argv[1], sys.argv[2:]
print("gpt2-350m, mixed precision, vertical, clipping off, batch 1 x T; one run per row with --optimizer-io "
      "alternating (phased on even steps, interleaved on odd); ratio = a phased step's time over the mean of its "
      "two interleaved neighbours (steps 1-2 left out)\n")
print("| --offload | T | phased steps s (median) | interleaved steps s (median) | ratio median | ratio range | pairs |")
print("|---|---|---|---|---|---|---|")
for cfg in configs:
    place, seq = cfg.split()
    name = place.replace(",", "-") + "-seq" + seq
    t = {}
    for line in open(f"{out}/run-{name}/metrics.jsonl"):
        r = json.loads(line)
        if "step_s" in r: t[r["step"]] = r["step_s"]
    ratios = [t[i] / ((t[i - 1] + t[i + 1]) / 2) for i in sorted(t) if i > 2 and i % 2 == 0 and i + 1 in t]
    ph = [t[i] for i in t if i > 2 and i % 2 == 0]
    il = [t[i] for i in t if i > 2 and i % 2 == 1]
    print(f"| {place} | {seq} | {statistics.median(ph):.3f} | {statistics.median(il):.3f} | "
          f"{statistics.median(ratios):.3f} | {min(ratios):.3f}-{max(ratios):.3f} | {len(ratios)} |")
EOF
