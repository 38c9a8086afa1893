#!/usr/bin/env bash
# hf_export_check.sh STRATA SOURCE_DIR - what `strata export` writes loads as
# transformers loads it: tools/hf_load_check.py (no transformers here) checks
# config.json's fields for LlamaForCausalLM / GPT2LMHeadModel, the index and
# every safetensors file as the Rust library validates them, and loads the
# tensors into the plain-torch model with Hugging Face's names under
# load_state_dict(strict=True); that model's loss on the same tokens is
# strata eval's. Untied Llama in shards (F32) and whole (BF16), tied Llama
# (F16), GPT-2; and the checker refuses what transformers would.
. "$(dirname "$0")/common.bash" "$@"
"$PY" -c "
import array, random
random.seed(5)
array.array('H', [random.randrange(101) for _ in range(20000)]).tofile(open('$tmp/tokens.bin', 'wb'))"
run() { "$STRATA" train --data "$tmp/tokens.bin" --batch 4 --micro-batch 2 --seq 16 --eval-batches 1 --threads 2 \
          --steps 2 "$@" >"$tmp/train.log" 2>&1; }
run --arch llama --n-layer 2 --n-head 4 --n-kv-head 2 --d-model 32 --d-ff 48 --vocab 101 --rope-theta 500000 \
  --rope-scaling llama3:8,1,4,16 --run-dir "$tmp/untied"
check "an untied Llama run" grep -qE "^committed step 2 in" "$tmp/train.log"
run --arch llama --n-layer 2 --n-head 4 --n-kv-head 1 --d-model 32 --d-ff 40 --vocab 101 --tied 1 \
  --run-dir "$tmp/tied"
check "a tied multi-query Llama run" grep -qE "^committed step 2 in" "$tmp/train.log"
run --n-layer 2 --n-head 2 --d-model 32 --vocab 101 --run-dir "$tmp/gpt2"
check "a GPT-2 run" grep -qE "^committed step 2 in" "$tmp/train.log"

# The loss of tools/hf_load_check.py's model against strata eval's, both in
# float32 on the same rows: equal to 2e-6 (summation orders differ).
same_loss() {
  local dir="$1"
  "$PY" "$SRC/tools/hf_load_check.py" "$dir" --tokens "$tmp/tokens.bin" --batch 2 --seq 16 >"$tmp/py" 2>"$tmp/py.err" &&
    "$STRATA" eval --model "$dir" --tokens "$tmp/tokens.bin" --batch 2 --seq 16 2>/dev/null | tail -1 >"$tmp/c" &&
    "$PY" -c "
a = float(open('$tmp/py').read().split()[1]); b = float(open('$tmp/c').read().split()[1])
assert abs(a - b) <= 2e-6, (a, b)"
}
for spec in "untied 20K F32" "untied 0 BF16" "tied 0 F16" "gpt2 0 F32"; do
  read -r run shard dtype <<<"$spec"
  "$STRATA" export "$tmp/$run" --out "$tmp/hf-$run-$dtype" --shard-size "$shard" --dtype "$dtype" >/dev/null 2>&1
  check "$run exported ($dtype, shards of $shard) loads strictly, and its loss is strata eval's" \
    same_loss "$tmp/hf-$run-$dtype"
done
check "  the sharded one has an index and several shards" \
  bash -c "[ -f '$tmp/hf-untied-F32/model.safetensors.index.json' ] &&
           [ \$(ls '$tmp/hf-untied-F32' | grep -c 'of-.*safetensors$') -gt 1 ]"
check "  the BF16 one says so (torch_dtype)" grep -q '"torch_dtype": "bfloat16"' "$tmp/hf-untied-BF16/config.json"

# the checker fails where transformers would
cp -r "$tmp/hf-untied-F32" "$tmp/nokv"
sed -i '/num_key_value_heads/d' "$tmp/nokv/config.json"
expect_fail "the checker refuses a config.json without num_key_value_heads" 'no "num_key_value_heads"' \
  "$PY" "$SRC/tools/hf_load_check.py" "$tmp/nokv"
cp -r "$tmp/hf-untied-F32" "$tmp/renamed"
sed -i 's/model.layers.1.mlp.up_proj.weight/model.layers.1.mlp.upproj.weight/' "$tmp/renamed/model.safetensors.index.json"
expect_fail "  an index that maps a name no shard holds" "is mapped to|maps .* that no shard holds" \
  "$PY" "$SRC/tools/hf_load_check.py" "$tmp/renamed"
cp -r "$tmp/hf-tied-F16" "$tmp/extra"
"$PY" - "$SRC" "$tmp/extra/model.safetensors" <<'PY'
import sys; sys.path.insert(0, sys.argv[1] + "/tools")
import gpt2_reference as ref
t, meta = ref.load_safetensors(sys.argv[2])
t["model.layers.0.self_attn.q_proj.bias"] = t["model.norm.weight"].clone()
ref.save_safetensors(sys.argv[2], t, meta)
PY
expect_fail "  a tensor the model does not have" "Unexpected key" \
  "$PY" "$SRC/tools/hf_load_check.py" "$tmp/extra"
finish
