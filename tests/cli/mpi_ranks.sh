#!/usr/bin/env bash
# mpi_ranks.sh STRATA SOURCE_DIR - `strata train` under mpirun: one rank
# trains as without mpirun; several ranks are refused whole (data-parallel
# training is not built yet), in one line from rank 0, every rank exiting
# with status 1 and nothing written.
. "$(dirname "$0")/common.bash" "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# sanitizer builds: whole stacks, so that tests/lsan.supp matches what OpenMPI leaks
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}fast_unwind_on_malloc=0"
MPIRUN=(mpirun --oversubscribe --bind-to none --timeout 100)

"$PY" - "$tmp/tokens.bin" <<'PY'
import random, struct, sys
random.seed(3)
open(sys.argv[1], "wb").write(struct.pack("<%dH" % 20000, *[random.randrange(97) for _ in range(20000)]))
PY
model=(--n-layer 1 --n-head 2 --d-model 32 --vocab 97 --seq 16 --batch 2 --steps 1 --data "$tmp/tokens.bin")

expect_rc "two ranks: refused, naming the ranks" 1 "started as 2 ranks \(mpirun\)" \
  "${MPIRUN[@]}" -np 2 "$STRATA" train "${model[@]}" --run-dir "$tmp/two"
check "two ranks: one line, from rank 0" test "$(grep -c 'started as' "$tmp/err")" -eq 1
check "two ranks: no run directory" test ! -e "$tmp/two"
expect_rc "three ranks: refused" 1 "started as 3 ranks" \
  "${MPIRUN[@]}" -np 3 "$STRATA" train "${model[@]}" --run-dir "$tmp/three"
"${MPIRUN[@]}" -np 1 "$STRATA" train "${model[@]}" --run-dir "$tmp/one" >"$tmp/one.out" 2>"$tmp/one.err"
check "one rank under mpirun trains" test $? -eq 0 -a -s "$tmp/one/model.safetensors"
finish
