#!/usr/bin/env bash
# commit_cost.sh - issue 7's commit cost and disk use: what one commit takes
# for each way of keeping the state, on a model whose state is gigabytes,
# and how the store's disk use evolves over many commits.
#
#   bench/commit_cost.sh [STRATA] [MODEL] [STEPS] [OUT_DIR]
#   defaults: build/strata gpt2-124m 12 /tmp/strata-commit-cost
#
# Every run commits after every step (--save-every 1; the weights file
# model.safetensors is written each time too, and reported apart). A commit
# with the optimizer state on the SSD is a flush of the deferred work, a
# wait for writes and a manifest switch; with the state in host memory it
# writes the master weights and both moments (12 bytes a parameter).
set -euo pipefail
STRATA=${1:-build/strata}
MODEL=${2:-gpt2-124m}
STEPS=${3:-12}
OUT=${4:-/tmp/strata-commit-cost}
PY=/usr/bin/python3
mkdir -p "$OUT"
"$PY" -c "
import array, random
random.seed(1)
array.array('H', [random.randrange(50257) for _ in range(400000)]).tofile(open('$OUT/tokens.bin', 'wb'))"
echo "| engine and placement | steps | step s (median) | commit s (median) | weights file s (median) | store on disk after commit 2 / last |"
echo "|---|---|---|---|---|---|"
for mode in "vertical:weights,optim,acts,grads" "vertical:acts" "memory:none"; do
  sched=${mode%%:*} off=${mode#*:}
  run="$OUT/run-$sched-${off//,/-}"
  rm -rf "$run"
  "$STRATA" train --model "$MODEL" --data "$OUT/tokens.bin" --batch 4 --seq 64 --steps "$STEPS" --eval-batches 1 \
    --clip 0 --precision mixed --schedule "$sched" --offload "$off" --save-every 1 --run-dir "$run" --log-every 1 \
    >"$run.log" 2>&1 &
  pid=$!
  while ! grep -q "^committed step 2 " "$run.log" 2>/dev/null; do sleep 0.2; kill -0 $pid 2>/dev/null || break; done
  early=$(du -sk "$run/store" | cut -f1)
  wait $pid
  late=$(du -sk "$run/store" | cut -f1)
  "$PY" - "$run" "$run.log" "$sched/$off" "$early" "$late" <<'PY'
import json, re, statistics, sys
run, log, name, early, late = sys.argv[1:6]
text = open(log).read()
commits = [float(x) for x in re.findall(r"^committed step \d+ in ([0-9.]+) s", text, re.M)]
saves = [float(x) for x in re.findall(r"^saved model.safetensors in ([0-9.]+) s", text, re.M)]
steps = [json.loads(l)["step_s"] for l in open(f"{run}/metrics.jsonl") if '"step_s"' in l][1:]
print(f"| {name} | {len(steps) + 1} | {statistics.median(steps):.2f} | {statistics.median(commits):.2f} | "
      f"{statistics.median(saves):.2f} | "
      f"{int(early) / 1024:.0f} MiB / {int(late) / 1024:.0f} MiB |")
PY
  rm -rf "$run/store"
done
