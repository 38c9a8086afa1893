#!/usr/bin/env bash
# store_dirs.sh STRATA SOURCE_DIR - a fresh run's --store: missing
# directories are made (as resume makes them); a store already there is
# refused unless it is the one of the run --overwrite replaces, and then it
# comes back if the new run fails before its first commit; a store creation
# that fails (here: a file-size limit, as a full disk would) removes what it
# made, so that trying again is not refused.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(7)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
ARGS=(--n-head 2 --vocab 101 --data "$tmp/tokens.bin" --batch 2 --seq 16 --steps 3 --eval-batches 1 --threads 1
      --offload optim)
small() { "$STRATA" train "${ARGS[@]}" --n-layer 2 --d-model 32 "$@" >/dev/null; }
big() { "$STRATA" train "${ARGS[@]}" --n-layer 4 --d-model 256 "$@" >/dev/null; }   # a 7 MiB store
# with files limited to 2 MiB, the big model's store cannot be made (EFBIG, like ENOSPC)
limited() { (trap '' XFSZ; ulimit -f 2048; "$@"); }
store_files() { ls "$1"/strata-store.* 2>/dev/null | grep -v '\.lock$'; }

check "a fresh run makes a missing --store directory" small --run-dir "$tmp/a" --store "$tmp/stores/a/deep"
check "  its store is whole" "$STRATA" fsck "$tmp/a"
a_sum=$(cat "$tmp/stores/a/deep"/strata-store.* | md5sum)

expect_fail "a fresh run refuses a --store that holds another run's store" \
  "--store .*/stores/a/deep already holds a store that is not .*/b's" small --run-dir "$tmp/b" --store "$tmp/stores/a/deep"
check "  that store is untouched" test "$(cat "$tmp/stores/a/deep"/strata-store.* | md5sum)" = "$a_sum"
check "  nothing was written in the refused run's directory" test ! -e "$tmp/b/run.json"

check "another run with its own store" small --run-dir "$tmp/b" --store "$tmp/stores/b"
expect_fail "--overwrite refuses a --store that belongs to another run than the one it replaces" \
  "already holds a store that is not .*/b's" small --run-dir "$tmp/b" --store "$tmp/stores/a/deep" --overwrite
check "  the other run's store is untouched" test "$(cat "$tmp/stores/a/deep"/strata-store.* | md5sum)" = "$a_sum"
check "  the run it would have replaced is still whole" "$STRATA" fsck "$tmp/b"

check "--overwrite clears the --store of the run it replaces" small --run-dir "$tmp/a" --store "$tmp/stores/a/deep" \
  --overwrite --seed 5
check "  the new run's store is whole" "$STRATA" fsck "$tmp/a"
check "  nothing of the old store is left aside" test ! -e "$tmp/stores/a/deep/.previous-run-store"
a_sum=$(cat "$tmp/stores/a/deep"/strata-store.* | md5sum)

expect_fail "an --overwrite whose store cannot be made fails" "File too large|No space left" \
  limited big --run-dir "$tmp/a" --store "$tmp/stores/a/deep" --overwrite
check "  the replaced run's store is back, unchanged" \
  test "$(cat "$tmp/stores/a/deep"/strata-store.* | md5sum)" = "$a_sum"
check "  and so is its run directory" grep -q '"n-layer":.*2,' "$tmp/a/run.json"
check "  which fsck passes" "$STRATA" fsck "$tmp/a"

expect_fail "a fresh run whose store cannot be made fails" "File too large|No space left" \
  limited big --run-dir "$tmp/c" --store "$tmp/stores/c"
check "  it leaves no store files behind" test -z "$(store_files "$tmp/stores/c")"
check "  nor a run.json that would refuse the next try" test ! -e "$tmp/c/run.json"
check "  the next try is not refused" big --run-dir "$tmp/c" --store "$tmp/stores/c"
expect_fail "the same with the default store (RUN_DIR/store)" "File too large|No space left" \
  limited big --run-dir "$tmp/d"
check "  it leaves no store files behind" test -z "$(store_files "$tmp/d/store")"
check "  the next try is not refused" big --run-dir "$tmp/d"
finish
