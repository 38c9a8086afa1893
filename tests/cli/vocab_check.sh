#!/usr/bin/env bash
# vocab_check.sh STRATA SOURCE_DIR - the vocabulary a dataset was made with
# is recorded (its shards' fingerprint) and checked against the model at
# train and eval: data made with another vocabulary of the model's size, a
# --tokenizer that is not the data's, weights trained on other data (--init,
# eval) are refused naming both sides; a run given its tokenizer keeps a
# copy, so that its directory is a whole model directory, which sample reads
# with that tokenizer (and refuses another). Needs
# vocab/llama3-tokenizer.json and vocab/gpt2-tokenizer.json (scripts/setup.sh).
. "$(dirname "$0")/common.bash" "$@"

L3="$SRC/vocab/llama3-tokenizer.json"
G2="$SRC/vocab/gpt2-tokenizer.json"
check "vocab/llama3-tokenizer.json and gpt2-tokenizer.json exist (scripts/setup.sh)" test -f "$L3" -a -f "$G2"
for k in $(seq 1 40); do cat "$SRC/README.md"; done >"$tmp/text.txt"
"$STRATA" prepare --tokenizer "$L3" "$tmp/text.txt" --out "$tmp/l3" >/dev/null 2>&1
"$STRATA" prepare "$tmp/text.txt" --out "$tmp/g2" >/dev/null 2>&1
check "two datasets, Llama 3's and GPT-2's" test -f "$tmp/l3/train.tok" -a -f "$tmp/g2/train.tok"

# a model whose vocabulary holds both: only the fingerprint tells them apart
shape=(--arch llama --n-layer 1 --n-head 2 --d-model 16 --d-ff 32 --vocab 128256)
run() { "$STRATA" train "${shape[@]}" --batch 2 --seq 16 --steps 2 --eval-batches 1 --threads 2 --schedule memory \
          --offload none "$@"; }
run --data "$tmp/l3" --tokenizer "$L3" --run-dir "$tmp/run" >"$tmp/train.log" 2>&1
check "a run on Llama 3 data with its tokenizer" grep -qE "^committed step 2 in" "$tmp/train.log"
check "  keeps the tokenizer in its directory" cmp "$L3" "$tmp/run/tokenizer.json"
check "  and records the vocabulary in its weights" \
  grep -qa "strata_vocab_fingerprint" "$tmp/run/model.safetensors"
expect_fail "a --tokenizer that is not the data's" "different vocabularies" \
  run --data "$tmp/l3" --tokenizer "$G2" --run-dir "$tmp/bad1"
expect_fail "eval of those weights on GPT-2 data" "different vocabularies" \
  "$STRATA" eval --model "$tmp/run" --tokens "$tmp/g2/val.tok" --batch 1 --seq 16
check "  while on Llama 3 data it evaluates" \
  "$STRATA" eval --model "$tmp/run" --tokens "$tmp/l3/val.tok" --batch 1 --seq 16
expect_fail "fine-tuning those weights on GPT-2 data (--init)" "different vocabularies" \
  "$STRATA" train --init "$tmp/run" --data "$tmp/g2" --batch 2 --seq 16 --steps 1 --run-dir "$tmp/bad2"
check "  and leaves no run behind" test ! -e "$tmp/bad2/run.json"
run --data "$tmp/g2" --run-dir "$tmp/run2" >"$tmp/train2.log" 2>&1
check "GPT-2 data without --tokenizer trains (the default vocabulary)" grep -qE "^committed step 2 in" "$tmp/train2.log"
check "  and leaves no tokenizer.json (GPT-2's own files)" test ! -e "$tmp/run2/tokenizer.json"

# sample reads the tokenizer the model directory holds, and checks it too
"$STRATA" sample --model "$tmp/run" --prompt "The" --tokens 8 --temperature 0 >"$tmp/s1" 2>"$tmp/s1.err"
check "sample --model RUN generates with the run's tokenizer.json (Llama 3's: <|begin_of_text|> and 'The')" \
  bash -c "grep -q '^The' '$tmp/s1' && grep -qE '^strata sample: [0-9]+ tokens in .*\(prompt: 2 tokens' '$tmp/s1.err'"
expect_fail "  a --tokenizer that is not the weights'" "different vocabularies" \
  "$STRATA" sample --model "$tmp/run" --tokenizer "$G2" --tokens 2
check "the GPT-2 run samples with GPT-2's vocabulary (the default)" \
  bash -c "'$STRATA' sample --model '$tmp/run2' --prompt The --tokens 2 >/dev/null 2>&1"
expect_fail "  and not with Llama 3's" "different vocabularies" \
  "$STRATA" sample --model "$tmp/run2" --tokenizer "$L3" --tokens 2

"$STRATA" prepare --tokenizer "$L3" "$tmp/text.txt" --out "$tmp/g2" --overwrite >/dev/null 2>&1
expect_fail "resuming it after its dataset was made again with Llama 3's vocabulary" \
  "different vocabularies|training data changed" "$STRATA" train --resume "$tmp/run2" --steps 3
finish
