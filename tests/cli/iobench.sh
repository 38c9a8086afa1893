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
echo "iobench: ok"
