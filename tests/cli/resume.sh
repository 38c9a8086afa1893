#!/usr/bin/env bash
# resume.sh STRATA SOURCE_DIR - graceful stops and resumes of `strata train`:
# SIGTERM finishes the step and commits (exit 143), a second signal stops at
# once, and both resume to the uninterrupted run's losses bit for bit;
# resuming into another placement, other budgets or other store directories
# (the state moves, the old store is removed, run.json follows) gives the
# same losses too; settings that make the run cannot change on resume; an
# injected EIO or ENOSPC in the middle of a step stops the run with a clear
# error and the last commit stays loadable (fsck, export, resume); temporary
# files of a crashed save are cleaned at the next start; and the store's
# disk use stays flat over many commits.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(9)
array.array('H', [random.randrange(101) for _ in range(30000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
ARGS=(--n-layer 3 --d-model 64 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 4 --micro-batch 2
      --seq 16 --eval-batches 1 --threads 2 --clip 1 --alpha 0.25 --save-every 3)
train() { "$STRATA" train "${ARGS[@]}" "$@"; }   # (background runs call "$STRATA" itself, so that $! is its pid)
losses() { grep -o '"step": [0-9]*, "loss": [^,]*' "$1/metrics.jsonl"; }
same_run() { diff <(losses "$1") <(losses "$2") >/dev/null && cmp -s "$1/model.safetensors" "$2/model.safetensors"; }
# waits until the run in $1 has logged step $2
wait_step() { for _ in $(seq 1 12000); do grep -q "\"step\": $2," "$1/metrics.jsonl" 2>/dev/null && return; sleep 0.01; done; }

train --steps 30 --offload weights,optim,grads --run-dir "$tmp/ref" >"$tmp/ref.log" 2>&1
check "the uninterrupted run" test -s "$tmp/ref/model.safetensors"
check "  it commits at each save, saying what it cost" grep -qE "^committed step 3 in [0-9.]+ s" "$tmp/ref.log"
check "  run.json is a --config file of its settings" grep -q '"save-every":' "$tmp/ref/run.json"

# SIGTERM: the step finishes, the state is committed, exit 143; resume finishes the run
"$STRATA" train "${ARGS[@]}" --steps 30 --offload weights,optim,grads --run-dir "$tmp/term" >"$tmp/term.log" 2>&1 &
pid=$!
wait_step "$tmp/term" 5
kill -TERM $pid
wait $pid
rc=$?
check "SIGTERM: exit 143 after committing" bash -c "[ $rc -eq 143 ] && grep -q 'on Terminated; saving the weights and committing' '$tmp/term.log'"
"$STRATA" train --resume "$tmp/term" >"$tmp/term2.log" 2>&1
check "  resumed, its losses and weights are the uninterrupted run's" same_run "$tmp/ref" "$tmp/term"

# a second signal stops at once (no commit of its own); the last commit resumes
# (the stop's validation pass is long here, so that the second signal lands in it)
"$STRATA" train "${ARGS[@]}" --steps 30 --offload weights,optim,grads --eval-batches 1000 --eval-every 1000 \
  --run-dir "$tmp/twice" >"$tmp/twice.log" 2>&1 &
pid=$!
wait_step "$tmp/twice" 7
kill -INT $pid; sleep 0.05; kill -INT $pid
wait $pid
rc=$?
check "a second SIGINT exits at once (130), before the stop's own commit" \
  bash -c "[ $rc -eq 130 ] && ! grep -q '^done:' '$tmp/twice.log'"
check "  each signal says what it does" bash -c "grep -q 'stopping after this step, with a commit (again to stop at once)' \
  '$tmp/twice.log' && grep -q 'stopping at once, without a commit; the last one is intact' '$tmp/twice.log'"
"$STRATA" train --resume "$tmp/twice" >"$tmp/twice2.log" 2>&1
check "  resumed from the last commit, same losses and weights" same_run "$tmp/ref" "$tmp/twice"

# another placement, budget and store on resume: the same run
"$STRATA" train "${ARGS[@]}" --steps 30 --offload weights,optim,grads --run-dir "$tmp/move" >/dev/null 2>&1 &
pid=$!
wait_step "$tmp/move" 4
kill -9 $pid; wait $pid 2>/dev/null
"$STRATA" train --resume "$tmp/move" --offload none --steps 30 >"$tmp/move1.log" 2>&1 &
pid=$!
wait_step "$tmp/move" 14
kill -9 $pid; wait $pid 2>/dev/null
"$STRATA" train --resume "$tmp/move" --store "$tmp/elsewhere" --mem-host 4M >"$tmp/move2.log" 2>&1   # (created)
check "resumed in another placement, then into another store with a host budget: same run" same_run "$tmp/ref" "$tmp/move"
check "  the state moved: the new store has it" test -f "$tmp/elsewhere/strata-store.manifest"
check "  the old store is gone" bash -c "! ls '$tmp/move/store/'strata-store.* >/dev/null 2>&1"
check "  run.json names the new store" grep -q "\"store\":.*elsewhere" "$tmp/move/run.json"
check "  fsck finds the store through run.json" "$STRATA" fsck "$tmp/move"
check "  export writes the last commit's weights, the run's model.safetensors" \
  bash -c "'$STRATA' export '$tmp/move' --out '$tmp/exported.safetensors' >/dev/null && cmp '$tmp/exported.safetensors' '$tmp/move/model.safetensors'"

# the same store named another way is resumed in place; the in-memory
# trainer moves its state too; run.json stays a --config file for another run
"$STRATA" train "${ARGS[@]}" --steps 30 --schedule memory --offload none --alpha 0 --run-dir "$tmp/memref" >/dev/null 2>&1
same_losses() { diff <(losses "$1") <(losses "$2") >/dev/null && cmp -s "$1/model.safetensors" "$2/model.safetensors"; }
for d in mem mem2; do
  mkdir -p "$tmp/$d-store"
  "$STRATA" train "${ARGS[@]}" --steps 30 --schedule memory --offload none --alpha 0 --store "$tmp/$d-store" \
    --run-dir "$tmp/$d" >/dev/null 2>&1 &
  pid=$!
  wait_step "$tmp/$d" 4
  kill -9 $pid; wait $pid 2>/dev/null
done
"$STRATA" train --resume "$tmp/mem" --store "$tmp/./mem-store/" >"$tmp/mem1.log" 2>&1
check "the same store spelled another way (./, trailing /) resumes in place" \
  bash -c "grep -q 'resumed in' '$tmp/mem1.log' && ! grep -q 'moving its state' '$tmp/mem1.log'"
check "  and the in-memory trainer's run is the uninterrupted one" same_run "$tmp/memref" "$tmp/mem"
mkdir -p "$tmp/mem2-moved"
"$STRATA" train --resume "$tmp/mem2" --store "$tmp/mem2-moved" >"$tmp/mem2.log" 2>&1
check "the in-memory trainer's state moves to another store, and the run is the uninterrupted one" \
  bash -c "grep -q 'moving its state' '$tmp/mem2.log' && diff <(grep -o '\"step\": [0-9]*, \"loss\": [^,]*' '$tmp/memref/metrics.jsonl') <(grep -o '\"step\": [0-9]*, \"loss\": [^,]*' '$tmp/mem2/metrics.jsonl') >/dev/null"
check "  run.json records the new store as an absolute path" grep -q "\"store\":.*\"$tmp/mem2-moved\"" "$tmp/mem2/run.json"
check "run.json of a run with the default store is a --config file for another run directory" \
  bash -c "'$STRATA' train --config '$tmp/memref/run.json' --run-dir '$tmp/again' --steps 30 >/dev/null 2>&1"
check "  and for the same one, with --overwrite" \
  bash -c "'$STRATA' train --config '$tmp/memref/run.json' --run-dir '$tmp/memref' --overwrite >/dev/null 2>&1"

# what may not change, and what cannot be resumed
"$STRATA" train "${ARGS[@]}" --steps 30 --offload none --run-dir "$tmp/part" >/dev/null 2>&1 &
pid=$!
wait_step "$tmp/part" 4
kill -9 $pid; wait $pid 2>/dev/null
expect_fail "resume with another learning rate is refused, naming it" "--lr 0.001: the run in .* has 0.0006" \
  "$STRATA" train --resume "$tmp/part" --lr 1e-3
expect_fail "resume with another micro-batch is refused" "--micro-batch 1: the run" \
  "$STRATA" train --resume "$tmp/part" --micro-batch 1
expect_fail "resume with --model is refused" "drop --model" "$STRATA" train --resume "$tmp/part" --model gpt2-tiny
expect_fail "resume of a directory without a run" "not a run directory" "$STRATA" train --resume "$tmp/nothing"
expect_fail "resume of a finished run" "the run finished: its last commit is at step 30 of 30" \
  "$STRATA" train --resume "$tmp/ref"
"$PY" -c "
import array
array.array('H', [5] * 40000).tofile(open('$tmp/other.bin', 'wb'))"
cp "$tmp/tokens.bin" "$tmp/tokens.keep"; cp "$tmp/other.bin" "$tmp/tokens.bin"
expect_fail "resume after the data changed is refused" "the training data changed since the commit" \
  "$STRATA" train --resume "$tmp/part"
cp "$tmp/tokens.keep" "$tmp/tokens.bin"
# temporary files of a crashed save are cleaned at the next start
touch "$tmp/part/model.safetensors.tmp" "$tmp/part/config.json.tmp"
"$STRATA" train --resume "$tmp/part" >"$tmp/part2.log" 2>&1
check "resume cleans a crashed save's temporary files" bash -c "! ls '$tmp/part/'*.tmp >/dev/null 2>&1"
check "  and finishes as the uninterrupted run (all in memory this time)" \
  bash -c "diff <(grep -o '\"step\": [0-9]*, \"loss\": [^,]*' '$tmp/ref/metrics.jsonl') <(grep -o '\"step\": [0-9]*, \"loss\": [^,]*' '$tmp/part/metrics.jsonl')"

# moving into directories that already hold a store: the copy an interrupted
# move left (no commit record) is replaced; a store with a commit is refused
"$STRATA" train "${ARGS[@]}" --steps 30 --offload optim --store "$tmp/debris" --run-dir "$tmp/other" >/dev/null 2>&1 &
pid=$!
mkdir -p "$tmp/debris"
wait_step "$tmp/other" 1
kill -9 $pid; wait $pid 2>/dev/null
"$STRATA" train "${ARGS[@]}" --steps 30 --offload none --run-dir "$tmp/mv" >/dev/null 2>&1 &
pid=$!
wait_step "$tmp/mv" 4
kill -9 $pid; wait $pid 2>/dev/null
expect_fail "moving the state into another run's committed store is refused" "already holds a store with a commit" \
  "$STRATA" train --resume "$tmp/mv" --store "$tmp/ref/store"
"$STRATA" train --resume "$tmp/mv" --store "$tmp/debris" >"$tmp/mv.log" 2>&1
check "moving it over an interrupted copy replaces the copy and finishes the run" \
  bash -c "grep -q 'removed an unfinished copy' '$tmp/mv.log' && diff <(grep -o '\"step\": [0-9]*, \"loss\": [^,]*' '$tmp/ref/metrics.jsonl') <(grep -o '\"step\": [0-9]*, \"loss\": [^,]*' '$tmp/mv/metrics.jsonl') >/dev/null"

# a disk that fills up or fails in the middle of a step
for e in ENOSPC EIO; do
  STRATA_FAULT="write:$e:7:5" train --steps 30 --offload weights,optim,grads --run-dir "$tmp/fault$e" >"$tmp/fault$e.log" 2>&1
  rc=$?
  msg=$([ $e = EIO ] && echo "Input/output error" || echo "No space left on device")
  check "$e mid-step: a clear error (exit 1) naming the cause" bash -c "[ $rc -eq 1 ] && grep -q '$msg' '$tmp/fault$e.log'"
  check "  it says the last commit is intact and how to continue" grep -q "train --resume" "$tmp/fault$e.log"
  check "  fsck passes on the last commit" "$STRATA" fsck "$tmp/fault$e"
  "$STRATA" train --resume "$tmp/fault$e" >"$tmp/fault$e.2.log" 2>&1
  check "  resumed, the run is the uninterrupted one" same_run "$tmp/ref" "$tmp/fault$e"
done

# disk use over many commits: flat after the first
"$STRATA" train "${ARGS[@]}" --steps 40 --commit-every 1 --offload weights,optim,grads --run-dir "$tmp/many" >"$tmp/many.log" 2>&1 &
pid=$!
wait_step "$tmp/many" 3
sleep 0.2
early=$(du -sk --exclude=strata-store.manifest.prev "$tmp/many/store" | cut -f1)   # (the commit before the last: one manifest, kept until the next write)
wait $pid
late=$(du -sk --exclude=strata-store.manifest.prev "$tmp/many/store" | cut -f1)
echo "store disk use after 3 commits: ${early} KiB, after 40: ${late} KiB"
check "disk use of the store stays flat over 40 commits (old versions reclaimed)" test "$late" -le "$early"
check "  --commit-every commits without writing the weights file" \
  bash -c "[ \$(grep -c '^committed step' '$tmp/many.log') -ge 39 ] && [ \$(grep -c '^saved model' '$tmp/many.log') -le 14 ]"
finish
