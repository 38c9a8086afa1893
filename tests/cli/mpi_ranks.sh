#!/usr/bin/env bash
# mpi_ranks.sh STRATA SOURCE_DIR - `strata train` under mpirun (data
# parallel, cli/ranks.h): 2 ranks over shared memory and 3 over TCP end with
# the weights of one process (the same global batch) and its losses, print
# from rank 0 only, and keep their state in store directories of their own
# (RUN_DIR/store/rank-R, or --store with %r); one rank under mpirun trains as
# without it; a stopped run resumes on as many ranks bit for bit, and on
# another number reshards the state into new stores, the uninterrupted
# run up to rounding; what several ranks cannot do yet is refused
# once, by rank 0; a commit only some ranks completed is undone on resume;
# a rank killed with SIGKILL ends the job, mpirun names the rank, and the
# survivor resumes.
. "$(dirname "$0")/common.bash" "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# sanitizer builds: whole stacks, so that tests/lsan.supp matches what OpenMPI leaks
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}fast_unwind_on_malloc=0"
MPIRUN=(mpirun --oversubscribe --bind-to none --timeout 100)
TCP=(--mca btl self,tcp --mca btl_tcp_if_include lo)

"$PY" - "$tmp/tokens.bin" <<'PY'
import random, struct, sys
random.seed(3)
open(sys.argv[1], "wb").write(struct.pack("<%dH" % 20000, *[random.randrange(97) for _ in range(20000)]))
PY
model=(--n-layer 2 --n-head 2 --d-model 32 --vocab 97 --seq 16 --batch 6 --micro-batch 1 --steps 4
       --eval-every 2 --eval-batches 2 --data "$tmp/tokens.bin" --clip 1)


"$STRATA" train "${model[@]}" --run-dir "$tmp/one" --offload weights,optim,acts >"$tmp/one.out" 2>&1
check "one process trains (the reference)" test $? -eq 0 -a -s "$tmp/one/model.safetensors"

"${MPIRUN[@]}" -np 2 "$STRATA" train "${model[@]}" --run-dir "$tmp/two" --offload weights,optim,acts \
  >"$tmp/two.out" 2>"$tmp/two.err"
check "two ranks train" test $? -eq 0 -a -s "$tmp/two/model.safetensors"
check "two ranks: the weights and losses of one process" "$PY" "$SRC/tests/cli/same_run.py" "$tmp/two" "$tmp/one"
check "two ranks: output from rank 0 only" test "$(grep -c '^done:' "$tmp/two.out")" -eq 1
check "two ranks: say so" grep -q "^ranks: 2, data parallel: each trains 3 of the micro-batches" "$tmp/two.out"
# (a sanitizer build adds its report of suppressed leaks, not strata's)
check "two ranks: the one warning, from rank 0" test "$(grep -c '^strata' "$tmp/two.err")" -eq 1 -a \
  "$(grep -c 'validation data is the training data' "$tmp/two.err")" -eq 1
check "two ranks: a store each" test -s "$tmp/two/store/rank-0/strata-store.manifest" \
  -a -s "$tmp/two/store/rank-1/strata-store.manifest"

"${MPIRUN[@]}" -np 3 "${TCP[@]}" "$STRATA" train "${model[@]}" --run-dir "$tmp/three" --schedule horizontal \
  --offload optim=0.5 --store "$tmp/nvme%r/three" >"$tmp/three.out" 2>&1
check "three ranks over TCP, horizontal, --store with %r" test $? -eq 0 -a -s "$tmp/three/model.safetensors"
"$STRATA" train "${model[@]}" --run-dir "$tmp/one-h" --schedule horizontal >/dev/null 2>&1
check "three ranks: the weights and losses of one process" "$PY" "$SRC/tests/cli/same_run.py" "$tmp/three" "$tmp/one-h"
check "three ranks: a store each where %r says" test -s "$tmp/nvme0/three/strata-store.manifest" \
  -a -s "$tmp/nvme1/three/strata-store.manifest" -a -s "$tmp/nvme2/three/strata-store.manifest"

"${MPIRUN[@]}" -np 1 "$STRATA" train "${model[@]}" --run-dir "$tmp/mpi-one" >"$tmp/mpi-one.out" 2>&1
check "one rank under mpirun trains as one process" test $? -eq 0 -a -s "$tmp/mpi-one/model.safetensors"
check "one rank: no rank-R store" test -s "$tmp/mpi-one/store/strata-store.manifest"

# Refused once, by rank 0, before anything is written.
expect_rc "micro-batches the ranks cannot share: refused" 2 "4 ranks: --batch 6 / --micro-batch 1 = 6 micro-batches" \
  "${MPIRUN[@]}" -np 4 "$STRATA" train "${model[@]}" --run-dir "$tmp/four"
check "refused: one line" test "$(grep -c 'micro-batches, which' "$tmp/err")" -eq 1
check "refused: no run directory" test ! -e "$tmp/four"
expect_rc "the in-memory trainer on two ranks: refused" 2 "need the schedule executor" \
  "${MPIRUN[@]}" -np 2 "$STRATA" train "${model[@]}" --run-dir "$tmp/mem" --schedule memory

# Gradients on the SSD: each rank parks its shard of the sums there.
"${MPIRUN[@]}" -np 2 "$STRATA" train "${model[@]}" --run-dir "$tmp/grads" --schedule horizontal \
  --offload weights,optim,acts,grads >"$tmp/grads.out" 2>&1
check "two ranks, gradients on the SSD, horizontal" test $? -eq 0 -a -s "$tmp/grads/model.safetensors"
check "gradients on the SSD: the weights and losses of one process" \
  "$PY" "$SRC/tests/cli/same_run.py" "$tmp/grads" "$tmp/one-h"

# Stopped (SIGTERM to the ranks: they agree on the step, commit and end)
# and resumed on as many ranks: the uninterrupted run.
long=(--n-layer 2 --n-head 2 --d-model 32 --vocab 97 --seq 16 --batch 4 --micro-batch 1 --steps 300
      --eval-every 0 --data "$tmp/tokens.bin" --offload weights,optim,acts --clip 1)
"${MPIRUN[@]}" -np 2 "$STRATA" train "${long[@]}" --run-dir "$tmp/whole" >/dev/null 2>&1
check "two ranks, 300 steps (the reference)" test $? -eq 0
"${MPIRUN[@]}" -np 2 "$STRATA" train "${long[@]}" --run-dir "$tmp/stopped" >"$tmp/stopped.out" 2>&1 &
job=$!
for _ in $(seq 1 600); do   # a few steps in (rank 0's metrics), then stopped
  [ -f "$tmp/stopped/metrics.jsonl" ] && [ "$(grep -c '"loss"' "$tmp/stopped/metrics.jsonl")" -ge 5 ] && break
  sleep 0.05
done
# the ranks themselves are signalled (mpirun, signalled, may end before it
# has passed on their last output); they agree on the step to stop after
pkill -TERM -f "strata train .*$tmp/stopped" || true
for _ in $(seq 1 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && { echo "     (still running 60 s after SIGTERM; killed)"; kill -KILL "$job"; }
wait "$job"
check "stopped mid-run: committed" grep -qE "^stopping after step ([0-9]|[0-9][0-9]|1[0-9][0-9]|2[0-8][0-9]) " \
  "$tmp/stopped.out"
cp -a "$tmp/stopped" "$tmp/fewer"   # the same stopped run, twice more, to resume elsewhere
cp -a "$tmp/stopped" "$tmp/more"
"${MPIRUN[@]}" -np 2 "$STRATA" train --resume "$tmp/stopped" >"$tmp/resumed.out" 2>&1
check "resumed on two ranks" test $? -eq 0

# Elastic: the stopped run of two ranks resumed on four and on one process,
# resharding the committed state into new stores: the uninterrupted run up
# to the rounding of other summation orders.
expect_rc "resumed on four ranks in the run's own store: refused" 1 "resuming on 4 moves the state: .*--store" \
  "${MPIRUN[@]}" -np 4 "$STRATA" train --resume "$tmp/more"
"${MPIRUN[@]}" -np 4 "$STRATA" train --resume "$tmp/more" --store "$tmp/more-store" >"$tmp/more.out" 2>&1
check "resumed on four ranks, into new stores" test $? -eq 0 -a -s "$tmp/more-store/rank-3/strata-store.manifest"
# (300 steps of other summation orders: measured 5.7e-7 apart after a stop at step 67)
check "  the uninterrupted run's weights and losses" "$PY" "$SRC/tests/cli/same_run.py" "$tmp/more" "$tmp/whole" 1e-5
check "  the two ranks' stores removed" test ! -e "$tmp/more/store/rank-0/strata-store.manifest" \
  -a ! -e "$tmp/more/store/rank-1/strata-store.manifest"
"$STRATA" train --resume "$tmp/fewer" --store "$tmp/fewer-store" >"$tmp/fewer.out" 2>&1
check "resumed on one process, into a new store" test $? -eq 0 -a -s "$tmp/fewer-store/strata-store.manifest"
check "  the uninterrupted run's weights and losses" "$PY" "$SRC/tests/cli/same_run.py" "$tmp/fewer" "$tmp/whole" 1e-5
"${MPIRUN[@]}" -np 2 "$STRATA" train --resume "$tmp/fewer" --steps 320 --store "$tmp/fewer-two" >"$tmp/fewer2.out" 2>&1
check "and that one process's run resumed on two ranks again" test $? -eq 0 \
  -a -s "$tmp/fewer-two/rank-1/strata-store.manifest"
check "  from its commit" grep -q "^resuming .* from its commit at step" "$tmp/resumed.out"
check "  the uninterrupted run's losses and weights, bit for bit" \
  cmp -s "$tmp/whole/model.safetensors" "$tmp/stopped/model.safetensors"
check "  (the losses too)" diff <(grep -o '"loss": [0-9.e-]*' "$tmp/whole/metrics.jsonl") \
  <(grep -o '"loss": [0-9.e-]*' "$tmp/stopped/metrics.jsonl")

# A commit not every rank completed: rank 1's disk fails inside its commit
# of step 10, which rank 0 completes. The job ends, the failing rank says
# how to go on, and resuming goes back to step 5 on every rank (the store
# keeps the commit before the last until it next writes): on as many ranks
# the uninterrupted run bit for bit, on one process (resharding) up to rounding.
part=(--n-layer 2 --n-head 2 --d-model 32 --vocab 97 --seq 16 --batch 4 --micro-batch 1 --steps 20
      --eval-every 0 --data "$tmp/tokens.bin" --offload weights,optim,acts --clip 1 --commit-every 5)
"${MPIRUN[@]}" -np 2 "$STRATA" train "${part[@]}" --run-dir "$tmp/part" >/dev/null 2>&1
check "two ranks, 20 steps, a commit every 5 (the reference)" test $? -eq 0
"$STRATA" fsck "$tmp/part" >"$tmp/part.fsck" 2>&1
check "fsck of a run of two ranks checks each rank's store" \
  bash -c "[ $? -eq 0 ] && grep -A1 '^rank 1 of 2:' '$tmp/part.fsck' | grep -q '^store .*/rank-1:' && [ \$(grep -c ', 0 damaged' '$tmp/part.fsck') -eq 2 ]"
mkdir -p "$tmp/part-export"
check "export of a run of two ranks reads every rank's shards" \
  "$STRATA" export "$tmp/part" --out "$tmp/part-export/model.safetensors"
check "  byte for byte the run's model.safetensors" cmp "$tmp/part-export/model.safetensors" "$tmp/part/model.safetensors"
rank1_disk_fails=(bash -c '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && export STRATA_FAULT=sync:EIO:10:1; exec "$0" "$@"')
"${MPIRUN[@]}" -np 2 "${rank1_disk_fails[@]}" "$STRATA" train "${part[@]}" --run-dir "$tmp/torn" >"$tmp/torn.out" 2>&1
check "rank 1's disk fails inside its commit of step 10: the job ends non-zero" test $? -ne 0
check "  rank 1 says why" grep -q "^strata: rank 1 of 2: sync .*Input/output error" "$tmp/torn.out"
check "  and how to go on" grep -q "fsck $tmp/torn' checks every rank's store.*: mpirun -np 2 strata train --resume $tmp/torn\$" \
  "$tmp/torn.out"
"$STRATA" export "$tmp/torn" --out "$tmp/torn-export" >"$tmp/torn-export.out" 2>&1
check "  export takes the last step every rank committed" \
  grep -q "weights of step 5 .*" "$tmp/torn-export.out"
check "  and says why" grep -q "the job stopped between the ranks' commits" "$tmp/torn-export.out"
cp -a "$tmp/torn" "$tmp/torn-one"
"${MPIRUN[@]}" -np 2 "$STRATA" train --resume "$tmp/torn" >"$tmp/torn2.out" 2>&1
check "resumed on two ranks" test $? -eq 0
check "  rank 0, which had committed step 10, goes back to step 5" \
  grep -q "committed step 10, and some had not: those that had go back to their commit of step 5" "$tmp/torn2.out"
check "  the uninterrupted run's weights, bit for bit" cmp -s "$tmp/part/model.safetensors" "$tmp/torn/model.safetensors"
check "  (the losses too)" diff <(grep -o '"loss": [0-9.e-]*' "$tmp/part/metrics.jsonl") \
  <(grep -o '"loss": [0-9.e-]*' "$tmp/torn/metrics.jsonl")
# The same inside the first commit: a job killed before its first commit
# (its stores made, none committed), whose rank 0's store is then one that
# has committed, as if rank 0 alone had completed the first commit.
"${MPIRUN[@]}" -np 2 "$STRATA" train "${part[@]}" --steps 100000 --commit-every 1000 --run-dir "$tmp/torn-first" \
  >/dev/null 2>&1 &
job=$!
for _ in $(seq 1 300); do
  [ -f "$tmp/torn-first/metrics.jsonl" ] && [ "$(grep -c '"loss"' "$tmp/torn-first/metrics.jsonl")" -ge 2 ] && break
  sleep 0.1
done
pkill -KILL -f "strata train .*$tmp/torn-first" || true
wait "$job"
rm -rf "$tmp/torn-first/store/rank-0" && cp -a "$tmp/part/store/rank-0" "$tmp/torn-first/store/rank-0"
expect_rc "a first commit only rank 0 completed: resuming says there is no commit to go on from" 1 \
  "stopped before every rank had completed its first commit" \
  "${MPIRUN[@]}" -np 2 "$STRATA" train --resume "$tmp/torn-first"
check "  once, with how to start again" bash -c "[ \$(grep -c 'first commit' '$tmp/err') -eq 1 ] &&
  grep -q 'mpirun -np 2 strata train --config $tmp/torn-first/run.json --run-dir $tmp/torn-first --overwrite' '$tmp/err'"
"$STRATA" train --resume "$tmp/torn-one" --store "$tmp/torn-one-store" >"$tmp/torn-one.out" 2>&1
check "resumed on one process instead (resharding)" test $? -eq 0
check "  rank 0's store goes back to step 5" \
  grep -q "committed step 10, and some had not: their stores go back to the commit of step 5" "$tmp/torn-one.out"
check "  the uninterrupted run's weights and losses" "$PY" "$SRC/tests/cli/same_run.py" "$tmp/torn-one" "$tmp/part" 1e-5

# A rank killed at any moment (it commits every step, so often inside a
# commit): the job ends, mpirun names the rank, and the survivor resumes
# from the last commit every rank completed: the uninterrupted run up to
# rounding.
killable=(--n-layer 2 --n-head 2 --d-model 32 --vocab 97 --seq 16 --batch 2 --micro-batch 1 --steps 300
          --eval-every 0 --data "$tmp/tokens.bin" --commit-every 1)
"$STRATA" train "${killable[@]}" --run-dir "$tmp/unkilled" >/dev/null 2>&1
check "one process, 300 steps, a commit every step (the reference)" test $? -eq 0
"${MPIRUN[@]}" -np 2 "$STRATA" train "${killable[@]}" --run-dir "$tmp/killed" >"$tmp/killed.out" 2>&1 &
job=$!
rank1=""
for _ in $(seq 1 300); do   # rank 1's process, once it trains
  for p in $(pgrep -f "strata train .*$tmp/killed"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=$p
  done
  [ -n "$rank1" ] && [ -f "$tmp/killed/metrics.jsonl" ] && [ "$(grep -c '"loss"' "$tmp/killed/metrics.jsonl")" -ge 10 ] &&
    break
  sleep 0.1
done
check "the job started (rank 1: PID ${rank1:-none})" test -n "$rank1"
[ -n "$rank1" ] && kill -KILL "$rank1"
for _ in $(seq 1 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
kill -0 "$job" 2>/dev/null && { echo "     (the job still ran 60 s after its rank 1 was killed)"; kill -KILL "$job"; }
wait "$job"
rc=$?
check "a rank killed: the job ends non-zero" test "$rc" -ne 0
check "a rank killed: mpirun names it" grep -qE "rank 1 .*(signal 9|Killed)" "$tmp/killed.out"
"$STRATA" train --resume "$tmp/killed" --store "$tmp/survivor" >"$tmp/survivor.out" 2>&1
check "the survivor resumes (one process, a new store)" test $? -eq 0
check "  from a commit a few steps in" grep -qE "^resuming .* from its commit at step ([4-9]|[1-9][0-9]|[12][0-9][0-9]) " \
  "$tmp/survivor.out"
check "  the uninterrupted run's weights and losses" "$PY" "$SRC/tests/cli/same_run.py" "$tmp/killed" "$tmp/unkilled" 1e-5
finish
