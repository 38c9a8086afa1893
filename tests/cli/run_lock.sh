#!/usr/bin/env bash
# run_lock.sh STRATA SOURCE_DIR - one writer per run: while `strata train`
# writes a run directory, a second `train --overwrite` or `train --resume` of
# it is refused, naming the first one's PID, and the run it would have
# destroyed goes on and stays whole (fsck); once the writer has ended, resume
# works, and a writer killed with SIGKILL leaves no lock behind.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(3)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
COMMON=(--n-layer 2 --d-model 32 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 2 --seq 16
        --eval-batches 1 --threads 1 --commit-every 5)
run="$tmp/run"

# the writer: long enough to be still running through the checks below
"$STRATA" train "${COMMON[@]}" --steps 1000000 --run-dir "$run" >"$tmp/writer.log" 2>&1 &
writer=$!
for _ in $(seq 1 300); do
  grep -q '"step": 5,' "$run/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
check "the writer has committed" grep -q '"step": 5,' "$run/metrics.jsonl"
check "run.lock names the writer" grep -qx "$writer" "$run/run.lock"

expect_fail "train --overwrite of a run being written is refused with the writer's PID" "PID $writer\\) is writing this run" \
  "$STRATA" train "${COMMON[@]}" --steps 10 --run-dir "$run" --overwrite
expect_fail "train --resume of a run being written is refused with the writer's PID" "PID $writer\\) is writing this run" \
  "$STRATA" train --resume "$run"
check "the writer is still running" kill -0 "$writer"
check "its run.json is still there" test -s "$run/run.json"

signal_and_wait INT "$writer"
check "the writer stopped on SIGINT with its commit (rc $rc)" test "$rc" -eq 130
check "the run is whole" "$STRATA" fsck "$run"
# a writer of the run in the background: waits until it holds the lock
start_writer() {
  "$STRATA" train --resume "$run" >>"$tmp/writers.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    grep -qx "$pid" "$run/run.lock" 2>/dev/null && break
    sleep 0.1
  done
}

start_writer
check "resume is accepted once the writer has ended" grep -qx "$pid" "$run/run.lock"
sleep 0.5
signal_and_wait INT "$pid"
check "the resumed writer ran and stopped on SIGINT (rc $rc)" test "$rc" -eq 130

# a writer killed with SIGKILL holds nothing: the kernel drops its lock
start_writer
check "run.lock names the next writer" grep -qx "$pid" "$run/run.lock"
sleep 0.5
kill -KILL "$pid"
wait "$pid" 2>/dev/null
start_writer
check "resume after a SIGKILL is not refused" grep -qx "$pid" "$run/run.lock"
signal_and_wait INT "$pid"
check "that writer stopped on SIGINT (rc $rc)" test "$rc" -eq 130
check "the run is whole at the end" "$STRATA" fsck "$run"
finish
