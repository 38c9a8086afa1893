#!/usr/bin/env bash
# train_eval.sh STRATA SOURCE_DIR - `strata train`, `eval` and `sample` end to
# end on a tiny model, the saved weights cross-checked by the PyTorch
# reference, and bad input (files, shapes, token ids, lengths, run
# directories: one holding a run, or files not from a run) failing with a
# clear message and a non-zero exit; SIGINT stops a run after saving it.
. "$(dirname "$0")/common.bash" "$@"
FX="$SRC/tests/fixtures/gpt_small_init.safetensors"   # 2 layers, d 48, context 32, vocab 101

# Token files: nanoGPT raw uint16. A stream with ids < 101 that has structure
# to learn (a repeating ramp), one with an id past the vocabulary, one short.
"$PY" - "$tmp" <<'PY'
import struct, sys, random
d = sys.argv[1]
random.seed(5)
ramp = [(i * 7 + (i // 13)) % 101 for i in range(20000)]
open(f"{d}/train.bin", "wb").write(struct.pack(f"<{len(ramp)}H", *ramp))
open(f"{d}/val.bin", "wb").write(struct.pack("<4000H", *ramp[:4000]))
bad = [random.randrange(101) for _ in range(100)]
bad[77] = 101
open(f"{d}/bad_ids.bin", "wb").write(struct.pack("<100H", *bad))
open(f"{d}/short.bin", "wb").write(struct.pack("<10H", *ramp[:10]))
PY
mkdir -p "$tmp/ds" && cp "$tmp/train.bin" "$tmp/val.bin" "$tmp/ds/"

# --- eval -------------------------------------------------------------------------
"$STRATA" eval --model "$FX" --n-head 4 --tokens "$tmp/train.bin" --batch 2 --seq 16 >"$tmp/eval" 2>"$tmp/eval.err"
check "eval succeeds" test $? -eq 0
loss=$(awk '/^loss / {print $2}' "$tmp/eval")
check "  last line is 'loss <value>'" bash -c "tail -n1 '$tmp/eval' | grep -qE '^loss [0-9]+\.[0-9]+$'"
check "  untrained loss near ln(101) = 4.62 (got $loss)" awk "BEGIN{exit !($loss > 4.1 && $loss < 5.1)}"
expect_fail "eval: missing model file is named" "nope.safetensors" \
  "$STRATA" eval --model "$tmp/nope.safetensors" --tokens "$tmp/train.bin" --batch 1 --seq 8
head -c 3000 "$FX" >"$tmp/trunc.safetensors"
expect_fail "eval: truncated model names the file" "trunc.safetensors" \
  "$STRATA" eval --model "$tmp/trunc.safetensors" --tokens "$tmp/train.bin" --batch 1 --seq 8
expect_fail "eval: token id past the vocabulary names file and position" "bad_ids.bin.*(77|position)" \
  "$STRATA" eval --model "$FX" --n-head 4 --tokens "$tmp/bad_ids.bin" --batch 4 --seq 20
expect_fail "eval: --seq longer than the context" "longer than the context" \
  "$STRATA" eval --model "$FX" --n-head 4 --tokens "$tmp/train.bin" --batch 1 --seq 64
expect_fail "eval: too few tokens" "short.bin.*10 tokens" \
  "$STRATA" eval --model "$FX" --n-head 4 --tokens "$tmp/short.bin" --batch 1 --seq 16
expect_fail "eval: bad flag value is a usage error" "--batch" \
  "$STRATA" eval --model "$FX" --tokens "$tmp/train.bin" --batch zero
# A file with a tensor of the wrong shape, one with a tensor missing, one untied head.
"$PY" - "$SRC" "$FX" "$tmp" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/tools")
import torch, gpt2_reference as ref
t, meta = ref.load_safetensors(sys.argv[2])
d = sys.argv[3]
a = dict(t); a["h.1.mlp.c_fc.weight"] = torch.zeros(48, 100)
ref.save_safetensors(f"{d}/shape.safetensors", a)
b = dict(t); del b["h.0.ln_2.bias"]
ref.save_safetensors(f"{d}/missing.safetensors", b)
c = dict(t); c["lm_head.weight"] = t["wte.weight"] * 2
ref.save_safetensors(f"{d}/untied.safetensors", c)
PY
expect_fail "eval: wrong shape names the tensor" "shape.safetensors: tensor h.1.mlp.c_fc.weight has shape \[48, 100\]" \
  "$STRATA" eval --model "$tmp/shape.safetensors" --tokens "$tmp/train.bin" --batch 1 --seq 8
expect_fail "eval: missing tensor is named" "missing tensor h.0.ln_2.bias" \
  "$STRATA" eval --model "$tmp/missing.safetensors" --tokens "$tmp/train.bin" --batch 1 --seq 8
expect_fail "eval: untied lm_head refused" "lm_head.weight differs" \
  "$STRATA" eval --model "$tmp/untied.safetensors" --tokens "$tmp/train.bin" --batch 1 --seq 8

# --- train ------------------------------------------------------------------------
run() { "$STRATA" train --init "$FX" --n-head 4 --data "$tmp/ds" --batch 4 --micro-batch 2 --seq 16 \
          --steps 30 --lr 3e-3 --eval-every 10 --eval-batches 2 --threads 2 "$@"; }
run --run-dir "$tmp/run" >"$tmp/train.log" 2>&1
check "train succeeds" test $? -eq 0
check "  writes run.json, metrics.jsonl, weights, config.json" \
  test -s "$tmp/run/run.json" -a -s "$tmp/run/metrics.jsonl" -a -s "$tmp/run/model.safetensors" -a -s "$tmp/run/config.json"
check "  one metrics line per step plus the initial evaluation" test "$(wc -l <"$tmp/run/metrics.jsonl")" -eq 31
first=$(sed -n 's/^step 0: validation loss //p' "$tmp/train.log")
last=$(sed -n 's/^step 30: validation loss //p' "$tmp/train.log")
check "  validation loss falls ($first -> $last)" awk "BEGIN{exit !($last < $first - 1.0)}"
check "  plain log lines when stdout is not a terminal" bash -c "! grep -q $'\r' '$tmp/train.log'"
check "  peak resident memory reported" grep -q "^memory: peak resident" "$tmp/train.log"
run --eval-every 0 --steps 3 --run-dir "$tmp/noeval" >"$tmp/noeval.log" 2>&1
check "--eval-every 0 evaluates only at the end, not at step 0" bash -c \
  "! grep -q '\"step\": 0,' '$tmp/noeval/metrics.jsonl' && grep -q '^step 3: validation loss' '$tmp/noeval.log'"
# The saved weights: strata eval and the PyTorch reference agree on their loss.
"$STRATA" eval --model "$tmp/run/model.safetensors" --tokens "$tmp/val.bin" --batch 2 --seq 16 >"$tmp/e2" 2>/dev/null
ours=$(awk '/^loss / {print $2}' "$tmp/e2")
theirs=$("$PY" - "$SRC" "$tmp/run/model.safetensors" "$tmp/val.bin" <<'PY'
import sys, struct
sys.path.insert(0, sys.argv[1] + "/tools")
import torch, gpt2_reference as ref
t, meta = ref.load_safetensors(sys.argv[2])
assert meta.get("format") == "pt", meta
cfg = ref.GPT2Config(n_layer=2, n_head=4, d_model=48, n_ctx=32, vocab=101)
m = ref.GPT2(cfg, dtype=torch.float64)
ref.load_state(m, {k: v.double() for k, v in t.items()})
raw = open(sys.argv[3], "rb").read(2 * 33)
ids = torch.tensor(struct.unpack("<33H", raw), dtype=torch.long)
x = torch.stack([ids[0:16], ids[16:32]]); y = torch.stack([ids[1:17], ids[17:33]])
loss, _ = m(x, y)
print(f"{loss.item():.6f}")
PY
)
check "  saved weights: strata eval $ours = PyTorch $theirs" awk "BEGIN{d=$ours-$theirs; exit !(d < 1e-4 && d > -1e-4)}"
# The same run again is bit-for-bit the same (losses in the metrics).
run --run-dir "$tmp/run2" >/dev/null 2>&1
check "  deterministic: identical losses run to run" \
  bash -c "diff <(grep -o '\"loss\": [0-9.]*' '$tmp/run/metrics.jsonl') <(grep -o '\"loss\": [0-9.]*' '$tmp/run2/metrics.jsonl')"
# A JSON config gives the same as flags.
printf '{"init": "%s", "n-head": 4, "data": "%s", "batch": 4, "micro-batch": 2, "seq": 16, "steps": 30, "lr": 0.003, "eval-every": 10, "eval-batches": 2, "threads": 2}\n' \
  "$FX" "$tmp/ds" >"$tmp/cfg.json"
"$STRATA" train --config "$tmp/cfg.json" --run-dir "$tmp/run3" >/dev/null 2>&1
check "  --config gives the same run as the flags" \
  bash -c "diff <(grep -o '\"loss\": [0-9.]*' '$tmp/run/metrics.jsonl') <(grep -o '\"loss\": [0-9.]*' '$tmp/run3/metrics.jsonl')"

cp "$tmp/run/metrics.jsonl" "$tmp/metrics.before"
# The schedule executor with every kind of state on the SSD store: the same
# training (validation losses printed to 4 decimals are equal).
run --run-dir "$tmp/off" --schedule vertical --alpha 0.25 --offload weights,optim,acts --trace "$tmp/off.trace.json" \
  --mem-host 64M --mem-device 64M >"$tmp/off.log" 2>&1
check "train --schedule vertical --offload weights,optim,acts succeeds" test $? -eq 0
check "  summary: per-iteration time split and SSD traffic by kind" \
  bash -c "grep -q '^compute thread: computing .* waiting' '$tmp/off.log' && grep -q '^SSD per iteration: weights .* master .* activations' '$tmp/off.log'"
check "  the trace is JSON with compute, optimizer and SSD path lanes and spans on each" "$PY" -c "
import json, sys
ev = json.load(open('$tmp/off.trace.json'))['traceEvents']
lanes = {e['tid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == 'thread_name'}
used = {lanes[e['tid']] for e in ev if e['ph'] == 'X'}
sys.exit(0 if {'compute', 'optimizer', 'ssd path 0'} <= used else 1)"
expect_fail "train: a host budget too small is refused with what it needs" "host budget 1.00 MiB is too small: this placement needs" \
  run --run-dir "$tmp/o5" --schedule vertical --offload acts --mem-host 1M
check "  the store is in the run directory" test -f "$tmp/off/store/strata-store.manifest"
check "  SSD traffic and wear reported" \
  bash -c "grep -q '^SSD per iteration: .*; total .* read, .* written' '$tmp/off.log' && grep -q '^SSD wear: ' '$tmp/off.log'"
check "  same validation losses as in memory" \
  bash -c "diff <(grep '^step [0-9]*: validation' '$tmp/train.log') <(grep '^step [0-9]*: validation' '$tmp/off.log')"
# --offload auto (the default): the placement with the least SSD traffic that
# fits --mem-host: nothing with room to spare, more as the budget shrinks, and
# a clear refusal (with the smallest need) when nothing fits.
# (8 blocks of width 64: enough blocks that a few gradient buffers and the
# optimizer's streaming slots are smaller than the state they stand for)
auto() { "$STRATA" train --n-layer 8 --d-model 64 --n-head 4 --vocab 101 --data "$tmp/ds" --batch 4 --micro-batch 2 \
           --seq 16 --steps 2 --eval-batches 1 --threads 2 --run-dir "$tmp/auto" --overwrite --mem-host "$1" \
           >"$tmp/auto.log" 2>&1; }
auto 8M
check "auto placement with room: nothing on the SSD" grep -q "on the SSD: nothing" "$tmp/auto.log"
# under a budget, the least traffic that fits with memory filled unit by
# unit: shares of the kinds on the SSD, and the host's share within 1 MiB
# of the budget (a unit here is 0.2 MiB of state)
host_mib() { sed -n 's/^memory: device working set .*, host \([0-9.]*\) MiB;.*/\1/p' "$tmp/auto.log"; }
auto 5M
check "auto placement under 5M: shares of the optimizer state and gradients on the SSD" \
  grep -qE "on the SSD: optim=0\.[0-9]+,grads=0\.[0-9]+, optimizer I/O phased, 3 block gradient buffers;" "$tmp/auto.log"
check "  its host memory ($(host_mib) MiB) fills the budget" "$PY" -c "import sys; sys.exit(not 4 < $(host_mib) <= 5)"
auto 4M
check "auto placement under 4M: shares of weights and checkpoints too" \
  grep -qE "on the SSD: weights=0\.[0-9]+,optim=0\.[0-9]+,acts=0\.[0-9]+,grads=0\.[0-9]+, optimizer I/O phased, 3 block gradient buffers;" "$tmp/auto.log"
check "  its host memory ($(host_mib) MiB) fills the budget" "$PY" -c "import sys; sys.exit(not 3 < $(host_mib) <= 4)"
check "  and it trains" grep -q "step 2/2" "$tmp/auto.log"
auto 1000K
check "auto placement: a budget nothing fits is refused with the smallest need" \
  grep -q "host budget 1000.0 KiB is too small: this placement needs 3.41 MiB" "$tmp/auto.log"
expect_fail "train: --offload needs the executor" "need --schedule vertical or horizontal" run --run-dir "$tmp/o2" --offload acts --schedule memory
expect_fail "train: unknown --offload state" "unknown state 'gradz'" run --run-dir "$tmp/o3" --schedule vertical --offload gradz
expect_fail "train: unknown --schedule" "vertical, horizontal or memory" run --run-dir "$tmp/o4" --schedule diagonal

expect_fail "train: a run directory holding a run is refused" "already holds a run.*--overwrite" run --run-dir "$tmp/run"
check "  and the run in it is untouched" cmp -s "$tmp/run/metrics.jsonl" "$tmp/metrics.before"
# --overwrite keeps the old run until the new one has finished: a failing
# new run (a token past the vocabulary) leaves the old files as they were.
cp "$tmp/run/model.safetensors" "$tmp/model.before"
run --run-dir "$tmp/run" --overwrite --data "$tmp/bad_ids.bin" --batch 1 --micro-batch 1 >/dev/null 2>&1
check "  a failed --overwrite run exits non-zero" test $? -ne 0
check "  and puts the previous run back" bash -c "cmp -s '$tmp/run/model.safetensors' '$tmp/model.before' && cmp -s '$tmp/run/metrics.jsonl' '$tmp/metrics.before' && test ! -e '$tmp/run/.previous-run'"
run --run-dir "$tmp/run" --overwrite >/dev/null 2>&1
check "  --overwrite replaces it" test $? -eq 0
check "  and deletes the previous run when done" test ! -e "$tmp/run/.previous-run"

short_run() { "$STRATA" train --init "$FX" --n-head 4 --data "$tmp/ds" --batch 2 --seq 16 --steps 3 --eval-batches 1 \
                --threads 1 "$@"; }
# A directory with weights but no run.json (a downloaded model, the --init
# file's own directory) is not emptied without --overwrite.
mkdir -p "$tmp/hf" && cp "$FX" "$tmp/hf/model.safetensors" && echo '{"n_head": 4, "mine": 1}' >"$tmp/hf/config.json"
expect_rc "a directory holding model.safetensors is refused" 1 "hf.*model.safetensors.*--overwrite" \
  "$STRATA" train --init "$tmp/hf/model.safetensors" --data "$tmp/ds" --batch 2 --seq 16 --steps 2 --eval-batches 1 \
  --threads 1 --run-dir "$tmp/hf"
check "  and its files are untouched" cmp -s "$tmp/hf/model.safetensors" "$FX"
check "  (config.json too)" grep -q mine "$tmp/hf/config.json"
check "  (no run.json or metrics written)" test ! -e "$tmp/hf/run.json" -a ! -e "$tmp/hf/metrics.jsonl"
short_run --run-dir "$tmp/hf" --overwrite >/dev/null 2>&1
check "  --overwrite replaces it" bash -c "test -s '$tmp/hf/run.json' && ! cmp -s '$tmp/hf/model.safetensors' '$FX'"
# A fresh, empty directory is fine.
mkdir -p "$tmp/emptydir"
short_run --run-dir "$tmp/emptydir" >/dev/null 2>&1
check "an empty existing directory is accepted" test -s "$tmp/emptydir/model.safetensors"

mkdir -p "$tmp/ro" && chmod 555 "$tmp/ro"
if [ "$(id -u)" -ne 0 ]; then
  expect_fail "train: unwritable run directory" "ro.*(not writable|Permission)" run --run-dir "$tmp/ro"
else   # root writes anywhere: a run directory under a regular file cannot be created
  touch "$tmp/file"
  expect_fail "train: uncreatable run directory" "file/run.*(cannot create|Not a directory)" run --run-dir "$tmp/file/run"
fi
expect_fail "train: missing data" "nowhere" "$STRATA" train --model gpt2-tiny --data "$tmp/nowhere" --run-dir "$tmp/r4"
mkdir -p "$tmp/empty"
expect_fail "train: a directory with no dataset" "empty" "$STRATA" train --model gpt2-tiny --data "$tmp/empty" --run-dir "$tmp/r5"
expect_fail "train: token ids past the model's vocabulary" "bad_ids.bin.*(77|position)" \
  "$STRATA" train --init "$FX" --n-head 4 --data "$tmp/bad_ids.bin" --batch 1 --seq 16 --steps 5 --run-dir "$tmp/r6"
expect_fail "train: sequence longer than the model's context" "longer than the model's context" \
  "$STRATA" train --init "$FX" --n-head 4 --data "$tmp/ds" --seq 64 --steps 1 --run-dir "$tmp/r7"
expect_fail "train: batch not a multiple of the micro-batch" "multiple of --micro-batch" \
  "$STRATA" train --model gpt2-tiny --data "$tmp/ds" --batch 5 --micro-batch 2 --run-dir "$tmp/r8"
echo '{"steps": "many"}' >"$tmp/badcfg.json"
expect_fail "train: bad config value names the file and key" "badcfg.json.*steps" \
  "$STRATA" train --config "$tmp/badcfg.json" --data "$tmp/ds"
echo '{"stepz": 3}' >"$tmp/badcfg2.json"
expect_fail "train: unknown config key" "unknown setting \"stepz\"" \
  "$STRATA" train --config "$tmp/badcfg2.json" --data "$tmp/ds"

# SIGINT: stops after the current step, saves the weights, exits 130.
"$STRATA" train --init "$FX" --n-head 4 --data "$tmp/ds" --batch 2 --seq 16 --steps 100000 --eval-batches 1 \
  --threads 1 --run-dir "$tmp/sig" >"$tmp/sig.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/sig/metrics.jsonl" ] && [ "$(wc -l <"$tmp/sig/metrics.jsonl")" -gt 3 ] && break; sleep 0.1; done
kill -INT $pid
wait $pid
rc=$?
check "SIGINT exits 130 (got $rc)" test $rc -eq 130
check "  after saving the weights" test -s "$tmp/sig/model.safetensors"
check "  every metrics line is valid JSON" python3 -c "
import json, sys
for l in open(sys.argv[1]): json.loads(l)" "$tmp/sig/metrics.jsonl"

finish
