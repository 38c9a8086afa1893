#!/usr/bin/env bash
# plan.sh STRATA SOURCE_DIR - `strata plan` and `strata train --plan auto`:
# the planner prints its best candidates for a described machine and a
# budget, train follows its choice, and a budget nothing fits or a bad
# description is refused with what is wrong.
. "$(dirname "$0")/common.bash" "$@"
cat >"$tmp/hw.json" <<'JSON'
{"name": "test-2c",
 "compute": {"matmul_gflops": 100, "other_gbps": 10, "cores": 2},
 "ssd": [{"path": "", "read_gbps": 0.5, "write_gbps": 1.0}],
 "optimizer": {"adamw_params_per_s_per_thread": 5e8},
 "contention": {"compute_slowdown": 1.5, "optimizer_slowdown": 2.0},
 "memory": {"device_bytes": 17179869184, "host_bytes": 17179869184}}
JSON
"$STRATA" plan --hw "$tmp/hw.json" --model gpt2-124m --seq 32 --global-batch 8 --mem-host 1G >"$tmp/plan.log" 2>&1
check "plan succeeds" test $? -eq 0
check "  prints ranked candidates" grep -qE "^1 +(vertical|horizontal)" "$tmp/plan.log"
check "  and the flags of the best" grep -qE "^best: --schedule (vertical|horizontal) --micro-batch [0-9]+ --alpha" "$tmp/plan.log"
check "  which puts state on the SSD under a 1G host budget" grep -qE "^1 .*(weights|optim|acts|grads)" "$tmp/plan.log"
"$STRATA" plan --hw "$tmp/hw.json" --model gpt2-124m --seq 32 --global-batch 8 >"$tmp/plan2.log" 2>&1
check "  and nothing there with the machine's 16G" grep -qE "^1 .* none " "$tmp/plan2.log"
# --whole: only whole placements, so no share in any ranked row or in the best
"$STRATA" plan --hw "$tmp/hw.json" --model gpt2-124m --seq 32 --global-batch 8 --mem-host 1G --whole --top 16 \
  >"$tmp/whole.log" 2>&1
check "plan --whole succeeds" test $? -eq 0
check "  ranks whole placements" grep -qE "^1 .*(weights|optim|acts|grads)" "$tmp/whole.log"
check "  and none split" bash -c "! grep -E '^[0-9]+ |^best:' '$tmp/whole.log' | grep -q '='"
check "  while the full search under the same budget splits a kind" grep -qE "^best: .*--offload [a-z,=0-9.]*=" "$tmp/plan.log"
expect_fail "plan: a budget nothing fits is refused with the least need" "smallest host share" \
  "$STRATA" plan --hw "$tmp/hw.json" --model gpt2-124m --seq 32 --global-batch 8 --mem-host 1M
sed 's/"read_gbps": 0.5/"read_gbps": -1/' "$tmp/hw.json" >"$tmp/bad.json"
expect_fail "plan: a bad description names the field" "ssd\[0\].read_gbps" \
  "$STRATA" plan --hw "$tmp/bad.json" --model gpt2-124m --global-batch 8
expect_rc "plan: --global-batch is required" 2 "global-batch" "$STRATA" plan --hw "$tmp/hw.json"

# train --plan auto on a tiny model: the choice is printed and followed
"$PY" -c "
import array, random
random.seed(3)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
"$STRATA" train --n-layer 2 --d-model 64 --n-head 4 --vocab 101 --data "$tmp/tokens.bin" --batch 4 --seq 16 \
  --steps 2 --eval-batches 1 --threads 2 --run-dir "$tmp/run" --plan auto --hw "$tmp/hw.json" >"$tmp/train.log" 2>&1
check "train --plan auto trains" grep -q "^done: 2 steps" "$tmp/train.log"
check "  and says what it chose" grep -qE "^plan \(test-2c, [0-9]+ candidates simulated\): --schedule" "$tmp/train.log"
# train --offload auto --hw: the placement the simulator predicts fastest for
# the run's own schedule, micro-batch and alpha, under the budget
A=(--n-layer 4 --d-model 256 --n-head 4 --vocab 101 --data "$tmp/tokens.bin" --batch 4 --seq 16 --steps 2
   --eval-batches 1 --threads 2 --precision mixed --schedule horizontal --alpha 0.25)
"$STRATA" train "${A[@]}" --run-dir "$tmp/run3" --offload auto --hw "$tmp/hw.json" --mem-host 50M >"$tmp/auto.log" 2>&1
check "train --offload auto --hw trains" grep -q "^done: 2 steps" "$tmp/auto.log"
chosen=$(sed -n 's/^offload auto (test-2c, [0-9]* placements simulated): --offload \([^;]*\); predicted \([0-9.]*\) s.*/\1 \2/p' "$tmp/auto.log")
check "  and says which placement it chose by predicted time" test -n "$chosen"
read -r place predicted <<<"$chosen"
check "  which puts state on the SSD under the budget" test "$place" != none
check "  and runs it" grep -q "^schedule: horizontal, alpha 0.25, on the SSD: $place," "$tmp/auto.log"
"$STRATA" simulate --hw "$tmp/hw.json" --n-layer 4 --d-model 256 --n-head 4 --vocab 101 --micro-batch 4 --seq 16 \
  --precision mixed --schedule horizontal --alpha 0.25 --offload "$place" --json >"$tmp/auto.json" 2>&1
check "  whose prediction is strata simulate's" "$PY" -c "
import json, sys
p = json.load(open('$tmp/auto.json'))['iter_s']
sys.exit(abs(p - $predicted) > 0.005 + 0.01 * p)"
expect_fail "train --plan auto without --hw says how to make one" "strata probe" \
  "$STRATA" train --n-layer 2 --d-model 64 --n-head 4 --vocab 101 --data "$tmp/tokens.bin" --batch 4 --seq 16 \
  --steps 2 --run-dir "$tmp/run2" --plan auto
finish
