#!/usr/bin/env bash
# commit_default.sh STRATA SOURCE_DIR - safe with no flags: a run commits by
# default (--commit-every auto) and says in its first lines what a crash can
# lose; time-based commits survive a SIGKILL; a finished run is extended
# with a larger --steps, saying how the learning rate changes (and the rate
# it names is the one it trains with); run.json files that recorded
# --commit-every as a number still resume.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(11)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
ARGS=(--n-layer 2 --d-model 32 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 2 --seq 16
      --eval-batches 1 --threads 1)

"$STRATA" train "${ARGS[@]}" --steps 6 --run-dir "$tmp/a" >"$tmp/a.log" 2>&1
check "a run says how large its store is and why (two slots of 12 bytes a parameter)" \
  grep -qE "^store: .* on disk in .*: each committed tensor twice.*2 x 12 bytes a parameter" "$tmp/a.log"
check "with no flags a run says when it commits and what a crash loses" \
  grep -qE "^commits: after 60 s of training, then as often as keeps commits under 2% of the time.*a crash loses" \
  "$tmp/a.log"
expect_rc "a --commit-every that is not a policy is a usage error" 2 "commit-every must be auto, 0" \
  "$STRATA" train "${ARGS[@]}" --commit-every 5x --run-dir "$tmp/x"
"$STRATA" train "${ARGS[@]}" --steps 3 --commit-every 0 --run-dir "$tmp/zero" >"$tmp/zero.log" 2>&1
check "--commit-every 0 says a crash loses the whole run" grep -q "a crash loses the whole run" "$tmp/zero.log"

# commits do not change the math: the executor with deferred optimizer work, committing every step or never
for ce in 1 0; do
  "$STRATA" train "${ARGS[@]}" --steps 6 --batch 4 --micro-batch 2 --alpha 0.5 --offload weights,optim,grads \
    --commit-every $ce --run-dir "$tmp/math$ce" >/dev/null 2>&1
done
check "a run committing every step ends with the weights of one that never does" \
  cmp "$tmp/math1/model.safetensors" "$tmp/math0/model.safetensors"

# time-based commits: a SIGKILL loses only the time since the last one
"$STRATA" train "${ARGS[@]}" --steps 1000000 --commit-every 1s --run-dir "$tmp/t" >"$tmp/t.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q "^committed step" "$tmp/t.log" 2>/dev/null && break; sleep 0.05; done
check "--commit-every 1s commits, saying when the next comes" grep -qE "^committed step [0-9]+ in [0-9.]+ s; the next in 1 s" \
  "$tmp/t.log"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
run_until "$tmp/t2.log" "^step " "$STRATA" train --resume "$tmp/t"
check "  after a SIGKILL the run resumes from a commit it made on its own (rc $rc)" \
  bash -c "[ $rc -eq 143 ] && grep -qE 'from its commit at step [1-9][0-9]* of 1000000' '$tmp/t2.log'"

# extending a finished run
expect_fail "resuming a finished run says how to extend it" "the run finished: .*a larger step count extends it" \
  "$STRATA" train --resume "$tmp/a"
"$STRATA" train --resume "$tmp/a" --steps 12 >"$tmp/ext.log" 2>&1
check "--resume --steps 12 extends a 6-step run" grep -q '"step": 12,' "$tmp/a/metrics.jsonl"
check "  it says how the learning rate changes" \
  grep -qE "^extending the run from 6 to 12 steps: the learning rate's decay to --min-lr .* now ends at step 12 instead of 6, so step 7 trains at" \
  "$tmp/ext.log"
said=$(sed -nE 's/.*so step 7 trains at ([0-9.e+-]+) .*/\1/p' "$tmp/ext.log")
logged=$(grep '"step": 7,' "$tmp/a/metrics.jsonl" | sed -E 's/.*"lr": ([0-9.e+-]+).*/\1/')
check "  and step 7 trained at the rate it named ($said, metrics: $logged)" \
  awk "BEGIN{d = $said - $logged; exit !(d < 0.005 * $logged && d > -0.005 * $logged)}"
check "  run.json now has 12 steps" grep -qE '"steps":[[:space:]]*12,' "$tmp/a/run.json"
expect_fail "a smaller --steps is refused" "can be extended \(a larger --steps\), not shortened" \
  "$STRATA" train --resume "$tmp/a" --steps 8

# a run.json from before --commit-every took words: a number
"$PY" - "$tmp/t/run.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d["commit-every"] = 5
json.dump(d, open(p, "w"))
PY
run_until "$tmp/t3.log" "^step " "$STRATA" train --resume "$tmp/t"
check "a run.json with \"commit-every\": 5 resumes, committing every 5 steps (rc $rc)" \
  bash -c "[ $rc -eq 143 ] && grep -q '^commits: every 5 steps' '$tmp/t3.log'"
finish
