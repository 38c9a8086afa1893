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
# that ran. Where the benchmark re-measured the disk around a run (PROBE_HW:
# run-NAME.hw-before.json and .hw-after.json), that run is simulated with
# HW_JSON's compute and the mean of those two measurements of the disk.
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
    def get(*keys):   # run.json's flag names ("micro-batch"), or the older field names ("micro_batch")
        for k in keys:
            if k in cfg:
                return cfg[k]
        raise KeyError(keys[0])
    steps = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"step_s"' in l]
    measured = [s["step_s"] for s in steps if s["step"] >= 2]
    if not measured:
        continue
    meas = sum(measured) / len(measured)
    run_hw, disk = hw, "probe"
    around = [f"{d}.hw-{w}.json" for w in ("before", "after")]
    if all(os.path.exists(f) for f in around):
        base = json.load(open(hw))
        probes = [json.load(open(f))["ssd"] for f in around]
        base["ssd"] = [{k: (v if k == "path" else sum(p[i][k] for p in probes) / len(probes))
                        for k, v in probes[0][i].items()} for i in range(len(probes[0]))]
        run_hw = f"{d}.hw-mean.json"
        json.dump(base, open(run_hw, "w"), indent=1)
        disk = "around"
    micro = get("micro-batch", "micro_batch")
    args = [strata, "simulate", "--hw", run_hw, "--n-layer", str(get("n-layer", "n_layer")),
            "--n-head", str(get("n-head", "n_head")), "--d-model", str(get("d-model", "d_model")),
            "--n-ctx", str(get("n-ctx", "n_ctx")), "--vocab", str(get("vocab")), "--micro-batch", str(micro),
            "--seq", str(get("seq")), "--grad-accum", str(get("batch") // micro),
            "--schedule", get("schedule"), "--alpha", str(get("alpha")), "--clip", str(get("clip")),
            "--precision", get("precision"), "--offload", get("offload"), "--json"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"simulate failed for {name}: {out.stderr.strip()}")
    sim = json.loads(out.stdout)
    rows.append((name, micro, get("batch") // micro, meas, sim, disk,
                 json.load(open(run_hw))["ssd"][0]))
print(f"hardware description: {hw}; measured = mean step time of steps 2..N of each run in {res}; "
      "disk: 'around' = the mean of strata probe --update right before and right after the run")
print()
print("| run | micro-batch x M | disk read / write / both GB/s | measured s | predicted s | error | predicted bottleneck |")
print("|---|---|---|---|---|---|---|")
worst, within = 0, 0
for name, micro, M, meas, sim, disk, ssd in rows:
    err = sim["iter_s"] / meas - 1
    worst = max(worst, abs(err))
    within += abs(err) <= 0.10
    rates = f"{ssd['read_gbps']:.2f} / {ssd['write_gbps']:.2f} / {ssd['mixed_read_gbps']:.2f}+{ssd['mixed_write_gbps']:.2f} ({disk})"
    print(f"| {name} | {micro} x {M} | {rates} | {meas:.2f} | {sim['iter_s']:.2f} | {100 * err:+.1f}% | {sim['bottleneck']} |")
print()
print(f"{within} of {len(rows)} within 10%")
print(f"{len(rows)} configurations, worst error {100 * worst:.1f}%")
PY
