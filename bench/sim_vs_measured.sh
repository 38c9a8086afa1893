#!/usr/bin/env bash
# sim_vs_measured.sh - issue 6's check of the simulator against reality: for
# every executor run of bench/offload_schedules.sh (both schedules, M = 1..16,
# and the compute-bound point), the iteration time `strata simulate` predicts
# on this machine's description beside the one measured.
#
#   bench/sim_vs_measured.sh [STRATA] [HW_JSON] [RESULTS_DIR]
#   defaults: build/strata bench/results/hw-this-machine.json bench/results/offload
#
# HW_JSON: `strata probe --store DIR --out FILE` taken on an idle machine, on
# the disk the benchmark's stores used. Every setting of a run (model, micro-
# batch, sequence, micro-batches, schedule, placement, precision, clipping)
# is read back from its run.json, so the simulated configuration is the one
# that ran.
set -euo pipefail
STRATA=${1:-build/strata}
HW=${2:-bench/results/hw-this-machine.json}
RES=${3:-bench/results/offload}
PY=/usr/bin/python3
[ -f "$HW" ] || { echo "no hardware description at $HW: run strata probe first" >&2; exit 1; }
"$PY" - "$STRATA" "$HW" "$RES" <<'PY'
import glob, json, os, subprocess, sys
strata, hw, res = sys.argv[1:4]
rows = []
for run in sorted(glob.glob(f"{res}/run-*/run.json")):
    d = os.path.dirname(run)
    name = os.path.basename(d)[4:]
    if name.startswith("memory"):
        continue
    cfg = json.load(open(run))
    steps = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"step_s"' in l]
    measured = [s["step_s"] for s in steps if s["step"] >= 2]
    if not measured:
        continue
    meas = sum(measured) / len(measured)
    args = [strata, "simulate", "--hw", hw, "--n-layer", str(cfg["n_layer"]), "--n-head", str(cfg["n_head"]),
            "--d-model", str(cfg["d_model"]), "--n-ctx", str(cfg["n_ctx"]), "--vocab", str(cfg["vocab"]),
            "--micro-batch", str(cfg["micro_batch"]),
            "--seq", str(cfg["seq"]), "--grad-accum", str(cfg["batch"] // cfg["micro_batch"]),
            "--schedule", cfg["schedule"], "--alpha", str(cfg["alpha"]), "--clip", str(cfg["clip"]),
            "--precision", cfg["precision"], "--offload", cfg["offload"], "--json"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"simulate failed for {name}: {out.stderr.strip()}")
    sim = json.loads(out.stdout)
    rows.append((name, cfg, meas, sim))
print(f"hardware description: {hw}; measured = mean step time of steps 2..N of each run in {res}")
print()
print("| run | micro-batch x M | measured s | predicted s | error | predicted bottleneck |")
print("|---|---|---|---|---|---|")
worst = 0
for name, cfg, meas, sim in rows:
    err = sim["iter_s"] / meas - 1
    worst = max(worst, abs(err))
    print(f"| {name} | {cfg['micro_batch']} x {cfg['batch'] // cfg['micro_batch']} | {meas:.2f} | {sim['iter_s']:.2f} | "
          f"{100 * err:+.1f}% | {sim['bottleneck']} |")
print()
print(f"{len(rows)} configurations, worst error {100 * worst:.1f}%")
PY
