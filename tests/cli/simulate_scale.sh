#!/usr/bin/env bash
# simulate_scale.sh STRATA SOURCE_DIR - `strata simulate` at scale: the
# A100 hardware files load; a GPT-175B configuration on one and on four GPUs
# (data parallel: --global-batch splits over the devices, throughput is per
# device, the interconnect carries the collectives); --offload auto puts on
# the SSD what the host cannot hold; a working set larger than the GPU and
# bad flags are refused naming the cause.
. "$(dirname "$0")/common.bash" "$@"
X1="$SRC/configs/hw/a100-80g-x1.json"
X4="$SRC/configs/hw/a100-80g-x4.json"
sim() { "$STRATA" simulate --model gpt-175b --seq 2048 --precision mixed --clip 0 "$@"; }

check "simulate --help lists the large models and --devices" \
  bash -c "'$STRATA' simulate --help | grep -q 'gpt-175b' && '$STRATA' simulate --help | grep -q -- '--devices N'"
sim --hw "$X1" --micro-batch 8 --global-batch 32 --offload auto --alpha 0.25 --json >"$tmp/x1.json" 2>"$tmp/err"
check "simulate: gpt-175b on one A100" test $? -eq 0
sim --hw "$X4" --micro-batch 8 --global-batch 32 --offload auto --alpha 0.25 --json >"$tmp/x4.json" 2>"$tmp/err"
check "simulate: gpt-175b on four A100s" test $? -eq 0
sim --hw "$X4" --devices 1 --micro-batch 8 --global-batch 32 --offload auto --alpha 0.25 --json >"$tmp/x4d1.json" 2>"$tmp/err"
check "simulate: --devices 1 on the four-GPU node" test $? -eq 0
for n in x1 x4; do   # one placement on both nodes: the whole optimizer state and gradients on the SSD
  hw="$X1"; [ $n = x4 ] && hw="$X4"
  sim --hw "$hw" --micro-batch 8 --global-batch 32 --offload optim,grads --alpha 0.25 --json >"$tmp/$n-whole.json" 2>"$tmp/err"
done
check "simulate: data parallel splits the batch, shards the state, adds collectives" "$PY" - "$tmp" <<'PY'
import json, re, sys
d = sys.argv[1]
one, four, d1 = (json.load(open(f"{d}/{n}.json")) for n in ("x1", "x4", "x4d1"))
assert one["devices"] == 1 and four["devices"] == 4 and d1["devices"] == 1
assert one["grad_accum"] == 4 and four["grad_accum"] == 1 and four["global_batch"] == 32
# 2.1 TB of optimizer state: not in 1 TB of host memory; the rest filled unit by unit
assert re.fullmatch(r"optim=0\.\d+,grads(=0\.\d+)? \(auto\)", one["offload"]), one["offload"]
assert one["interconnect_bytes"] == 0 and four["interconnect_bytes"] > 0
assert abs(four["tokens_per_s_node"] - 4 * four["tokens_per_s"]) <= 1e-12 * four["tokens_per_s_node"]
# the sharded optimizer state crosses the node's SSDs once, whatever the devices
one_whole, four_whole = (json.load(open(f"{d}/{n}-whole.json")) for n in ("x1", "x4"))
assert four_whole["bytes_read"]["master"] == one_whole["bytes_read"]["master"] > 0
# the one-GPU node and the four-GPU node restricted to one device predict the same
for k in ("iter_s", "tokens_per_s", "total_read", "total_written", "link_to_device"):
    assert one[k] == d1[k], k
for r in (one, four):
    assert r["backend"] == "gpu" and r["iter_s"] >= r["roofline"]["bound_s"] * (1 - 1e-9)
    assert r["memory"]["device"] <= 80e9 and r["memory"]["host"] <= 1e12
PY
sim --hw "$X4" --micro-batch 8 --global-batch 32 --offload optim,grads >"$tmp/x4.txt" 2>"$tmp/err"
check "simulate: text says data parallel, per device, the interconnect" bash -c \
  "grep -q '^data parallel: 4 devices, global batch 32' '$tmp/x4.txt' && grep -q 'tokens/s, .* per device' '$tmp/x4.txt' &&
   grep -q 'interconnect [0-9.]* GiB per device' '$tmp/x4.txt' && grep -q '^roofline: .*interconnect' '$tmp/x4.txt'"

expect_fail "simulate: a working set larger than the GPU" "memory.device_bytes .* is too small" \
  sim --hw "$X1" --micro-batch 64 --global-batch 64 --offload auto
expect_fail "simulate: state larger than the host, nothing on the SSD" "memory.host_bytes .* too small" \
  sim --hw "$X1" --micro-batch 1 --global-batch 1 --offload none
expect_rc "simulate: --global-batch not a multiple of devices x micro-batch" 2 "--global-batch 30 is not a multiple of 4 devices" \
  sim --hw "$X4" --micro-batch 2 --global-batch 30
expect_rc "simulate: --grad-accum and --global-batch together" 2 "either --grad-accum or --global-batch" \
  sim --hw "$X4" --grad-accum 2 --global-batch 8
"$PY" - "$X1" "$tmp/cpu.json" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
d["compute"]["backend"] = "cpu"; d["host_device_gbps"] = 0
json.dump(d, open(sys.argv[2], "w"))
PY
expect_rc "simulate: --devices on a cpu description" 2 "gpu backend only" \
  sim --hw "$tmp/cpu.json" --devices 2 --micro-batch 1 --global-batch 2
finish
