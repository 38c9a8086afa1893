#!/usr/bin/env bash
# threads.sh STRATA SOURCE_DIR - the thread count does not change a run: the
# same model trained with --threads 1, 2 and 3 ends with the same losses and
# weights, bit for bit, in the in-memory trainer and in the executor with
# its state on the SSD; and a run resumed with another --threads than it
# started with ends as the uninterrupted run does. A micro-batch of 4 x 100
# tokens makes the weight gradients' products reduce over 400 rows, where
# OpenBLAS's threaded sgemm cut the sum into other blocks than its one-thread
# sgemm (the weights differed from --threads 2 to --threads 1 by up to 4e-6).
# Also: strata's OpenMP threads wait passively unless the user set a policy,
# and OpenBLAS runs the kernels the CPU's instructions allow.
. "$(dirname "$0")/common.bash" "$@"

# src/cli/main.c starts the process again with OMP_WAIT_POLICY set, so that
# libgomp reads it (libgomp's verbose display shows the spin count it took
# from it: 0 when passive, 300000 when no policy reached it, which it also
# displays as PASSIVE), and keeps a policy or a spin count the user set.
check "OpenMP's threads wait passively by default (no spinning)" \
  bash -c "OMP_DISPLAY_ENV=verbose '$STRATA' version 2>&1 | grep -q \"GOMP_SPINCOUNT = '0'\""
check "  a wait policy the user set is kept" \
  bash -c "OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=true '$STRATA' version 2>&1 | grep -q \"OMP_WAIT_POLICY = 'ACTIVE'\""
check "  a spin count the user set is kept" \
  bash -c "GOMP_SPINCOUNT=300000 OMP_DISPLAY_ENV=verbose '$STRATA' version 2>&1 | grep -q \"GOMP_SPINCOUNT = '300000'\""
expect_rc "  the process's arguments and exit status pass through it" 2 "unknown command 'bogus'" "$STRATA" bogus
# The same start runs OpenBLAS's kernels for what the CPU can do: a CPU
# with AVX2 and FMA never runs a set without them (OpenBLAS falls back to
# Prescott's on a CPU model newer than it; strata/backend.h), and a set the
# user named is kept.
kernels=$("$STRATA" version | sed -n 's/^matrix products: OpenBLAS, \(.*\) kernels$/\1/p')
check "strata version names OpenBLAS's kernels ($kernels)" test -n "$kernels"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  check "  this CPU has AVX2 and FMA: not a set without them" \
    bash -c "! echo '$kernels' | grep -qxE 'Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|Sandybridge|Katmai|Coppermine|Northwood|Banias|Opteron|Opteron_SSE3|Barcelona|Bobcat'"
fi
check "  a set the user named is kept" \
  bash -c "OPENBLAS_CORETYPE=Prescott '$STRATA' version | grep -qx 'matrix products: OpenBLAS, Prescott kernels'"
"$PY" -c "
import array, random
random.seed(5)
array.array('H', [random.randrange(101) for _ in range(30000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
ARGS=(--n-layer 2 --d-model 64 --n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 8 --micro-batch 4 --seq 100
      --eval-batches 1 --clip 1)
MEMORY=(--schedule memory --offload none --alpha 0)
SSD=(--schedule vertical --offload weights,optim,grads --alpha 0.25)
losses() { grep -o '"step": [0-9]*, "loss": [^,]*' "$1/metrics.jsonl"; }
same_run() { diff <(losses "$1") <(losses "$2") >/dev/null && cmp -s "$1/model.safetensors" "$2/model.safetensors"; }
for kind in memory ssd; do
  if [ $kind = memory ]; then placement=("${MEMORY[@]}"); else placement=("${SSD[@]}"); fi
  for th in 1 2 3; do
    "$STRATA" train "${ARGS[@]}" "${placement[@]}" --steps 4 --threads $th --run-dir "$tmp/$kind$th" >/dev/null 2>&1
  done
  check "$kind: trained with --threads 1" test -s "$tmp/${kind}1/model.safetensors"
  check "  --threads 2 ends with the same losses and weights, bit for bit" same_run "$tmp/${kind}1" "$tmp/${kind}2"
  check "  and so does --threads 3" same_run "$tmp/${kind}1" "$tmp/${kind}3"
done

# Resumed with another thread count: stopped by SIGTERM (which finishes the
# step and commits) after step 3 of 100, then resumed with --threads 3
# (in-memory trainer, started with 1) and 1 (the executor, started with 2);
# both end as the uninterrupted run. (100 steps of ~10 ms: the signal lands
# long before the end.)
for kind in memory ssd; do
  if [ $kind = memory ]; then placement=("${MEMORY[@]}") first=1 then=3; else placement=("${SSD[@]}") first=2 then=1; fi
  "$STRATA" train "${ARGS[@]}" "${placement[@]}" --steps 100 --log-every 1 --threads $first \
    --run-dir "$tmp/$kind-ref" >/dev/null 2>&1
  run_until "$tmp/$kind-stop.log" "^step 3/" "$STRATA" train "${ARGS[@]}" "${placement[@]}" --steps 100 --log-every 1 \
    --threads $first --run-dir "$tmp/$kind-stop"
  check "$kind: stopped at step 3 or after by SIGTERM (exit 143), before the end" \
    bash -c "[ $rc -eq 143 ] && ! grep -q '\"step\": 100,' '$tmp/$kind-stop/metrics.jsonl'"
  "$STRATA" train --resume "$tmp/$kind-stop" --threads $then >"$tmp/$kind-resume.log" 2>&1
  check "  resumed with --threads $then (started with $first): the uninterrupted run's losses and weights" \
    same_run "$tmp/$kind-ref" "$tmp/$kind-stop"
  check "  it computed with $then threads" grep -qE ", $then threads(,|\$)" "$tmp/$kind-resume.log"
done

finish
