#!/usr/bin/env bash
# llama.sh STRATA SOURCE_DIR - the Llama architecture through the command
# line: a run with an explicit Llama shape records it (run.json, config.json,
# the commit) and resumes with it; its weights go out as a Hugging Face
# directory (sharded, with the index) that eval reads as the run's file; a
# checkpoint directory comes in with --init, streamed unit by unit into the
# store within a host budget smaller than the model, with the same weights
# as an import into memory; bad directories are refused with the reason.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(5)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
small=(--arch llama --n-layer 2 --n-head 4 --n-kv-head 2 --d-model 32 --d-ff 48 --vocab 101 --rope-theta 500000
       --rope-scaling llama3:8,1,4,16)
run() { "$STRATA" train --data "$tmp/tokens.bin" --batch 4 --micro-batch 2 --seq 16 --eval-batches 1 --threads 2 \
          --clip 1 "$@"; }

run "${small[@]}" --steps 3 --offload weights,optim,grads --run-dir "$tmp/run" >"$tmp/train.log" 2>&1
check "a Llama run with its state on the SSD trains and commits" grep -qE "^committed step 3 in" "$tmp/train.log"
check "  its config.json is LlamaForCausalLM's, with the key/value heads and the rope scaling" \
  "$PY" -c "
import json; c = json.load(open('$tmp/run/config.json'))
assert c['architectures'] == ['LlamaForCausalLM'] and c['num_key_value_heads'] == 2 and c['intermediate_size'] == 48
assert c['rope_theta'] == 500000 and c['rope_scaling']['rope_type'] == 'llama3' and c['rope_scaling']['factor'] == 8
assert c['tie_word_embeddings'] is False"
check "  run.json records the shape" grep -q '"arch":.*"llama"' "$tmp/run/run.json"
check "  and the store passes fsck" "$STRATA" fsck "$tmp/run"
run --resume "$tmp/run" --steps 5 >"$tmp/resume.log" 2>&1
check "the run resumes with its shape from run.json and extends to step 5" grep -qE "^committed step 5 in" "$tmp/resume.log"

# out: a sharded directory, read back as the run's own file
check "export to a directory in shards of 20K" \
  "$STRATA" export "$tmp/run" --out "$tmp/hf" --shard-size 20K
check "  with the index and several shards" \
  bash -c "[ -f '$tmp/hf/model.safetensors.index.json' ] && [ \$(ls '$tmp/hf' | grep -c 'of-.*safetensors$') -gt 1 ]"
"$STRATA" eval --model "$tmp/run" --tokens "$tmp/tokens.bin" --batch 2 --seq 16 2>/dev/null | tail -1 >"$tmp/eval_run"
"$STRATA" eval --model "$tmp/hf" --tokens "$tmp/tokens.bin" --batch 2 --seq 16 2>/dev/null | tail -1 >"$tmp/eval_hf"
check "  eval of the directory gives the run's loss" \
  bash -c "grep -q '^loss ' '$tmp/eval_run' && cmp '$tmp/eval_run' '$tmp/eval_hf'"
check "export as BF16" "$STRATA" export "$tmp/run" --out "$tmp/hf16" --dtype BF16 --shard-size 0
check "  is half the bytes" \
  bash -c "[ \$(stat -c %s '$tmp/hf16/model.safetensors') -lt \$(( \$(stat -c %s '$tmp/run/model.safetensors') * 6 / 10 )) ]"

# in: a model whose weights outgrow the host budget, streamed into the store
big=(--arch llama --n-layer 24 --n-head 8 --n-kv-head 2 --d-model 256 --d-ff 688 --vocab 101)
run "${big[@]}" --steps 1 --schedule memory --offload none --run-dir "$tmp/bigrun" >"$tmp/big.log" 2>&1
check "a larger Llama (67 MB of fp32 weights) trains a step and exports" \
  "$STRATA" export "$tmp/bigrun" --out "$tmp/bighf"
weights=$(stat -c %s "$tmp/bighf/model.safetensors")
check "  (its weights are more than 48 MiB)" test "$weights" -gt $((48 << 20))
run --init "$tmp/bighf" --steps 1 --eval-every 1 --offload weights,optim,grads,acts --mem-host 48M \
  --run-dir "$tmp/imported" >"$tmp/imp.log" 2>&1
check "--init DIR trains within --mem-host 48M, less than the model's weights" grep -qE "^committed step 1 in" "$tmp/imp.log"
run --init "$tmp/bighf" --steps 1 --eval-every 1 --schedule memory --offload none \
  --run-dir "$tmp/inmem" >"$tmp/inmem.log" 2>&1
grep -E "^step 0: validation loss" "$tmp/imp.log" >"$tmp/v_imp"
grep -E "^step 0: validation loss" "$tmp/inmem.log" >"$tmp/v_mem"
check "  starting from the checkpoint's weights: the same first validation loss as an import into memory" \
  bash -c "[ -s '$tmp/v_imp' ] && cmp '$tmp/v_imp' '$tmp/v_mem'"
run "${big[@]}" --steps 1 --eval-every 1 --schedule memory --offload none --seed 99 \
  --run-dir "$tmp/fresh" >"$tmp/fresh.log" 2>&1
check "  (which a fresh initialization does not give)" \
  bash -c "! cmp -s '$tmp/v_mem' <(grep -E '^step 0: validation loss' '$tmp/fresh.log')"

# what a directory may not be
mkdir -p "$tmp/bad" && cp "$tmp/hf/config.json" "$tmp/bad/"
expect_fail "a directory without weights" "no model.safetensors or model.safetensors.index.json" \
  "$STRATA" eval --model "$tmp/bad" --tokens "$tmp/tokens.bin" --batch 1 --seq 16
cp "$tmp/run/model.safetensors" "$tmp/bad/"
sed -i 's/"hidden_act": "silu"/"hidden_act": "relu"/' "$tmp/bad/config.json"
expect_fail "a config.json Strata cannot compute" 'hidden_act "relu" is not supported' \
  "$STRATA" train --init "$tmp/bad" --data "$tmp/tokens.bin" --steps 1 --seq 16 --run-dir "$tmp/never"
check "  and no run directory is left behind" test ! -e "$tmp/never/run.json"
expect_rc "an explicit Llama shape without --d-ff is a usage error" 1 "needs --d-ff" \
  "$STRATA" train --arch llama --n-layer 2 --n-head 4 --d-model 32 --data "$tmp/tokens.bin" --steps 1 --seq 16 \
  --run-dir "$tmp/never2"
expect_rc "GPT-2 with --n-kv-head is refused" 1 "for --arch llama" \
  "$STRATA" train --n-layer 2 --n-head 4 --n-kv-head 2 --d-model 32 --data "$tmp/tokens.bin" --steps 1 --seq 16 \
  --run-dir "$tmp/never3"
finish
