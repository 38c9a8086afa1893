#!/usr/bin/env bash
# recovery.sh STRATA SOURCE_DIR - what `strata train --resume` says about a
# run it cannot continue, and that it is true: a damaged last commit is found
# before a step is trained (metrics.jsonl does not grow, however often one
# tries), the message names the commit and what is intact (the weights of
# the last save) and gives a command that works; a store with a file missing
# is damaged, not "stopped before its first commit" (whose advice,
# --overwrite, would delete the run); a resume that works says it checked
# the commit first.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(5)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
ARGS=(--n-layer 2 --d-model 32 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 2 --seq 16
      --eval-batches 1 --threads 1 --save-every 4 --offload optim)
lines() { wc -l <"$1/metrics.jsonl"; }
# every 4 KiB of the store's data file overwritten: both slots of every tensor
damage() {
  local f="$1/store/strata-store.data" size
  size=$(stat -c %s "$f")
  for off in $(seq 0 4096 $((size - 1))); do
    printf '\xde\xad\xbe\xef' | dd of="$f" bs=1 seek=$((off + 100)) conv=notrunc status=none
  done
}

# a run stopped on SIGTERM after a few saves (each commits), with steps to go
"$STRATA" train "${ARGS[@]}" --steps 100000 --run-dir "$tmp/run" >"$tmp/run.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '"step": 9,' "$tmp/run/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
signal_and_wait TERM "$pid"
check "a run stopped on SIGTERM (rc $rc)" test "$rc" -eq 143
cp -a "$tmp/run" "$tmp/ok"
run_until "$tmp/ok.log" "^step " "$STRATA" train --resume "$tmp/ok"
check "  it resumes, saying it read back and checked its commit first" \
  grep -qE '^the commit is intact: [0-9]+ tensors, .* checked in' "$tmp/ok.log"

# a damaged last commit
cp -a "$tmp/run" "$tmp/bad"
damage "$tmp/bad"
before=$(lines "$tmp/bad")
expect_fail "resume of a damaged commit fails before training, naming the commit" \
  "its last commit \(step [0-9]+, in .*\) is damaged: checksum mismatch" "$STRATA" train --resume "$tmp/bad"
cp "$tmp/err" "$tmp/bad.err"
check "  it does not say the commit is intact" bash -c "! grep -q 'is intact' '$tmp/bad.err'"
check "  it says fsck lists the damage" grep -q "strata fsck $tmp/bad" "$tmp/bad.err"
check "  it names the weights of the last save as intact" grep -q "intact: $tmp/bad/model.safetensors" "$tmp/bad.err"
expect_fail "  a second try fails the same way" "is damaged" "$STRATA" train --resume "$tmp/bad"
check "  metrics.jsonl did not grow ($before lines)" test "$(lines "$tmp/bad")" -eq "$before"
check "  fsck agrees that the store is damaged" bash -c "! '$STRATA' fsck '$tmp/bad' >/dev/null 2>&1"
# the command it gives goes on from the saved weights
cmd=$(grep -m1 -- "--init $tmp/bad/model.safetensors" "$tmp/bad.err" | sed -e "s|NEW_RUN_DIR|$tmp/restart|" -e "s|^ *strata |$STRATA |")
check "  its command trains on from the saved weights: $cmd" bash -c "$cmd --steps 3 >'$tmp/restart.log' 2>&1"
check "  (that run started from $tmp/bad/model.safetensors)" grep -q "(${tmp}/bad/model.safetensors)" "$tmp/restart.log"
expect_fail "--init with a shape other than the file's is refused, naming both" \
  "--n-layer 3: the model in .* has n-layer 2" \
  "$STRATA" train --config "$tmp/bad/run.json" --init "$tmp/bad/model.safetensors" --n-layer 3 --run-dir "$tmp/x"

# a store with a file missing is damaged, not a run that never committed
for f in strata-store.manifest strata-store.data; do
  rm -rf "$tmp/gone"
  cp -a "$tmp/run" "$tmp/gone"
  rm "$tmp/gone/store/$f"
  expect_fail "a store without $f: the store cannot be opened" "cannot open the run's store in .*/store" \
    "$STRATA" train --resume "$tmp/gone"
  check "  not 'stopped before its first commit'" bash -c "! grep -q 'before its first commit' '$tmp/err'"
  check "  the saved weights are named as intact" grep -q "intact: $tmp/gone/model.safetensors" "$tmp/err"
done

# a run that truly never committed still says so
"$STRATA" train "${ARGS[@]}" --save-every 0 --steps 100000 --run-dir "$tmp/early" >"$tmp/early.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '"step": 3,' "$tmp/early/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
expect_fail "a run killed before its first commit says so" "stopped before its first commit" \
  "$STRATA" train --resume "$tmp/early"
check "  and how to start it again" grep -q -- "--run-dir $tmp/early --overwrite" "$tmp/err"
# so does one killed while its store was being made (CI's crash test found
# both): after run.json, before the store directory; and before the store's
# first manifest, which leaves a marker's temporary file and the lock
rm -rf "$tmp/early/store" "$tmp/early/metrics.jsonl"
expect_fail "a run killed before its store directory was made: before its first commit" \
  "stopped before its first commit" "$STRATA" train --resume "$tmp/early"
echo "strata-store 1" >"$tmp/early/store/strata-store.id.tmp"
: >"$tmp/early/store/strata-store.lock"
: >"$tmp/early/store/strata-store.data"
expect_fail "a run killed before its store's first manifest: before its first commit" \
  "stopped before its first commit" "$STRATA" train --resume "$tmp/early"
check "  and the command it gives starts it again" \
  "$STRATA" train --config "$tmp/early/run.json" --run-dir "$tmp/early" --overwrite --steps 2
# the same for an external --store: a creation cut short there is this
# run's to replace, and another's to refuse by name
store2="$tmp/ext-store"
mkdir -p "$store2"
echo "strata-store 1" >"$store2/strata-store.id"
expect_fail "--store with what a cut-short creation left there, not this run's: refused by name" \
  "already holds store files \(strata-store.id\)" \
  "$STRATA" train "${ARGS[@]}" --steps 2 --store "$store2" --run-dir "$tmp/ext"
"$STRATA" train "${ARGS[@]}" --steps 2 --store "$store2.b" --run-dir "$tmp/ext2" >/dev/null 2>&1
rm -f "$store2.b"/strata-store.manifest
: >"$store2.b/strata-store.data"
check "--overwrite of a run whose --store creation was cut short starts it again" \
  "$STRATA" train "${ARGS[@]}" --steps 2 --store "$store2.b" --run-dir "$tmp/ext2" --overwrite
finish
