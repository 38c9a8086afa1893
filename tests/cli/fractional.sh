#!/usr/bin/env bash
# fractional.sh STRATA SOURCE_DIR - fractional placement from the command
# line (issue 13): --offload KIND=SHARE puts that share of a kind's parts on
# the SSD, the run says where each kind is, trains to the same losses as
# the whole placements (the schedule changes the speed, never the math),
# resumes into another split, and --offload auto under a host budget keeps
# in memory as much as fits (a fraction) and stays within the budget. Bad
# spellings are refused by name.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(11)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
ARGS=(--n-layer 8 --d-model 128 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 4 --micro-batch 2 --seq 16
      --eval-batches 1 --threads 2 --clip 0 --schedule horizontal --precision mixed)
losses() { grep -o '"step": [0-9]*, "loss": [^,]*' "$1/metrics.jsonl"; }

"$STRATA" train "${ARGS[@]}" --steps 6 --offload none --run-dir "$tmp/whole" >"$tmp/whole.log" 2>&1
check "the run with everything in memory" grep -q "^done: 6 steps" "$tmp/whole.log"
"$STRATA" train "${ARGS[@]}" --steps 6 --offload weights=0.5,optim=0.34,acts=0.75,grads=0.2 --run-dir "$tmp/frac" \
  >"$tmp/frac.log" 2>&1
check "a fractional placement trains" grep -q "^done: 6 steps" "$tmp/frac.log"
check "  it says where each kind of state is" \
  grep -qE "^placement: compute weights [0-9]+% on the SSD \(units 4-8 of 0-8\); optimizer state [0-9]+% on the SSD \(units 5-8 of 0-8\); checkpoints 78% on the SSD \(blocks 1-7's inputs\); gradients [0-9]+% on the SSD \(units 7-8 of 0-8\)" \
  "$tmp/frac.log"
check "  the same losses, bit for bit, as everything in memory" diff <(losses "$tmp/whole") <(losses "$tmp/frac")
check "  and the same weights" cmp "$tmp/whole/model.safetensors" "$tmp/frac/model.safetensors"
"$STRATA" train "${ARGS[@]}" --steps 1 --offload weights,optim,acts,grads --run-dir "$tmp/all" >"$tmp/all.log" 2>&1
tr() { sed -n 's/^SSD traffic per step of this schedule and placement: .* (\([0-9]*\), \([0-9]*\) bytes)$/\1 \2/p' "$1"; }
read -r fr fw < <(tr "$tmp/frac.log")
read -r ar aw < <(tr "$tmp/all.log")
check "  its store traffic ($fr + $fw bytes) is less than with everything on the SSD ($ar + $aw)" \
  test "$((fr + fw))" -lt "$((ar + aw))"

# resumed into another split: the uninterrupted run's losses and weights
"$STRATA" train "${ARGS[@]}" --steps 6 --offload optim=0.5,acts=0.5 --commit-every 1 --run-dir "$tmp/split" \
  >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '"step": 3,' "$tmp/split/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
signal_and_wait TERM "$pid"
"$STRATA" train --resume "$tmp/split" --offload weights=0.25,optim=0.75,grads=0.5 >"$tmp/split.log" 2>&1
check "resumed into another split (stopped at SIGTERM, rc $rc)" grep -qE "^done: [0-9]+ steps" "$tmp/split.log"
check "  it says the new split" grep -q "on the SSD: weights=0.25,optim=0.75,grads=0.5" "$tmp/split.log"
check "  the same losses as everything in memory" diff <(losses "$tmp/whole") <(losses "$tmp/split")
check "  and the same weights" cmp "$tmp/whole/model.safetensors" "$tmp/split/model.safetensors"

# auto under a host budget: a fraction, within the budget
"$STRATA" train "${ARGS[@]}" --steps 1 --offload auto --mem-host 24M --run-dir "$tmp/auto" >"$tmp/auto.log" 2>&1
check "--offload auto under a 24M host budget trains" grep -q "^done: 1 steps" "$tmp/auto.log"
check "  with a fractional placement" grep -qE "^schedule: .* on the SSD: .*=0\.[0-9]+" "$tmp/auto.log"
host=$(sed -n 's/^memory: device working set .*, host \([0-9.]*\) MiB;.*/\1/p' "$tmp/auto.log")
check "  whose host memory ($host MiB) is within the budget" "$PY" -c "import sys; sys.exit(not 0 < float('$host') <= 24)"

expect_fail "a share above 1 is refused" "--offload optim=1.5: the share on the SSD must be a number from 0 to 1" \
  "$STRATA" train "${ARGS[@]}" --steps 1 --offload optim=1.5 --run-dir "$tmp/bad"
expect_fail "a share that is not a number is refused" "--offload optim=half: the share" \
  "$STRATA" train "${ARGS[@]}" --steps 1 --offload optim=half --run-dir "$tmp/bad"
expect_fail "a kind given twice is refused" "--offload: optim is given twice" \
  "$STRATA" train "${ARGS[@]}" --steps 1 --offload optim=0.5,optim --run-dir "$tmp/bad"
expect_fail "an unknown kind is refused" "--offload: unknown state 'master'" \
  "$STRATA" train "${ARGS[@]}" --steps 1 --offload master=0.5 --run-dir "$tmp/bad"
finish
