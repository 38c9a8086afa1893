#!/usr/bin/env bash
# ranks_kill_stress.sh - issue 14's atomic commits at stress size: two ranks
# commit every step, rank 1 is SIGKILLed at a random moment (often between
# the two ranks' commits of a step), the job is resumed on two ranks, and
# its weights must equal, bit for bit, those of a run that was never
# interrupted. Each trial says whether the resume had to take ranks back
# to the commit before their last (a kill between the ranks' commits).
#
#   bench/ranks_kill_stress.sh [STRATA] [TRIALS] [WORK]
#   defaults: build/strata 12 /tmp/ranks_kill_stress
set -uo pipefail
STRATA=$(realpath "${1:-build/strata}")
TRIALS=${2:-12}
WORK=${3:-/tmp/ranks_kill_stress}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
MPIRUN=(mpirun --oversubscribe --bind-to none --timeout 300)
rm -rf "$WORK" && mkdir -p "$WORK"
/usr/bin/python3 - "$WORK/tokens.bin" <<'PY'
import random, struct, sys
random.seed(3)
open(sys.argv[1], "wb").write(struct.pack("<%dH" % 20000, *[random.randrange(97) for _ in range(20000)]))
PY
run=(--n-layer 2 --n-head 2 --d-model 32 --vocab 97 --seq 16 --batch 2 --micro-batch 1 --steps 300
     --eval-every 0 --data "$WORK/tokens.bin" --commit-every 1)
"${MPIRUN[@]}" -np 2 "$STRATA" train "${run[@]}" --run-dir "$WORK/ref" >/dev/null 2>&1 || { echo "the reference run failed"; exit 1; }
failed=0 back=0
for i in $(seq 1 "$TRIALS"); do
  rm -rf "$WORK/run"
  "${MPIRUN[@]}" -np 2 "$STRATA" train "${run[@]}" --run-dir "$WORK/run" >"$WORK/run.out" 2>&1 &
  job=$!
  sleep "0.$((RANDOM % 5 + 5))"; sleep "0.$((RANDOM % 10))$((RANDOM % 10))"   # past start-up (~0.5 s), then anywhere
  rank1=""
  for p in $(pgrep -f "strata train .*$WORK/run"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && rank1=$p
  done
  [ -n "$rank1" ] && kill -KILL "$rank1"
  wait "$job"
  if [ ! -f "$WORK/run/run.json" ]; then   # killed while starting: a fresh run that never began is discarded
    echo "trial $i: killed before the run began"
    continue
  fi
  "${MPIRUN[@]}" -np 2 "$STRATA" train --resume "$WORK/run" >"$WORK/resume.out" 2>&1
  rc=$?
  went_back=$(grep -c "go back to their commit" "$WORK/resume.out")
  from=$(grep -o "from its commit at step [0-9]*" "$WORK/resume.out")
  same=$(cmp -s "$WORK/ref/model.safetensors" "$WORK/run/model.safetensors" && echo "bit for bit" || echo DIFFERENT)
  echo "trial $i: ${rank1:+rank 1 killed, }resumed ${from:-(no commit)}, rc $rc, went back: $went_back, $same"
  [ "$rc" -eq 0 ] && [ "$same" = "bit for bit" ] || failed=$((failed + 1))
  back=$((back + went_back))
done
echo "$TRIALS trials: $back resumes went back a commit, $failed failed"
[ "$failed" -eq 0 ]
