#!/usr/bin/env bash
# iobench.sh - smoke test of `strata iobench`: usage errors exit 2, a missing
# path is a clear error, and small runs on one and two paths report rates
# and clean up after themselves.
set -u
STRATA="$1"
fail() { echo "FAIL: $*" >&2; exit 1; }
WORK=$(mktemp -d "$(dirname "$STRATA")/tmp-cli-iobench-XXXXXX") || fail "mktemp"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/a" "$WORK/b"

"$STRATA" iobench --help | grep -q -- "--path DIR" || fail "--help does not describe --path"

for args in "--bogus" "--path" "--path $WORK/a --qd 0" "--path $WORK/a --block 1000" \
            "--path $WORK/a --engine nope" "--path $WORK/a --rw sideways" "--size 1M"; do
  # shellcheck disable=SC2086
  "$STRATA" iobench $args >/dev/null 2>"$WORK/err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "'iobench $args' exited $rc, expected 2"
  grep -q "strata iobench" "$WORK/err" || fail "'iobench $args' gave no usage message"
done

"$STRATA" iobench --path "$WORK/missing" --size 1M >/dev/null 2>"$WORK/err"
rc=$?
[ "$rc" -eq 1 ] || fail "missing path exited $rc, expected 1"
grep -q "$WORK/missing does not exist" "$WORK/err" || fail "missing path message: $(cat "$WORK/err")"

"$STRATA" iobench --path "$WORK/a" --rw read --size 1M >/dev/null 2>"$WORK/err"
rc=$?
[ "$rc" -eq 1 ] || fail "read without a file exited $rc, expected 1"
grep -q "run with --rw write or both first" "$WORK/err" || fail "read-only message: $(cat "$WORK/err")"

for engine in uring psync; do
  "$STRATA" iobench --path "$WORK/a" --size 8M --block 1M --qd 4 --engine "$engine" >"$WORK/out" 2>"$WORK/err" \
    || fail "iobench --engine $engine failed: $(cat "$WORK/err")"
  grep -q "write GB/s" "$WORK/out" || fail "no header: $(cat "$WORK/out")"
  grep -E -q "^$WORK/a +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+$" "$WORK/out" || fail "no rate row: $(cat "$WORK/out")"
  [ -z "$(ls -A "$WORK/a")" ] || fail "the test file was left behind"
done

"$STRATA" iobench --path "$WORK/a,$WORK/b" --size 4M --block 256K --qd 2 --keep >"$WORK/out" 2>"$WORK/err" \
  || fail "two paths failed: $(cat "$WORK/err")"
grep -E -q "^combined +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+$" "$WORK/out" || fail "no combined row: $(cat "$WORK/out")"
[ -f "$WORK/b/strata-iobench.dat" ] || fail "--keep did not keep the file"
"$STRATA" iobench --path "$WORK/b" --rw read --size 4M >"$WORK/out" 2>"$WORK/err" || fail "read pass: $(cat "$WORK/err")"
grep -E -q "^$WORK/b +- +[0-9]+\.[0-9]+$" "$WORK/out" || fail "read-only row: $(cat "$WORK/out")"

# the cycle pass: a second table, one row per path and the combined one
"$STRATA" iobench --path "$WORK/a,$WORK/b" --size 4M --block 256K --qd 2 --cycle 1M >"$WORK/out" 2>"$WORK/err" \
  || fail "--cycle failed: $(cat "$WORK/err")"
grep -q "^cycle: phases of 1.00 MiB" "$WORK/out" || fail "no cycle table: $(cat "$WORK/out")"
[ "$(grep -E -c "^combined +[0-9]+\.[0-9]+ +[0-9]+\.[0-9]+$" "$WORK/out")" = 2 ] ||
  fail "no cycle rows: $(cat "$WORK/out")"
"$STRATA" iobench --path "$WORK/a" --size 1M --cycle 256K --cycle-idle 5 >"$WORK/out" 2>"$WORK/err" \
  || fail "--cycle-idle failed: $(cat "$WORK/err")"
grep -q "5 ms idle before each" "$WORK/out" || fail "--cycle-idle not reported: $(cat "$WORK/out")"
"$STRATA" iobench --path "$WORK/a" --size 1M --cycle-idle 5 >/dev/null 2>"$WORK/err"
[ $? -eq 2 ] && grep -q -- "--cycle-idle needs --cycle" "$WORK/err" || fail "--cycle-idle alone: $(cat "$WORK/err")"
for args in "--rw read --cycle 1M" "--cycle 5000"; do
  "$STRATA" iobench --path "$WORK/a" --size 4M $args >/dev/null 2>"$WORK/err"
  rc=$?
  [ "$rc" -eq 2 ] && grep -q -- "--cycle needs" "$WORK/err" || fail "'iobench $args' exited $rc: $(cat "$WORK/err")"
done
echo "iobench: ok"
