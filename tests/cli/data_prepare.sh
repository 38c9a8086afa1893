#!/usr/bin/env bash
# data_prepare.sh STRATA SOURCE_DIR - `strata prepare`: a dataset from text
# files, its files and summary, decoding it back, and bad input (missing,
# empty, no text, an existing dataset, damaged shards) failing clearly.
. "$(dirname "$0")/common.bash" "$@"

mkdir -p "$tmp/in/sub" "$tmp/empty_dir"
for f in "$SRC"/src/data/*.c; do cp "$f" "$tmp/in/$(basename "$f").txt"; done
cp "$SRC/include/strata/data.h" "$tmp/in/sub/data.h"
printf 'bin\0ary' >"$tmp/in/blob.bin"
bytes=$(cat "$tmp"/in/*.txt "$tmp/in/sub/data.h" | wc -c)

"$STRATA" prepare "$tmp/in" --out "$tmp/ds" >"$tmp/log" 2>&1
rc=$?
check "prepare succeeds (rc=$rc)" test $rc -eq 0
check "  train.tok, val.tok, meta.json" test -s "$tmp/ds/train.tok" -a -s "$tmp/ds/val.tok" -a -s "$tmp/ds/meta.json"
check "  nothing else in the output" test "$(ls -A "$tmp/ds" | wc -l)" -eq 3
check "  plain progress lines when not a terminal" grep -q "^prepare: 100%.*MB/s" "$tmp/log"
check "  no carriage returns in a log" bash -c "! grep -q $'\r' '$tmp/log'"
check "  summary names the text bytes" grep -q "prepared $tmp/ds: .* files" "$tmp/log"
check "  skipped the binary file" grep -q "1 skipped" "$tmp/log"
check "  meta.json counts the bytes" grep -q "\"text_bytes\": $bytes," "$tmp/ds/meta.json"
# Every file is one document: as many <|endoftext|> as files, and the text
# decodes back to the files' bytes (train and val together).
ndocs=$(ls "$tmp"/in/*.txt "$tmp/in/sub/data.h" | wc -l)
"$STRATA" decode --tokens "$tmp/ds/train.tok" >"$tmp/train.txt"
"$STRATA" decode --tokens "$tmp/ds/val.tok" >"$tmp/val.txt"
in_text=$(cat "$tmp"/in/*.txt "$tmp/in/sub/data.h" | grep -o '<|endoftext|>' | wc -l)
n=$(cat "$tmp/train.txt" "$tmp/val.txt" | grep -o '<|endoftext|>' | wc -l)
check "  one <|endoftext|> per document ($n = $ndocs + $in_text in the text)" test "$n" -eq $((ndocs + in_text))
got=$(( $(wc -c <"$tmp/train.txt") + $(wc -c <"$tmp/val.txt") ))
check "  decodes back to all the text" test "$got" -eq $((bytes + 13 * ndocs))
"$STRATA" decode --tokens "$tmp/ds/train.tok" --start 1 --count 5 >"$tmp/five.txt"
check "  decode --start/--count" test -s "$tmp/five.txt"

# Refuse to replace an existing dataset unless told, and keep it intact.
sum_before=$(cat "$tmp/ds/train.tok" "$tmp/ds/val.tok" | md5sum)
"$STRATA" prepare "$tmp/in/sub/data.h" --out "$tmp/ds" >/dev/null 2>"$tmp/err"
rc=$?
check "existing dataset refused (rc=$rc)" test $rc -eq 1
check "  message says --overwrite" grep -q -- "--overwrite" "$tmp/err"
check "  old dataset untouched" test "$(cat "$tmp/ds/train.tok" "$tmp/ds/val.tok" | md5sum)" = "$sum_before"
"$STRATA" prepare "$tmp/in" --out "$tmp/ds" --overwrite --val-fraction 0.2 >/dev/null 2>&1
rc=$?
check "--overwrite replaces it (rc=$rc)" test $rc -eq 0
check "  with the new fraction" grep -q '"val_fraction": 0.2' "$tmp/ds/meta.json"

# Bad input: a clear message naming the path, exit 1, nothing created.
expect_error() {   # expect_error NAME PATTERN ARGS...: `strata ARGS` exits 1 naming the problem
  local name="$1" pattern="$2"; shift 2
  expect_rc "$name" 1 "$pattern" "$STRATA" "$@"
}
expect_error "missing input" "$tmp/nope.txt: cannot read input" prepare "$tmp/nope.txt" --out "$tmp/x"
: >"$tmp/empty.txt"
expect_error "empty input file" "$tmp/empty.txt: empty input file" prepare "$tmp/empty.txt" --out "$tmp/x"
expect_error "directory without text" "$tmp/empty_dir: no text files" prepare "$tmp/empty_dir" --out "$tmp/x"
expect_error "binary input file" "blob.bin: not a text file" prepare "$tmp/in/blob.bin" --out "$tmp/x"
check "  no output directory left by failures" test ! -e "$tmp/x"
"$STRATA" prepare "$tmp/in" >/dev/null 2>&1
rc=$?
check "missing --out is a usage error (rc=$rc)" test $rc -eq 2

# Damaged shards are refused by anything that opens them.
cp "$tmp/ds/val.tok" "$tmp/bad.tok"
printf 'X' | dd of="$tmp/bad.tok" bs=1 seek=3 conv=notrunc 2>/dev/null
expect_error "wrong magic" "bad.tok: not a strata token shard: wrong magic" decode --tokens "$tmp/bad.tok"
cp "$tmp/ds/val.tok" "$tmp/bad.tok"
printf '\x03' | dd of="$tmp/bad.tok" bs=1 seek=8 conv=notrunc 2>/dev/null
expect_error "newer version" "bad.tok: shard format version 3" decode --tokens "$tmp/bad.tok"
cp "$tmp/ds/val.tok" "$tmp/bad.tok"
printf 'zz' | dd of="$tmp/bad.tok" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_error "bad checksum" "bad.tok: token checksum mismatch" decode --tokens "$tmp/bad.tok"

finish
