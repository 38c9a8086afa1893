#!/usr/bin/env bash
# crash_resume.sh STRATA SOURCE_DIR - kills `strata train` with SIGKILL at
# random moments (up to three times a trial, then lets it finish), resuming
# with `strata train --resume` after each kill, and checks that the losses
# of every step and the final weights are bit for bit those of a run that
# was never interrupted. Trials cycle through four engines: vertical with
# weights, optimizer state and gradients on the SSD (alpha 0.25), horizontal
# with checkpoints on the SSD, the in-memory trainer, and vertical with half
# of each kind of state on the SSD (fractional placement). TRIALS (default 6)
# sets the number of trials; bench/crash_stress.sh runs 50 or more. A run
# killed before its first commit cannot resume (it says so) and starts
# over, as its user would.
. "$(dirname "$0")/common.bash" "$@"
TRIALS="${TRIALS:-6}"
"$PY" -c "
import array, random
random.seed(5)
array.array('H', [random.randrange(101) for _ in range(30000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
COMMON=(--n-layer 3 --d-model 64 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 4 --micro-batch 2
        --seq 16 --steps 24 --eval-batches 1 --threads 2 --clip 1 --commit-every 2 --save-every 3)
MODES=("--schedule vertical --offload weights,optim,grads --alpha 0.25"
       "--schedule horizontal --offload acts"
       "--schedule memory --offload none"
       "--schedule vertical --offload weights=0.5,optim=0.5,acts=0.5,grads=0.5 --alpha 0.25")
losses() { grep -o '"step": [0-9]*, "loss": [^,]*' "$1/metrics.jsonl"; }

declare -a ref_ms
for m in "${!MODES[@]}"; do
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  "$STRATA" train "${COMMON[@]}" ${MODES[$m]} --run-dir "$tmp/ref$m" >"$tmp/ref$m.log" 2>&1
  # kills land in the first 60% of a run's time
  ref_ms[$m]=$("$PY" -c "print(max(50, int(600 * ($(date +%s.%N) - $t0))))")
  check "the uninterrupted run: ${MODES[$m]}" test -s "$tmp/ref$m/model.safetensors"
done

bad=0 kills_total=0 restarts=0
for trial in $(seq 1 "$TRIALS"); do
  m=$((trial % ${#MODES[@]}))
  d="$tmp/t$trial" log="$tmp/t$trial.log"
  kills=0
  for attempt in $(seq 1 20); do
    # shellcheck disable=SC2206
    if [ -f "$d/run.json" ]; then cmd=("$STRATA" train --resume "$d")
    else cmd=("$STRATA" train "${COMMON[@]}" ${MODES[$m]} --run-dir "$d"); fi
    if [ $kills -lt 3 ]; then
      "${cmd[@]}" >"$tmp/last.log" 2>&1 &
      pid=$!
      ms=$((RANDOM % ref_ms[m]))
      sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
      kill -9 $pid 2>/dev/null && kills=$((kills + 1))
      wait $pid 2>/dev/null
      rc=$?
    else
      "${cmd[@]}" >"$tmp/last.log" 2>&1
      rc=$?
    fi
    cat "$tmp/last.log" >>"$log"
    [ $rc -eq 0 ] && break
    grep -q "the run finished" "$tmp/last.log" && break   # killed after its last commit
    if grep -q "before its first commit" "$tmp/last.log"; then rm -rf "$d"; restarts=$((restarts + 1)); continue; fi
    [ $rc -eq 137 ] && continue
    echo "trial $trial: unexpected exit $rc:"; tail -3 "$tmp/last.log"; bad=$((bad + 1)); break
  done
  kills_total=$((kills_total + kills))
  if ! diff <(losses "$tmp/ref$m") <(losses "$d") >"$tmp/diff" || ! cmp -s "$tmp/ref$m/model.safetensors" "$d/model.safetensors"; then
    echo "trial $trial (${MODES[$m]}, $kills kills): differs from the uninterrupted run:"; head -5 "$tmp/diff"; bad=$((bad + 1))
  fi
  rm -rf "$d" 2>/dev/null   # a gnuplot a kill orphaned may still be writing its plot there
done
echo "$TRIALS trials, $kills_total kills, $restarts restarts before a first commit"
check "after SIGKILL at random moments, every resumed run's losses and weights are the uninterrupted run's" test $bad -eq 0
finish
