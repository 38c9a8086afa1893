#!/usr/bin/env bash
# tokenizer_json.sh STRATA SOURCE_DIR - `--tokenizer FILE|DIR` on encode,
# decode and prepare: Llama 3's known ids, a model directory, a Llama 3
# dataset (uint32 shards, meta.json with the fingerprint), and errors that
# name the file and the problem. Needs vocab/llama3-tokenizer.json and
# vocab/gpt2-tokenizer.json (scripts/setup.sh); fails when they are missing.
. "$(dirname "$0")/common.bash" "$@"

L3="$SRC/vocab/llama3-tokenizer.json"
G2="$SRC/vocab/gpt2-tokenizer.json"
check "vocab/llama3-tokenizer.json and gpt2-tokenizer.json exist (scripts/setup.sh)" test -f "$L3" -a -f "$G2"

out="$(printf 'Hello world' | "$STRATA" encode --tokenizer "$L3")"
check "llama3: Hello world" test "$out" = "9906 1917"
out="$(printf '<|begin_of_text|>Hi' | "$STRATA" encode --tokenizer "$L3" --allow-special)"
check "llama3: --allow-special" test "$out" = "128000 13347"
out="$(printf '<|begin_of_text|>Hi' | "$STRATA" encode --tokenizer "$L3")"
check "llama3: special tokens are text by default" bash -c "! grep -qw 128000 <<<'$out'"
out="$(printf '9906 1917 128009' | "$STRATA" decode --tokenizer "$L3")"
check "llama3: decode" test "$out" = "Hello world<|eot_id|>"
mkdir -p "$tmp/model"
ln -s "$L3" "$tmp/model/tokenizer.json"
out="$(printf 'Hello world' | "$STRATA" encode --tokenizer "$tmp/model")"
check "a model directory" test "$out" = "9906 1917"
out="$(printf 'Hello world' | "$STRATA" encode --tokenizer "$G2")"
check "gpt2 tokenizer.json: Hello world" test "$out" = "15496 995"
"$STRATA" encode --tokenizer "$L3" <"$SRC/src/data/tokenizer.c" | "$STRATA" decode --tokenizer "$L3" >"$tmp/rt.c"
check "llama3: round trip of a C file" cmp -s "$SRC/src/data/tokenizer.c" "$tmp/rt.c"
head -c 200000 "$STRATA" >"$tmp/bytes.bin"
"$STRATA" encode --tokenizer "$L3" <"$tmp/bytes.bin" | "$STRATA" decode --tokenizer "$L3" >"$tmp/rt.bin"
check "llama3: round trip of binary bytes" cmp -s "$tmp/bytes.bin" "$tmp/rt.bin"

# A Llama 3 dataset: ids past 65535 in uint32 shards, the tokenizer recorded.
for k in $(seq 1 60); do cat "$SRC/README.md"; echo "東京 Привет 中文 $k"; done >"$tmp/text.txt"
check "prepare --tokenizer" "$STRATA" prepare --tokenizer "$L3" "$tmp/text.txt" --out "$tmp/ds"
check "meta.json: tokenizer llama3" grep -q '"tokenizer": "llama3"' "$tmp/ds/meta.json"
check "meta.json: fingerprint" grep -qE '"tokenizer_fingerprint": "[0-9a-f]{16}"' "$tmp/ds/meta.json"
check "meta.json: vocab_size 128256, separator 128000" \
  grep -qzE '"vocab_size": 128256,.  "eot": 128000,.  "document_separator": "<\|begin_of_text\|>"' "$tmp/ds/meta.json"
first="$("$STRATA" decode --tokenizer "$L3" --tokens "$tmp/ds/train.tok" --count 1)"
check "the first token is <|begin_of_text|>" test "$first" = "<|begin_of_text|>"
"$STRATA" decode --tokenizer "$L3" --tokens "$tmp/ds/train.tok" --start 1 --count 200 >"$tmp/head.txt"
check "the shard decodes to the text" cmp -s "$tmp/head.txt" <(head -c "$(stat -c %s "$tmp/head.txt")" "$tmp/text.txt")
"$STRATA" prepare "$tmp/text.txt" --out "$tmp/ds2" >/dev/null
fp1="$(grep -o '"tokenizer_fingerprint": "[0-9a-f]*"' "$tmp/ds2/meta.json")"
"$STRATA" prepare --tokenizer "$G2" "$tmp/text.txt" --out "$tmp/ds3" >/dev/null
fp2="$(grep -o '"tokenizer_fingerprint": "[0-9a-f]*"' "$tmp/ds3/meta.json")"
check "GPT-2's files and its tokenizer.json: one fingerprint" test -n "$fp1" -a "$fp1" = "$fp2"
check "GPT-2 datasets are the same tokens" cmp -s "$tmp/ds2/train.tok" "$tmp/ds3/train.tok"
expect_fail "decoding Llama 3 ids with GPT-2" "token 0 is 128000, past the model.s vocabulary of 50257" \
  "$STRATA" decode --tokens "$tmp/ds/train.tok"

# Errors name the file and the problem.
expect_fail "missing file" "/nonexistent/tokenizer.json: cannot open" \
  "$STRATA" encode --tokenizer /nonexistent/tokenizer.json
mkdir -p "$tmp/empty"
expect_fail "directory without tokenizer.json" "$tmp/empty: a directory without a tokenizer.json" \
  "$STRATA" encode --tokenizer "$tmp/empty"
printf '{\n  "model": {\n    "vocab": [1, 2,\n  }\n}\n' >"$tmp/bad.json"
expect_fail "malformed JSON: file, line" "$tmp/bad.json: malformed JSON at line 4" \
  "$STRATA" decode --tokenizer "$tmp/bad.json"
sed 's/"normalizer": null/"normalizer": {"type": "NFC"}/' "$G2" >"$tmp/nfc.json"
expect_fail "a normalizer is refused by name" "$tmp/nfc.json: normalizer of type \"NFC\" is not supported" \
  "$STRATA" prepare --tokenizer "$tmp/nfc.json" "$tmp/text.txt" --out "$tmp/ds4"
check "nothing written on a refused tokenizer" test ! -e "$tmp/ds4"
finish
