#!/usr/bin/env bash
# head_unit.sh - issue 16's unit layout for an untied head: the same untied
# Llama trained by two strata binaries, one that keeps the head in the
# embedding unit (BEFORE: a build of e84da4e or earlier) and one that gives
# it a unit of its own (AFTER), with the compute weights and the optimizer
# state on the SSD, both schedules. Per run: the SSD bytes of compute
# weights read per step and the buffers allocated (both exact, from the
# run's own summary), and the mean iteration time. The two binaries
# alternate within each round, so that this disk's and these cores' drift
# hits both alike; the script prints every round and the median ratio.
#
#   bench/head_unit.sh BEFORE AFTER [ROUNDS] [OUT_DIR]
#   defaults: ROUNDS 3, OUT_DIR bench/results/head_unit
#
# The model: 4 Llama blocks of d_model 256 (GQA 4/2, d_ff 688) with GPT-2's
# vocabulary and an untied head: 12.9M parameters in each of the embedding
# and the head, 0.72M in a block, so the head is as large as 18 blocks
# (Llama 3's 128256 x 4096 head is about 2.4 of llama-3-8b's blocks; the
# small model exaggerates the share so that this machine shows it).
set -euo pipefail
BEFORE=${1:?usage: bench/head_unit.sh BEFORE AFTER [ROUNDS] [OUT_DIR]}
AFTER=${2:?usage: bench/head_unit.sh BEFORE AFTER [ROUNDS] [OUT_DIR]}
ROUNDS=${3:-3}
OUT=${4:-bench/results/head_unit}
DATA=${DATA:-data/corpus-gpt2}
PY=/usr/bin/python3
for b in "$BEFORE" "$AFTER"; do [ -x "$b" ] || { echo "no strata binary at $b" >&2; exit 1; }; done
[ -d "$DATA" ] || { echo "no dataset at $DATA: run scripts/demo.sh, or strata prepare data/corpus --out $DATA" >&2; exit 1; }
mkdir -p "$OUT"

run() {   # binary schedule log
  rm -rf "$OUT/run"
  "$1" train --arch llama --n-layer 4 --n-head 4 --n-kv-head 2 --d-model 256 --d-ff 688 --vocab 50257 \
    --data "$DATA" --batch 8 --micro-batch 2 --seq 128 --steps 8 --precision mixed --threads 2 \
    --schedule "$2" --offload weights,optim --commit-every 0 --run-dir "$OUT/run" >"$3" 2>&1
  rm -rf "$OUT/run"
}

rows="$OUT/rows.tsv"
: >"$rows"
for r in $(seq 1 "$ROUNDS"); do
  for sched in vertical horizontal; do
    for side in before after; do
      bin=$BEFORE; [ $side = after ] && bin=$AFTER
      log="$OUT/$sched-$side-$r.log"
      run "$bin" "$sched" "$log"
      printf '%s\t%s\t%s\t%s\n' "$r" "$sched" "$side" "$log" >>"$rows"
    done
  done
done

$PY - "$rows" <<'EOF'
import re, statistics, sys
rows = [l.rstrip('\n').split('\t') for l in open(sys.argv[1])]
def parse(path):
    t = open(path).read()
    it = float(re.search(r'^iteration: ([0-9.]+) s', t, re.M).group(1))
    w = re.search(r'^SSD per iteration: weights ([0-9.]+) (\w+) read', t, re.M)
    wr = float(w.group(1)) * {'KiB': 1/1024, 'MiB': 1, 'GiB': 1024}[w.group(2)]
    buf = re.search(r'; ([0-9.]+ \w+) of buffers \((\d+) bytes\)', t, re.M)
    return it, wr, int(buf.group(2)) / 2**20
res = {}
for r, sched, side, log in rows:
    res.setdefault((sched, r), {})[side] = parse(log)
print('| schedule | round | weights read per step, head in unit 0 -> own unit (MiB) | buffers (MiB) | iteration (s) | after / before |')
print('| --- | ---: | ---: | ---: | ---: | ---: |')
ratios = {}
for (sched, r), d in sorted(res.items()):
    b, a = d['before'], d['after']
    ratio = a[0] / b[0]
    ratios.setdefault(sched, []).append(ratio)
    print(f'| {sched} | {r} | {b[1]:.1f} -> {a[1]:.1f} | {b[2]:.1f} -> {a[2]:.1f} | {b[0]:.3f} -> {a[0]:.3f} | {ratio:.2f} |')
for sched, v in ratios.items():
    print(f'| {sched} | median | | | | **{statistics.median(v):.2f}** |')
EOF
