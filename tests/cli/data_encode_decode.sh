#!/usr/bin/env bash
# data_encode_decode.sh STRATA SOURCE_DIR - `strata encode` / `strata decode`:
# known ids, exact byte round trips, special tokens, errors with exit codes.
. "$(dirname "$0")/common.bash" "$@"

out="$(printf 'Hello world' | "$STRATA" encode)"
check "encode Hello world" test "$out" = "15496 995"
out="$(printf '15496 995' | "$STRATA" decode)"
check "decode 15496 995" test "$out" = "Hello world"
out="$(echo '[15496, 995]' | "$STRATA" decode)"
check "decode a JSON list" test "$out" = "Hello world"
out="$(printf 'Hello world' | "$STRATA" encode --count)"
check "encode --count" test "$out" = "2"

# Byte-exact round trips: text from the repository, and arbitrary bytes
# (invalid UTF-8, NULs) taken from a binary.
"$STRATA" encode <"$SRC/src/data/tokenizer.c" | "$STRATA" decode >"$tmp/rt.c"
check "round trip of a C file" cmp -s "$SRC/src/data/tokenizer.c" "$tmp/rt.c"
head -c 300000 "$STRATA" >"$tmp/bytes.bin"
"$STRATA" encode <"$tmp/bytes.bin" | "$STRATA" decode >"$tmp/rt.bin"
check "round trip of binary bytes" cmp -s "$tmp/bytes.bin" "$tmp/rt.bin"
: >"$tmp/empty"
out="$("$STRATA" encode <"$tmp/empty")"
check "empty input encodes to nothing" test -z "$out"

# <|endoftext|> is plain text unless asked for.
out="$(printf 'a<|endoftext|>b' | "$STRATA" encode)"
check "special token is text by default" bash -c "! grep -qw 50256 <<<'$out'"
out="$(printf 'a<|endoftext|>b' | "$STRATA" encode --allow-special)"
check "--allow-special" test "$out" = "64 50256 65"
out="$(printf '64 50256 65' | "$STRATA" decode)"
check "decode the special token" test "$out" = "a<|endoftext|>b"

# Errors: message on stderr, exit 1; usage errors exit 2.
echo "15496 50257" | "$STRATA" decode >/dev/null 2>"$tmp/err"
rc=$?
check "decode rejects an id past the vocabulary (rc=$rc)" test $rc -eq 1
check "  and says which" grep -q "token 1 is 50257" "$tmp/err"
echo "15496 hello" | "$STRATA" decode >/dev/null 2>"$tmp/err"
rc=$?
check "decode rejects words (rc=$rc)" test $rc -eq 1
"$STRATA" encode --bogus </dev/null >/dev/null 2>&1
rc=$?
check "unknown flag is a usage error (rc=$rc)" test $rc -eq 2
STRATA_VOCAB_DIR="$tmp/novocab" "$STRATA" encode </dev/null >/dev/null 2>"$tmp/err"
rc=$?
check "missing vocabulary fails (rc=$rc)" test $rc -eq 1
check "  and says how to fetch it" grep -q "novocab" "$tmp/err"

finish
