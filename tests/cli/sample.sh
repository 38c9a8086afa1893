#!/usr/bin/env bash
# sample.sh STRATA SOURCE_DIR - `strata sample` generates with the decoder and
# the sampler: greedy is deterministic, a seed repeats its tokens, top-p and
# top-k are accepted, out-of-range values are usage errors, it stops at
# end-of-text, a prompt longer than the context keeps its last tokens (and
# says so), and it ends with one line of tokens/s on stderr.
. "$(dirname "$0")/common.bash" "$@"
# Two tiny models with GPT-2's vocabulary and a context of 16: random
# weights, and one whose every next token is end-of-text (ln_f's output is a
# fixed unit vector that only wte's end-of-text row points along).
"$PY" - "$SRC" "$tmp" <<'PY'
import sys, torch
sys.path.insert(0, sys.argv[1] + "/tools")
import gpt2_reference as ref
cfg = ref.GPT2Config(n_layer=1, n_head=2, d_model=32, n_ctx=16, vocab=50257)
g = torch.Generator().manual_seed(1)
w = {n: torch.randn(s, generator=g) * (1.0 if ref.is_layernorm(n) else 0.5) for n, s in ref.param_shapes(cfg).items()}
ref.save_safetensors(sys.argv[2] + "/random.safetensors", w, {"n_head": "2"})
w["ln_f.weight"] = torch.zeros(32)
w["ln_f.bias"] = torch.zeros(32); w["ln_f.bias"][0] = 1.0
w["wte.weight"][:, 0] = 0.0; w["wte.weight"][50256, 0] = 10.0
ref.save_safetensors(sys.argv[2] + "/eot.safetensors", w, {"n_head": "2"})
PY
M="$tmp/random.safetensors"
s() { "$STRATA" sample --model "$M" --threads 2 "$@"; }
check "greedy generation runs and reports tokens/s" \
  bash -c "'$STRATA' sample --model '$M' --prompt 'Hello' --tokens 20 --temperature 0 >'$tmp/g1' 2>'$tmp/g1.err' &&
           grep -qE '^strata sample: 20 tokens in [0-9.]+ s, [0-9.]+ tokens/s \(prompt: 2 tokens in [0-9.]+ s\)$' '$tmp/g1.err'"
check "  its output continues the prompt" grep -q '^Hello' "$tmp/g1"
s --prompt 'Hello' --tokens 20 --temperature 0 >"$tmp/g2" 2>/dev/null
check "  and is the same on a second run" cmp "$tmp/g1" "$tmp/g2"
s --prompt 'Hello' --tokens 20 --temperature 0 --threads 1 >"$tmp/g3" 2>/dev/null
check "  and with one thread" cmp "$tmp/g1" "$tmp/g3"
s --prompt 'Hello' --tokens 30 --temperature 1 --top-k 0 --top-p 0.9 --seed 7 >"$tmp/a" 2>/dev/null
s --prompt 'Hello' --tokens 30 --temperature 1 --top-k 0 --top-p 0.9 --seed 7 >"$tmp/b" 2>/dev/null
s --prompt 'Hello' --tokens 30 --temperature 1 --top-k 0 --top-p 0.9 --seed 8 >"$tmp/c" 2>/dev/null
check "a seed repeats its tokens (top-p 0.9)" cmp "$tmp/a" "$tmp/b"
check "  another seed gives others" bash -c "! cmp -s '$tmp/a' '$tmp/c'"
check "top-k 5 with temperature 0.5 runs" bash -c "'$STRATA' sample --model '$M' --tokens 10 --top-k 5 --temperature 0.5 >/dev/null 2>&1"
expect_rc "--top-p 0 is a usage error" 2 "^strata sample: --top-p 0: must be" s --top-p 0
expect_rc "--top-p 1.5 is a usage error" 2 "^strata sample: --top-p 1.5: must be" s --top-p 1.5
expect_rc "--temperature -1 is a usage error" 2 "^strata sample: --temperature -1: must be" s --temperature -1
expect_rc "--top-k -1 is a usage error" 2 "^strata sample: --top-k -1: must be" s --top-k -1
expect_rc "--tokens 0 is a usage error" 2 "^strata sample: --tokens 0: must be" s --tokens 0
expect_rc "--model is required" 2 "--model is required" "$STRATA" sample --prompt hi
expect_fail "a model with fewer tokens than GPT-2's vocabulary (the default tokenizer) is refused" \
  "has 50257 tokens, more than the vocabulary of .* \(101\)" \
  "$STRATA" sample --model "$SRC/tests/fixtures/gpt_small_init.safetensors" --n-head 4
long="$(printf 'one two three four five six seven eight nine ten eleven twelve %.0s' 1 2 3)"
check "a prompt longer than the context keeps its last tokens, and says so" \
  bash -c "'$STRATA' sample --model '$M' --prompt '$long' --tokens 30 --temperature 0 >'$tmp/long' 2>'$tmp/long.err' &&
           grep -q 'more than the model.s context of 16: continuing from its last 16' '$tmp/long.err' &&
           grep -qE '^strata sample: 30 tokens in .*\(prompt: 16 tokens' '$tmp/long.err'"
check "it stops at end-of-text: nothing is generated after it" \
  bash -c "'$STRATA' sample --model '$tmp/eot.safetensors' --prompt 'Hi' --tokens 50 --temperature 0.8 >'$tmp/eot' 2>'$tmp/eot.err' &&
           [ \"\$(cat '$tmp/eot')\" = 'Hi' ] && grep -q '^strata sample: 0 tokens' '$tmp/eot.err'"

# Llama with Llama 3's tokenizer.json in its directory: a model whose every
# next token is <|end_of_text|> (all blocks zero, so the final norm sees the
# token's embedding, which points along dimension 0 only; the norm keeps that
# dimension and lm_head's <|end_of_text|> row alone reads it), and the same
# model with lm_head's row of 'Hi' reading it instead.
L3="$SRC/vocab/llama3-tokenizer.json"
"$PY" - "$SRC" "$tmp" "$L3" <<'PY'
import json, os, shutil, sys, torch
sys.path.insert(0, sys.argv[1] + "/tools")
import gpt2_reference as ref, llama_reference as lref
from make_fixtures import llama_config_json
cfg = lref.LlamaConfig(n_layer=1, n_head=2, n_kv_head=1, d_model=16, d_ff=32, n_ctx=64, vocab=128256)
w = {n: torch.zeros(s) for n, s in lref.param_shapes(cfg).items()}
w["model.embed_tokens.weight"][:, 0] = 1.0
w["model.norm.weight"][0] = 1.0
for name, row in (("eos", 128001), ("hi", 13347)):   # <|end_of_text|>, "Hi"
    d = os.path.join(sys.argv[2], name)
    os.makedirs(d)
    w["lm_head.weight"].zero_()
    w["lm_head.weight"][row, 0] = 10.0
    ref.save_safetensors(d + "/model.safetensors", w)
    json.dump(llama_config_json(cfg), open(d + "/config.json", "w"))
    shutil.copy(sys.argv[3], d + "/tokenizer.json")
PY
check "a Llama model directory with its tokenizer.json samples" \
  bash -c "'$STRATA' sample --model '$tmp/hi' --prompt 'Say' --tokens 3 --temperature 0 >'$tmp/hi.out' 2>'$tmp/hi.err'"
check "  its tokens, decoded by that tokenizer" test "$(cat "$tmp/hi.out")" = "SayHiHiHi"
check "  after <|begin_of_text|> and the prompt" grep -q "(prompt: 2 tokens" "$tmp/hi.err"
check "Llama stops at <|end_of_text|>: nothing is generated after it" \
  bash -c "'$STRATA' sample --model '$tmp/eos' --prompt 'Hi' --tokens 50 --temperature 0.8 >'$tmp/eos.out' 2>'$tmp/eos.err' &&
           [ \"\$(cat '$tmp/eos.out')\" = 'Hi' ] && grep -q '^strata sample: 0 tokens' '$tmp/eos.err'"
finish
