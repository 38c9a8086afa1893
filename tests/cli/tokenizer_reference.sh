#!/usr/bin/env bash
# tokenizer_reference.sh STRATA SOURCE_DIR - Strata's tokenizer against Hugging
# Face's tokenizers library itself (its Node binding, run here by
# tools/tokenizer_reference.js), for GPT-2 and Llama 3 tokenizer.json files:
# exactly the library's ids on 3 MB of the default corpus (the Bible and
# Python's documentation), decoding the library's ids back to the text, and
# the library's decoding of every id of each vocabulary. Also GPT-2's own
# files (the default) against the library's gpt2 on the same text. The
# reference, the vocabularies and the corpus come from scripts/setup.sh; when
# one is missing the test fails (it does not skip).
. "$(dirname "$0")/common.bash" "$@"

REF="$SRC/tools/tokenizer_reference.js"
CORPUS="$SRC/data/corpus"
missing=""
command -v node >/dev/null 2>&1 || missing+=" node"
[ -d "$SRC/vendor/node_modules/@anush008/tokenizers" ] || missing+=" vendor/node_modules/@anush008/tokenizers"
for v in gpt2 llama3; do [ -f "$SRC/vocab/$v-tokenizer.json" ] || missing+=" vocab/$v-tokenizer.json"; done
[ -f "$CORPUS/kjv.txt" ] && [ -d "$CORPUS/python-docs" ] || missing+=" data/corpus"
if [ -n "$missing" ]; then
  echo "FAIL the reference is missing:$missing (run scripts/setup.sh)"
  fails=$((fails + 1))
  finish
fi

# 1.5 MB of each part of the corpus, whole lines
node "$REF" sample 1500000 "$tmp/s1" "$CORPUS/kjv.txt" &&
  find "$CORPUS/python-docs" -type f -name '*.txt' | LC_ALL=C sort | xargs node "$REF" sample 1500000 "$tmp/s2" &&
  cat "$tmp/s1" "$tmp/s2" >"$tmp/sample.txt"
check "corpus sample of 3 MB" test "$(stat -c %s "$tmp/sample.txt")" -gt 2900000

same_text() {   # the library's string equals Strata's bytes as the library would show them (invalid UTF-8 -> U+FFFD)
  node -e 'const fs = require("fs");
    const strata = new TextDecoder("utf-8").decode(fs.readFileSync(process.argv[1]));
    process.exit(strata === fs.readFileSync(process.argv[2], "utf8") ? 0 : 1);' "$1" "$2"
}

for v in gpt2 llama3; do
  json="$SRC/vocab/$v-tokenizer.json"
  node "$REF" encode "$json" "$tmp/sample.txt" "$tmp/$v.lib"
  "$STRATA" encode --tokenizer "$json" --allow-special <"$tmp/sample.txt" >"$tmp/$v.strata"
  check "$v: the library's ids on the corpus sample ($(wc -w <"$tmp/$v.lib") tokens)" \
    cmp -s "$tmp/$v.lib" "$tmp/$v.strata"
  "$STRATA" decode --tokenizer "$json" <"$tmp/$v.lib" >"$tmp/$v.back"
  check "$v: the library's ids decode to the text" cmp -s "$tmp/sample.txt" "$tmp/$v.back"
  node "$REF" decode-all "$json" "$tmp/$v.all.ids" "$tmp/$v.all.lib"
  "$STRATA" decode --tokenizer "$json" <"$tmp/$v.all.ids" >"$tmp/$v.all.strata"
  check "$v: every id decodes as the library decodes it" same_text "$tmp/$v.all.strata" "$tmp/$v.all.lib"
done

# GPT-2's own files (node's classes, the JS encoder's) agree with the
# library's gpt2 on real text; they differ only on U+0085, U+FEFF and
# characters of Unicode 17 (docs/FORMATS.md).
"$STRATA" encode --allow-special <"$tmp/sample.txt" >"$tmp/default.strata"
check "default GPT-2 files: the library's ids on the corpus sample" cmp -s "$tmp/gpt2.lib" "$tmp/default.strata"
finish
