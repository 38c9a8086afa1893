#!/usr/bin/env bash
# ranks_vs_threads.sh - issue 14's measurement on this machine: the same
# global batch trained by (a) one process with 2 compute threads and by
# (b) 2 ranks of 1 thread each (mpirun -np 2, OMP_NUM_THREADS=1,
# --threads 1), with the state in memory and with weights, optimizer state
# and checkpoints on the SSD; the runs alternate (a, b, a, b, ...) so that
# drift in the machine's load falls on both alike. For each run: the
# iteration time from metrics.jsonl (step_s, step 1 skipped), the run's
# own summary (where the compute thread's time went; with ranks, the time
# in collectives and the bytes sent), and what `strata simulate` predicts
# for it on a description of this machine probed by 2 ranks at the start
# (`mpirun -np 2 strata probe`: compute, AdamW, the disk, and the ranks'
# all-gather and reduce-scatter), with --ranks 1 for (a) and --ranks 2 for
# (b). Writes a markdown table to OUT (default
# bench/results/ranks_vs_threads.md) and the runs under WORK.
#
#   bench/ranks_vs_threads.sh [STRATA] [OUT] [WORK]
#   defaults: build/strata bench/results/ranks_vs_threads.md /tmp/ranks_vs_threads
#   ROUNDS (2), STEPS (5), MODEL (gpt2-mini), SEQ (128), BATCH (8), MICRO (2),
#   SCHEDULE (vertical) override the runs; HW=FILE uses a description instead of probing;
#   REPORT_ONLY=1 writes OUT again from the runs already in WORK (with HW).
set -euo pipefail
STRATA=$(realpath "${1:-build/strata}")
OUT=${2:-bench/results/ranks_vs_threads.md}
WORK=${3:-/tmp/ranks_vs_threads}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-5}
MODEL=${MODEL:-gpt2-mini}
SEQ=${SEQ:-128}
BATCH=${BATCH:-8}
MICRO=${MICRO:-2}
SCHEDULE=${SCHEDULE:-vertical}
PY=${PY:-python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --bind-to none --timeout 300)

[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build first)" >&2; exit 1; }
mkdir -p "$WORK/probe-store" "$WORK/runs"
start=$(date +%s)

# data: the prepared corpus when there is one, else random tokens (the timing does not depend on them)
DATA=/work/main/data/corpus-gpt2
if [ ! -e "$DATA" ]; then
    DATA="$WORK/tokens.bin"
    [ -s "$DATA" ] || "$PY" - "$DATA" <<'PY'
import random, struct, sys
random.seed(14)
n = 400000
open(sys.argv[1], "wb").write(struct.pack("<%dH" % n, *[random.randrange(50257) for _ in range(n)]))
PY
fi

HW=${HW:-}
if [ -z "$HW" ] && [ "${REPORT_ONLY:-0}" = 1 ]; then HW="$WORK/hw.json"; fi
if [ -z "$HW" ]; then
    HW="$WORK/hw.json"
    echo "# probing this machine with 2 ranks" >&2
    # compute measured at the runs' own shapes (the model, micro-batch and sequence)
    "${MPIRUN[@]}" -np 2 "$STRATA" probe --store "$WORK/probe-store" --size 128M --model "$MODEL" --micro-batch "$MICRO" \
        --seq "$SEQ" --reps 5 --out "$HW" >"$WORK/probe.out" 2>"$WORK/probe.err"
fi

common=(--model "$MODEL" --seq "$SEQ" --batch "$BATCH" --micro-batch "$MICRO" --steps "$STEPS" --schedule "$SCHEDULE"
        --data "$DATA" --eval-every 0 --eval-batches 1 --log-every 1000)

# a run's directory: no comma in it (--store lists directories with commas; the default store is RUN_DIR/store)
label() { [ "$1" = none ] && echo memory || echo ssd; }

run() {   # name offload round
    local name=$1 offload=$2 round=$3 dir
    dir="$WORK/runs/$1-$(label "$2")-r$3"
    rm -rf "$dir"
    cut -d' ' -f1 /proc/loadavg >"$dir.load"   # the machine's load as the run starts (other jobs slow threads most)
    case $name in
    threads) OMP_NUM_THREADS=2 "$STRATA" train "${common[@]}" --threads 2 --offload "$offload" --run-dir "$dir" \
                 >"$dir.out" 2>"$dir.err" ;;
    ranks) OMP_NUM_THREADS=1 "${MPIRUN[@]}" -x OMP_NUM_THREADS -np 2 "$STRATA" train "${common[@]}" --threads 1 \
               --offload "$offload" --run-dir "$dir" >"$dir.out" 2>"$dir.err" ;;
    esac
    grep -q '^done:' "$dir.out" || { echo "run $dir failed: see $dir.out, $dir.err" >&2; exit 1; }
    rm -rf "$dir/store"   # the state: not needed afterwards
}

[ "${REPORT_ONLY:-0}" = 1 ] && ROUNDS_RUN=0 || ROUNDS_RUN=$ROUNDS
for round in $(seq 1 "$ROUNDS_RUN"); do
    for offload in none weights,optim,acts; do
        for name in threads ranks; do
            run "$name" "$offload" "$round"
            echo "# $name $offload round $round ($(( $(date +%s) - start )) s)" >&2
        done
    done
done

"$PY" - "$STRATA" "$HW" "$WORK" "$OUT" "$ROUNDS" "$MODEL" "$SEQ" "$BATCH" "$MICRO" "$STEPS" "$SCHEDULE" <<'PY'
import json, re, subprocess, sys, os
strata, hw, work, out, rounds, model, seq, batch, micro, steps, schedule = sys.argv[1:12]
rounds = int(rounds)
desc = json.load(open(hw))
lines = []
P = lines.append
P("# Ranks against threads on this machine (issue 14)")
P("")
P(f"Measured by `bench/ranks_vs_threads.sh`: {model}, sequences of {seq}, global batch {batch} in micro-batches of {micro}")
P(f"({int(batch) // int(micro)} micro-batches: 2 per rank with 2 ranks), fp32, {schedule} schedule, clipping 1.0 (vertical:")
P(f"every step deferred), {steps} steps per run, step 1 skipped; {rounds} rounds, the runs alternating. threads: one process,")
P("`--threads 2`; ranks: `mpirun -np 2`, `OMP_NUM_THREADS=1 --threads 1`. SSD: `--offload weights,optim,acts`")
P("(gradients in memory: with 2 ranks each keeps its shard of their sums), each rank's store in its own")
P("directory on the same disk. Predicted: `strata simulate --ranks 1|2` on the description probed at the start")
P(f"by `mpirun -np 2 strata probe` ({os.path.basename(hw)}, below).")
P("")
cl = desc.get("cluster", {})
pr = desc.get("probe", {})
c = desc["compute"]
P(f"Description: sgemm {c['matmul_gflops']:.1f} GFLOP/s (2 threads), memory-bound passes {c['other_gbps']:.2f} GB/s, "
  f"AdamW {desc['optimizer']['adamw_params_per_s_per_thread'] / 1e6:.0f} M parameters/s per thread, "
  f"contention {desc['contention']['compute_slowdown']:.2f}x / {desc['contention']['optimizer_slowdown']:.2f}x, "
  f"disk {desc['ssd'][0]['read_gbps']:.3f} GB/s read, {desc['ssd'][0]['write_gbps']:.3f} GB/s write; "
  f"ranks: all-gather {pr.get('ranks_allgather_gbps', 0):.3f} GB/s and reduce-scatter "
  f"{pr.get('ranks_reduce_scatter_gbps', 0):.3f} GB/s received per rank, shm_gbps {cl.get('shm_gbps', 0):.3f}, "
  f"latency {1e6 * cl.get('shm_latency_s', 0):.0f} us.")
P("")

def summary(path):
    text = open(path).read() if os.path.exists(path) else ""
    comp = re.search(r"^compute thread: computing ([0-9.]+) s, waiting ([0-9.]+) s \(on the SSD ([0-9.]+) s, the optimizer ([0-9.]+) s\)", text, re.M)
    ranks = re.search(r"^ranks: \d+; this rank's compute thread spent ([0-9.]+) s of the iteration in collectives.*sent ([0-9.]+ \S+) to", text, re.M)
    return comp, ranks

def simulate(name, offload):
    args = [strata, "simulate", "--hw", hw, "--model", model, "--seq", seq, "--micro-batch", micro,
            "--global-batch", batch, "--ranks", "1" if name == "threads" else "2", "--offload", offload,
            "--schedule", schedule, "--clip", "1", "--precision", "fp32", "--json"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    return json.loads(r.stdout), ""

P("Measured, from each run's summary (per round): the compute thread computing, of which in collectives (starting, driving")
P("and waiting for all-gathers, reduce-scatters and sums: the executor counts that time as computing), and waiting on the")
P("SSD and the optimizer. Predicted: computing (with AdamW's slowdown beside it) and waiting on the SSD, the optimizer and")
P("the other ranks (the collectives' part of the critical path).")
P("")
P("| run | offload | measured iteration, s (per round) | mean | predicted | error | measured: computing (of it in collectives) / waiting (SSD, optimizer), s | predicted: computing / waiting (SSD, optimizer, ranks), s | rank 0 sent per run |")
P("| --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |")
summary_rows = {}
for offload in ("none", "weights,optim,acts"):
    for name in ("threads", "ranks"):
        per = []
        comps = []
        loads = []
        for r in range(1, rounds + 1):
            d = f"{work}/runs/{name}-{'memory' if offload == 'none' else 'ssd'}-r{r}"
            if os.path.exists(d + ".load"):
                loads.append(open(d + ".load").read().strip())
            try:
                st = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"step_s"' in l]
            except OSError:
                st = []
            v = [s["step_s"] for s in st if s["step"] >= 2]
            if v:
                per.append(sum(v) / len(v))
            comps.append(summary(d + ".out"))
        sim, err = simulate(name, offload)
        mean = sum(per) / len(per) if per else float("nan")
        pred = sim["iter_s"] if sim else float("nan")
        error = 100 * (pred - mean) / mean if per and sim else float("nan")
        meas_parts = []
        sent = ""
        for comp, ranks in comps:
            if comp:
                coll = f" ({float(ranks.group(1)):.2f})" if ranks else ""
                s = (f"{float(comp.group(1)):.2f}{coll} / {float(comp.group(2)):.2f} ({float(comp.group(3)):.2f}, "
                     f"{float(comp.group(4)):.2f})")
                if ranks:
                    sent = ranks.group(2)
                meas_parts.append(s)
        if sim:
            w = sim["critical_path"]
            ps = (f"{sim['compute_s'] + sim['contention_s']:.2f} / {sim['wait_s']:.2f} ({w['ssd']:.2f}, {w['optimizer']:.2f}, "
                  f"{w['interconnect']:.2f})")
        else:
            ps = err
        load = f" (load {', '.join(loads)})" if loads else ""
        P(f"| {name} | {offload} | {', '.join(f'{x:.3f}' for x in per)}{load} | {mean:.3f} | {pred:.3f} | {error:+.0f}% | "
          f"{'; '.join(meas_parts)} | {ps} | {sent} |")
        summary_rows[(name, offload)] = (mean, pred, sim)
P("")
for offload in ("none", "weights,optim,acts"):
    a, b = summary_rows[("threads", offload)], summary_rows[("ranks", offload)]
    P(f"- {offload}: 2 ranks x 1 thread take {b[0] / a[0]:.2f}x the time of 1 rank x 2 threads measured, "
      f"{b[1] / a[1]:.2f}x predicted.")
for name in ("threads", "ranks"):
    sim = summary_rows[(name, "none")][2]
    if sim and sim.get("ranks", 1) > 1:
        P(f"- predicted bytes per iteration, rank 0 ({name}): sent {sim['comm_sent'] / 2**20:.1f} MiB, received "
          f"{sim['comm_received'] / 2**20:.1f} MiB (strata/comm.h's table).")
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "# done in $(( $(date +%s) - start )) s" >&2
