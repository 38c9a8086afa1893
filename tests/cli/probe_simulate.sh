#!/usr/bin/env bash
# probe_simulate.sh STRATA SOURCE_DIR - `strata probe` measures this machine
# (small: a tiny model, a tiny SSD file) into a description that loads back;
# `strata simulate` predicts from it, as text and as JSON (vertical reads the
# weights less than horizontal); bad descriptions and flags fail cleanly,
# naming the field.
. "$(dirname "$0")/common.bash" "$@"
mkdir -p "$tmp/st1" "$tmp/st2"

# probe
check "probe --help describes --store" bash -c "'$STRATA' probe --help | grep -q -- '--store DIR'"
expect_rc "probe: unknown flag" 2 "strata probe" "$STRATA" probe --bogus 1
expect_rc "probe: --size not a multiple of 4096" 2 "--size" "$STRATA" probe --size 5000
expect_rc "probe: --reps 0" 2 "--reps" "$STRATA" probe --reps 0
expect_fail "probe: a missing store directory" "$tmp/missing does not exist" \
  "$STRATA" probe --store "$tmp/missing" --size 64K --model gpt2-tiny --micro-batch 2 --seq 32 --reps 1 --out "$tmp/x.json"
expect_fail "probe: an unknown model" "gpt2-huge" "$STRATA" probe --model gpt2-huge --out "$tmp/x.json"
check "probe: nothing written for failed probes" test ! -e "$tmp/x.json"
# an untied Llama: the head it times is the head unit's (the embedding unit holds no head)
check "probe: an untied Llama's head" "$STRATA" probe --model llama-tiny --micro-batch 2 --seq 32 --reps 1 \
  --out "$tmp/llama-tiny.json"
# (enough trial steps that the drives are busy long enough for a rate)
"$STRATA" probe --store "$tmp/st1,$tmp/st2" --size 64K --model gpt2-tiny --micro-batch 2 --seq 32 --reps 1 --trial-steps 40 \
  --name tiny-probe --out "$tmp/hw.json" >"$tmp/probe.out" 2>"$tmp/probe.err"
check "probe: small run succeeds" test $? -eq 0
check "probe: progress on stderr" grep -q "AdamW on the optimizer thread" "$tmp/probe.err"
check "probe: summary on stdout" grep -Eq "^ssd\[1\] .*st2: read [0-9.]+ GB/s" "$tmp/probe.out"
check "probe: compute timed beside the first drive's transfers" bash -c \
  "grep -q 'the block alone and beside reads and writes on $tmp/st1, in turns' '$tmp/probe.err' &&
   grep -Eq '^beside the drives. transfers: compute [0-9.]+x slower; the transfers beside compute [0-9.]+x slower' '$tmp/probe.out'"
check "probe: test files removed" bash -c "[ -z \"\$(find '$tmp/st1' '$tmp/st2' -mindepth 1)\" ]"
check "probe: the executor's trial runs, in memory and on the drives" bash -c \
  "grep -q 'the executor itself on 2 blocks of gpt2-tiny' '$tmp/probe.err' &&
   grep -q \"the blocks' optimizer state on the store directories\" '$tmp/probe.err' &&
   grep -Eq '^trial: the executor on 2 blocks of gpt2-tiny: .* [0-9.]+x the rates' '$tmp/probe.out' &&
   grep -Eq '^the trial on the drives: [0-9.]+ s a step measured, [0-9.]+ s predicted from this description' '$tmp/probe.err'"
check "probe: the trial's store removed" bash -c "[ ! -e '$tmp/st1/strata-probe-trial' ] && [ ! -e '$tmp/st2/strata-probe-trial' ]"
check "  its record: the blocks' factor, each drive's rates (the test file's kept), compute sharing a core" \
  "$PY" - "$tmp/hw.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p, c, ct = d["probe"], d["compute"], d["contention"]
assert p["trial_layers"] == 2 and p["trial_work_s"] > 0 and p["trial_predicted_work_s"] > 0, p
assert "trial_long_layers" not in p, p   # the slice is the whole model already: no longer one
assert p["trial_ssd_step_s"] > 0 and p["trial_ssd_work_s"] > 0, p
assert 0.25 <= c["block_factor"] <= 4, c
# a tiny model's state fits in one stripe: the trial moves it through the first drive only, and a drive it
# did not keep busy keeps the test file's rates
s0 = d["ssd"][0]
assert s0["bench_read_gbps"] > 0 and s0["bench_write_gbps"] > 0 and s0["read_gbps"] != s0["bench_read_gbps"], s0
assert all(("bench_read_gbps" in s) == ("bench_write_gbps" in s) for s in d["ssd"]), d["ssd"]
# while AdamW runs at 1/os of its speed, compute gets the rest of the core it shares: 1/cs = 1 - 1/os
os_, cs = ct["optimizer_slowdown"], ct["compute_slowdown"]
assert p["compute_beside_adamw"] >= 1
if os_ >= 1.05: assert abs(1 / cs + 1 / os_ - 1) < 1e-9, ct
else: assert cs == p["compute_beside_adamw"], (ct, p)
assert ct["compute_beside_io"] >= 1 and ct["io_beside_compute"] >= 1, ct
PY
check "probe: the description names the kernel set its compute rates were measured with" bash -c \
  "k=\$('$STRATA' version | sed -n 's/^matrix products: OpenBLAS, \\(.*\\) kernels\$/\\1/p') &&
   [ -n \"\$k\" ] && '$PY' -c 'import json,sys; assert json.load(open(sys.argv[1]))[\"probe\"][\"blas_kernels\"] == sys.argv[2]' \
     '$tmp/hw.json' \"\$k\""
"$PY" - "$tmp/hw.json" "$tmp/hw-other-kernels.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["probe"]["blas_kernels"] = "Prescott" if d["probe"]["blas_kernels"].lower() != "prescott" else "Haswell"
json.dump(d, open(sys.argv[2], "w"))
PY
check "simulate: no warning on a description of this process's kernels" bash -c \
  "'$STRATA' simulate --hw '$tmp/hw.json' --model gpt2-tiny --micro-batch 2 --seq 32 2>'$tmp/k1.err' >/dev/null &&
   ! grep -q 'kernels' '$tmp/k1.err'"
check "simulate, plan: a warning on a description measured with other kernels" bash -c \
  "'$STRATA' simulate --hw '$tmp/hw-other-kernels.json' --model gpt2-tiny --micro-batch 2 --seq 32 2>'$tmp/k2.err' >/dev/null &&
   grep -Eq '^warning: .*hw-other-kernels.json was measured with OpenBLAS.s (Prescott|Haswell) kernels and this process runs its .* kernels' '$tmp/k2.err' &&
   '$STRATA' plan --hw '$tmp/hw-other-kernels.json' --model gpt2-tiny --global-batch 2 --seq 32 2>&1 >/dev/null | grep -Eq '^warning: .*hw-other-kernels.json was measured with OpenBLAS.s .* kernels'"
check "probe: AdamW alone timed before and after compute beside it, the faster kept" "$PY" - "$tmp/hw.json" \
  "$tmp/probe.err" <<'PY'
import json, re, sys
rate = json.load(open(sys.argv[1]))["optimizer"]["adamw_params_per_s_per_thread"]
err = open(sys.argv[2]).read()
first = re.search(r"AdamW on the optimizer thread .*\n  (\d+) M parameters/s", err)
again = re.search(r"\n  AdamW alone again: (\d+) M parameters/s", err)
assert first and again, err
assert round(rate / 1e6) == max(int(first.group(1)), int(again.group(1))), (rate, first.group(1), again.group(1))
PY
# one block, then a longer slice: gpt2-tiny's two, the whole model
"$STRATA" probe --model gpt2-tiny --micro-batch 2 --seq 32 --reps 1 --trial-steps 4 --trial-layers 1 \
  --out "$tmp/long.json" >"$tmp/long.out" 2>"$tmp/long.err"
check "probe --trial-layers 1: the trial on 1 block, then on the model's 2" "$PY" - "$tmp/long.json" "$tmp/long.err" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["probe"]
assert p["trial_layers"] == 1 and p["trial_long_layers"] == 2 and p["trial_long_work_s"] > 0, p
assert 0.25 <= d["compute"]["block_factor"] <= 4, d["compute"]
err = open(sys.argv[2]).read()
assert "the executor on 2 blocks, all state in memory" in err, err
assert "for the whole model's 2" in err or "no more than the shorter slice's" in err, err
# the longer slice twice (a third time when the two differ by more than 10%): their mean, of three the median
import re
works = [float(w) for w in re.findall(r"\(trial \d\)\.\.\.\n  ([\d.]+) s a step of work\n", err)]
assert len(works) in (2, 3), (works, err)
lo, hi = min(works[:2]), max(works[:2])   # printed to 0.1 ms: the comparisons allow that
if len(works) == 2:
    assert hi <= lo * 1.10 + 2e-4, (works, err)
    want = sum(works) / 2
else:
    assert hi >= lo * 1.10 - 2e-4 and "a third" in err, (works, err)
    want = sorted(works)[1]
assert abs(p["trial_long_work_s"] - want) <= 2e-4, (p, works)
PY
check "  its summary names both slices" grep -Eq "^trial: the executor on 1 block of gpt2-tiny: .*; on 2 blocks [0-9.]+ s" \
  "$tmp/long.out"
"$STRATA" probe --store "$tmp/st1" --size 64K --model gpt2-tiny --micro-batch 2 --seq 32 --reps 1 --trial-steps 0 \
  --out "$tmp/notrial.json" >"$tmp/notrial.out" 2>"$tmp/notrial.err"
check "probe --trial-steps 0: no trial, the test file's rates stand" "$PY" - "$tmp/notrial.json" "$tmp/notrial.err" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert "block_factor" not in d["compute"] and "trial_layers" not in d["probe"], d
assert "bench_read_gbps" not in d["ssd"][0] and d["ssd"][0]["read_gbps"] > 0
assert "executor itself" not in open(sys.argv[2]).read()
PY
expect_rc "probe --trial-steps 1: usage error" 2 "--trial-steps" "$STRATA" probe --trial-steps 1 --out "$tmp/x.json"
"$STRATA" probe --update "$tmp/hw.json" --store "$tmp/st2" --size 64K --out "$tmp/hw2.json" >"$tmp/upd.out" 2>"$tmp/upd.err"
check "probe --update: re-measures the store only (no compute measured; the trial on the drive again)" \
  bash -c "[ $? -eq 0 ] && ! grep -q 'AdamW on the optimizer thread' '$tmp/upd.err' &&
           ! grep -q 'the executor itself' '$tmp/upd.err' && grep -q \"the blocks' optimizer state\" '$tmp/upd.err' &&
           grep -q 'beside reads and writes on $tmp/st2' '$tmp/upd.err'"
check "  keeps the rest of the description, replaces the SSD list" "$PY" - "$tmp/hw.json" "$tmp/hw2.json" <<'PY'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
# the store's CPU per GB is the checksum (kept) and the kernel's part (the new drive's)
io_a, io_b = a["compute"].pop("io_cpu_s_per_gb"), b["compute"].pop("io_cpu_s_per_gb")
assert a["compute"] == b["compute"] and a["optimizer"] == b["optimizer"] and a["name"] == b["name"]
# compute beside the drive's transfers: measured again with it
ca, cb = a["contention"], b["contention"]
assert cb["compute_beside_io"] >= 1 and cb["io_beside_compute"] >= 1, cb
assert cb["compute_slowdown"] == ca["compute_slowdown"], (ca, cb)
assert len(a["ssd"]) == 2 and len(b["ssd"]) == 1 and b["ssd"][0]["path"].endswith("st2") and b["ssd"][0]["read_gbps"] > 0
pb = b["probe"]
assert pb["checksum_gbps"] == a["probe"]["checksum_gbps"], (pb, a["probe"])
assert abs(io_b - (1 / pb["checksum_gbps"] + pb.get("io_kernel_s_per_gb", 0))) < 1e-9 * io_b, (io_b, pb)
PY
cp "$tmp/hw.json" "$tmp/hw3.json" && mkdir -p "$tmp/cwd"
(cd "$tmp/cwd" && "$STRATA" probe --update "$tmp/hw3.json" --store "$tmp/st2" --size 64K >"$tmp/upd3.out" 2>&1) || cat "$tmp/upd3.out"
check "probe --update FILE without --out updates FILE (and writes no hw.json)" "$PY" - "$tmp/hw3.json" "$tmp/cwd" <<'PY'
import json, os, sys
b = json.load(open(sys.argv[1]))
assert len(b["ssd"]) == 1 and b["ssd"][0]["path"].endswith("st2"), b["ssd"]
assert not os.path.exists(os.path.join(sys.argv[2], "hw.json"))
PY
expect_rc "probe --update without --store: usage error" 2 "--store" "$STRATA" probe --update "$tmp/hw.json"
check "probe: the description has every measured field" "$PY" - "$tmp/hw.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["name"] == "tiny-probe"
c = d["compute"]
assert c["backend"] == "cpu" and c["cores"] >= 1
for k in ("matmul_gflops", "head_matmul_gflops", "attention_gflops", "other_gbps", "widen_gbps"): assert c[k] > 0, k
assert len(d["ssd"]) == 2 and all(s["read_gbps"] > 0 and s["write_gbps"] > 0 for s in d["ssd"])
assert d["optimizer"]["adamw_params_per_s_per_thread"] > 0 and d["optimizer"]["threads"] == 1
assert d["contention"]["compute_slowdown"] >= 1 and d["contention"]["optimizer_slowdown"] >= 1
assert d["memory"]["host_bytes"] > 0 and d["probe"]["model"] == "gpt2-tiny"
# the store's CPU per GB moved: the checksum's (measured on one core) and the kernel's (the SSD cycle's CPU time)
p = d["probe"]
assert p["checksum_gbps"] > 0.05 and p.get("io_kernel_s_per_gb", 0) >= 0, p
assert abs(c["io_cpu_s_per_gb"] - (1 / p["checksum_gbps"] + p.get("io_kernel_s_per_gb", 0))) < 1e-9 * c["io_cpu_s_per_gb"]
PY

# simulate, on the description just written
sim() { "$STRATA" simulate --hw "$tmp/hw.json" --model gpt2-tiny --micro-batch 2 --seq 32 "$@"; }
check "simulate: the probed description loads and predicts" \
  bash -c "'$STRATA' simulate --hw '$tmp/hw.json' --model gpt2-tiny --micro-batch 2 --seq 32 --grad-accum 4 \
           --offload weights,optim,acts,grads --alpha 0.5 --clip 0 --precision mixed >'$tmp/sim.out'"
check "simulate: prints time, tokens/s, bottleneck, bytes, memory, roofline" bash -c \
  "grep -q '^iteration: .* tokens/s' '$tmp/sim.out' && grep -q 'bottleneck: ' '$tmp/sim.out' &&
   grep -q '^SSD per iteration: weights' '$tmp/sim.out' && grep -q '^memory: device' '$tmp/sim.out' &&
   grep -q '^roofline: ' '$tmp/sim.out' && grep -q '^utilization: compute' '$tmp/sim.out'"
sim --grad-accum 4 --schedule vertical --offload weights,optim --json >"$tmp/v.json" 2>"$tmp/err"
check "simulate --json vertical" test $? -eq 0
sim --grad-accum 4 --schedule horizontal --offload weights,optim --json >"$tmp/h.json" 2>"$tmp/err"
check "simulate --json horizontal" test $? -eq 0
check "simulate: vertical reads the weights 4x less than horizontal at 4 micro-batches" \
  "$PY" - "$tmp/v.json" "$tmp/h.json" <<'PY'
import json, sys
v, h = (json.load(open(p)) for p in sys.argv[1:3])
assert v["iter_s"] > 0 and h["iter_s"] > 0 and v["tokens_per_s"] > 0
assert h["bytes_read"]["weights"] == 4 * v["bytes_read"]["weights"], (v["bytes_read"], h["bytes_read"])
assert v["bytes_read"]["master"] == h["bytes_read"]["master"]
PY
sim --grad-accum 4 --offload weights,optim --optimizer-io interleaved --json >"$tmp/i.json" 2>"$tmp/err"
check "simulate --optimizer-io: the order is the JSON's, phased by default" "$PY" - "$tmp/v.json" "$tmp/i.json" <<'PY'
import json, sys
p, i = (json.load(open(f)) for f in sys.argv[1:3])
assert p["optimizer_io"] == "phased" and i["optimizer_io"] == "interleaved", (p["optimizer_io"], i["optimizer_io"])
assert p["bytes_read"] == i["bytes_read"] and p["iter_s"] != i["iter_s"]
PY
expect_rc "simulate: --optimizer-io alternating is the executor's measuring aid" 2 "simulate phased and interleaved each" \
  sim --optimizer-io alternating
sim --trace "$tmp/sim.trace.json" >/dev/null 2>"$tmp/err"
check "simulate --trace writes a Chrome trace" "$PY" -c \
  "import json,sys; d=json.load(open('$tmp/sim.trace.json')); assert any(e.get('ph')=='X' for e in d['traceEvents'])"

# bad flags (exit 2) and bad descriptions (exit 1, naming the field)
expect_rc "simulate: --hw is required" 2 "--hw" "$STRATA" simulate --model gpt2-tiny
expect_rc "simulate: unknown --offload state" 2 "--offload: unknown state 'disk'" sim --offload weights,disk
expect_rc "simulate: unknown schedule" 2 "--schedule" sim --schedule diagonal
expect_rc "simulate: --alpha out of range" 2 "--alpha" sim --alpha 2
expect_rc "simulate: model and shape together" 2 "either --model" sim --n-layer 2 --n-head 2 --d-model 64
expect_fail "simulate: a missing description" "nope.json" "$STRATA" simulate --hw "$tmp/nope.json"
printf '{\n  "name": "x",\n  oops\n}\n' >"$tmp/bad1.json"
expect_fail "simulate: malformed JSON says where" "bad1.json: malformed JSON at line 3" \
  "$STRATA" simulate --hw "$tmp/bad1.json"
"$PY" - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
base = json.load(open(f"{d}/hw.json"))
def write(name, edit):
    x = json.loads(json.dumps(base)); edit(x); json.dump(x, open(f"{d}/{name}", "w"))
write("missing.json", lambda x: x["compute"].pop("matmul_gflops"))
write("negative.json", lambda x: x["ssd"][1].update(read_gbps=-1))
write("nossd.json", lambda x: x.update(ssd=[]))
write("small.json", lambda x: x["memory"].update(device_bytes=1000))
PY
expect_fail "simulate: a missing field is named" "missing field compute.matmul_gflops" \
  "$STRATA" simulate --hw "$tmp/missing.json"
expect_fail "simulate: a negative field is named" "ssd\[1\]\.read_gbps: must be > 0" \
  "$STRATA" simulate --hw "$tmp/negative.json"
expect_fail "simulate: state on the SSD of a machine without one" "ssd" \
  "$STRATA" simulate --hw "$tmp/nossd.json" --model gpt2-tiny --seq 32 --offload optim
expect_fail "simulate: a working set larger than the device names memory.device_bytes" "memory.device_bytes" \
  "$STRATA" simulate --hw "$tmp/small.json" --model gpt2-tiny --seq 32
finish
