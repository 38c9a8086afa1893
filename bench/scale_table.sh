#!/usr/bin/env bash
# scale_table.sh - issue 6's "at scale, by simulation": predicted training
# throughput per GPU of GPT-style 6.7B, 13B, 30B, 65B and 175B models on a
# server with one or four A100-80GB GPUs and four NVMe drives
# (configs/hw/a100-80g-x1.json, a100-80g-x4.json), vertical (GreedySnake's
# order) against horizontal (ZeRO-Infinity's), across global batch sizes,
# each beside its roofline bound and with what limits it. Prints a markdown
# table per model; docs/BENCHMARKS.md records it.
#
#   bench/scale_table.sh [STRATA] [OUT_DIR]
#   defaults: build/strata bench/results/scale
#   MODELS, BATCHES, HWS override the sweep (space separated), e.g.
#   MODELS="gpt-65b" BATCHES="32 128" bench/scale_table.sh
#
# Every point: sequences of 2048 tokens, mixed precision (bf16 compute
# weights, fp32 master weights and Adam moments), no gradient clipping (so
# that vertical steps each block during backward; GreedySnake has no
# clipping either), the global batch split over the GPUs and into
# micro-batches of the largest size (a power of two) whose working set fits
# the GPU's 80 GB, and `--offload auto`: the placement with the least SSD
# traffic that fits the host's 1 TB, so everything that does not fit in host
# memory is on the SSD. Vertical defers alpha = 0.25 of each block's
# optimizer step into the next forward (GreedySnake's overlap); horizontal
# none (ZeRO-Infinity steps after backward). The simulator's model of the
# GPU and of data parallelism is in include/strata/sim.h.
#
# CPU clusters (issue 14): a description with a "cluster" (cpu backend, e.g.
# configs/hw/cpu-2s32c-x8.json, -x32.json) is simulated as that many ranks
# (`mpirun -np N strata train`), the global batch split over the ranks, the
# largest micro-batch whose placement fits a node's memory (its ranks
# together); printed in a table of their own, per node. For those rows only:
#   MODELS="gpt-6.7b gpt-13b" BATCHES="64 512" \
#   HWS="configs/hw/cpu-2s32c-x8.json configs/hw/cpu-2s32c-x32.json" bench/scale_table.sh
set -euo pipefail
STRATA=${1:-build/strata}
OUT=${2:-bench/results/scale}
MODELS=${MODELS:-"gpt-6.7b gpt-13b gpt-30b gpt-65b gpt-175b"}
BATCHES=${BATCHES:-"8 32 128 512"}
HWS=${HWS:-"configs/hw/a100-80g-x1.json configs/hw/a100-80g-x4.json"}
SEQ=2048
VERTICAL_ALPHA=0.25
PY=${PY:-python3}

[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (build first)" >&2; exit 1; }
mkdir -p "$OUT"

# one point: the largest micro-batch that fits the device, else a note
point() {   # model hw batch schedule
    local model=$1 hw=$2 batch=$3 sched=$4 devices b mb name out err refusal=device_bytes
    # data-parallel devices of a gpu node, or ranks of a cpu cluster (whose working set is in host memory)
    devices=$("$PY" -c "import json,sys; d = json.load(open(sys.argv[1])); c = d.get('cluster', {})
print(c.get('nodes', 1) * c.get('ranks_per_node', 1) if 'cluster' in d else d.get('node', {}).get('devices', 1))" "$hw")
    grep -q '"cluster"' "$hw" && refusal='device_bytes\|host_bytes'
    name="$model-$(basename "$hw" .json)-g$batch-$sched"
    out="$OUT/$name.json"
    err="$OUT/$name.err"
    rm -f "$out" "$err"
    if (( batch % devices )); then echo "global batch $batch < $devices GPUs" >"$err"; return; fi
    b=$((batch / devices))
    local alpha=0
    [ "$sched" = vertical ] && alpha=$VERTICAL_ALPHA
    for ((mb = b; mb >= 1; mb /= 2)); do
        (( b % mb )) && continue
        if "$STRATA" simulate --hw "$hw" --model "$model" --seq $SEQ --micro-batch $mb --global-batch "$batch" \
            --precision mixed --clip 0 --schedule "$sched" --alpha $alpha --offload auto --json >"$out" 2>"$err"; then
            rm -f "$err"
            return
        fi
        rm -f "$out"
        grep -q "$refusal" "$err" || return   # not a memory refusal: keep the message
    done
}

start=$(date +%s)
for model in $MODELS; do
    for hw in $HWS; do
        for batch in $BATCHES; do
            for sched in vertical horizontal; do
                point "$model" "$hw" "$batch" "$sched"
            done
        done
    done
    echo "# $model done ($(( $(date +%s) - start )) s)" >&2
done

"$PY" - "$OUT" "$MODELS" "$HWS" "$BATCHES" <<'PY'
import json, os, sys
out, models, hws, batches = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), [int(b) for b in sys.argv[4].split()]
short = {"weights": "W", "optim": "O", "acts": "A", "grads": "G", "none": "-"}
def placement(p):   # "optim=0.35,acts": a kind whole, or its share on the SSD (fractional placement)
    p = p.replace(" (auto)", "")
    if p == "none":
        return "-"
    kinds = [k.split("=") for k in p.split(",")]
    if all(len(k) == 1 for k in kinds):
        return "".join(short[k[0]] for k in kinds)
    return " ".join(short[k[0]] + (f"{100 * float(k[1]):.0f}%" if len(k) == 2 else "") for k in kinds)
def limit(r):   # the critical path's shares of the iteration, largest first, those of 10% or more
    cp = sorted(((v, k) for k, v in r["critical_path"].items() if v >= 0.1 * r["iter_s"]), reverse=True)
    text = ", ".join(f"{k} {100 * v / r['iter_s']:.0f}%" for v, k in cp)
    u = r["utilization"]   # and what is saturated beside the compute thread
    busy = {"ssd": max([p["busy"] for p in u["ssd"]] or [0]), "link": u["link"], "interconnect": u["interconnect"],
            "AdamW": u["adamw"]}
    sat = [f"{k} {100 * v:.0f}% busy" for k, v in busy.items() if v >= 0.9]
    return text + (" (" + ", ".join(sat) + ")" if sat else "")
gpu_hws = [h for h in hws if "cluster" not in json.load(open(h))]
cpu_hws = [h for h in hws if h not in gpu_hws]

def cells_of(model, hw, batch, per, rate, tflops):
    """One row's cells for each schedule from its prediction, per GPU or per node (per: the prediction's
    ranks or GPUs on one of them; rate, tflops: formats), or why there is none; and the model's parameters."""
    cells, params = {}, None
    for sched in ("vertical", "horizontal"):
        base = f"{out}/{model}-{os.path.basename(hw)[:-5]}-g{batch}-{sched}"
        if os.path.exists(base + ".json"):
            r = json.load(open(base + ".json"))
            params = r["params"]
            n = per(r)
            tok = r["micro_batch"] * r["seq"] * r["grad_accum"]
            bound = tok / r["roofline"]["bound_s"] * n
            cells[sched] = (f'{r["micro_batch"]} x {r["grad_accum"]}', placement(r["offload"]),
                            f'{r["tokens_per_s"] * n:{rate}}', f'{r["model_flops_per_s"] * n / 1e12:{tflops}}',
                            f'{bound:{rate}} ({r["roofline"]["limit"]})', limit(r))
        else:
            msg = open(base + ".err").read().strip().splitlines()[-1] if os.path.exists(base + ".err") else "not run"
            msg = "does not fit" if "too small" in msg else msg
            cells[sched] = ("", "", msg, "", "", "")
    return cells, params

if gpu_hws:
  print("Predicted by `strata simulate` (bench/scale_table.sh). Per GPU: tokens/s and model TFLOP/s (6 x parameters x tokens,")
  print("plus attention; recomputation not counted); bound: the roofline's tokens/s per GPU and its limit; limited by: the")
  print("simulated critical path, by resource, as shares of the iteration (10% or more), and in brackets a resource busy 90%")
  print("of the iteration or more. B x M: micro-batch x micro-batches per GPU. On SSD: W weights, O optimizer state,")
  print("A activation checkpoints, G gradients (- none); O35% 35% of the optimizer state (fractional placement).")
for model in (models if gpu_hws else []):
    print()
    params = None
    rows = []
    for hw in gpu_hws:
        for batch in batches:
            cells, p = cells_of(model, hw, batch, lambda r: 1, ".0f", ".0f")
            params = p or params
            gpus = 4 if hw.endswith("x4.json") else 1
            rows.append((gpus, batch, cells))
    title = f"{model} ({params / 1e9:.1f}B parameters)" if params else model
    print(f"**{title}**")
    print()
    print("| GPUs | global batch | schedule | B x M | on SSD | tokens/s/GPU | TFLOP/s/GPU | bound tokens/s/GPU | limited by |")
    print("| ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | --- |")
    for gpus, batch, cells in rows:
        for sched in ("vertical", "horizontal"):
            c = cells[sched]
            print(f"| {gpus} | {batch} | {sched} | {c[0]} | {c[1]} | {c[2]} | {c[3]} | {c[4]} | {c[5]} |")
if cpu_hws:
    print()
    print("CPU clusters, predicted by `strata simulate` (bench/scale_table.sh): `mpirun -np N strata train` with N ranks, each")
    print("node's share of them on its cores, memory and drives (configs/hw/cpu-*.json). Per node: tokens/s and model TFLOP/s;")
    print("bound: the roofline's tokens/s per node and its limit (interconnect: the rank's collectives one after another);")
    print("limited by: as above (interconnect: waiting for the other ranks). B x M: micro-batch x micro-batches per rank.")
for model in (models if cpu_hws else []):
    print()
    params = None
    rows = []
    for hw in cpu_hws:
        for batch in batches:
            cells, p = cells_of(model, hw, batch, lambda r: r["ranks_per_node"], ".1f", ".2f")
            params = p or params
            c = json.load(open(hw))["cluster"]
            rows.append((c.get("nodes", 1), c.get("nodes", 1) * c.get("ranks_per_node", 1), batch, cells))
    title = f"{model} ({params / 1e9:.1f}B parameters)" if params else model
    print(f"**{title}**, CPU nodes")
    print()
    print("| nodes | ranks | global batch | schedule | B x M | on SSD | tokens/s/node | TFLOP/s/node | bound tokens/s/node | limited by |")
    print("| ---: | ---: | ---: | --- | ---: | --- | ---: | ---: | ---: | --- |")
    for nodes, ranks, batch, cells in rows:
        for sched in ("vertical", "horizontal"):
            c = cells[sched]
            print(f"| {nodes} | {ranks} | {batch} | {sched} | {c[0]} | {c[1]} | {c[2]} | {c[3]} | {c[4]} | {c[5]} |")
PY
