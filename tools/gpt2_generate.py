#!/usr/bin/python3
"""gpt2_generate.py - greedy generation with a KV cache in plain PyTorch: the
reference that Strata's decoder (gpt_decoder, strata/model.h) must match
token for token, for both architectures.

    /usr/bin/python3 tools/gpt2_generate.py            # writes tests/fixtures/{gpt,llama}_gen_*
    /usr/bin/python3 tools/gpt2_generate.py --out DIR  # elsewhere, to compare (byte-identical)

GPT-2: the fixtures' small shape (2 layers, 4 heads, d_model 48, n_ctx 32,
vocabulary 101) with tools/gpt2_reference.init_weights_f32(seed 1234). Llama:
make_fixtures.LLAMA_CFG (the same size; grouped-query attention with 2
key/value heads, an untied head, Llama 3.1's rope scaling) with
llama_reference.init_weights_f32(seed 1234). In both, every tensor but the
norm gains is scaled by 10 (std 0.2): at the fixtures' std of 0.02 the
greedy continuation is one token repeated, which would not tell a right
cache from a wrong one. The prompt is 8 fixed token ids and 64 tokens are
generated, so the 32-position cache fills and the window is recomputed
(gpt2_reference.window_keep) three times.

Generation runs in float32 (torch's, the same BLAS as Strata's) with each
reference's generate_greedy. Before writing, the script checks that (1) it
equals greedy generation by full recomputation (the model's forward over
each window) in float64, token for token, and (2) every step's top logit
leads the runner-up by a margin far above float32 rounding (the smallest
margin is written in the metadata), so that the C test compares decisions,
not rounding.

Files:
  gpt_gen_model.safetensors  GPT-2's weights, F32, Hugging Face names
  gpt_gen_ref.safetensors    prompt [8] I32, tokens [64] I32 (expected), metadata
  llama_gen/                 Llama's model directory: config.json, model.safetensors
  llama_gen_ref.safetensors  as gpt_gen_ref, for it
"""

import argparse
import os
import sys

import json

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402
import llama_reference as lref  # noqa: E402
from make_fixtures import LLAMA_CFG, llama_config_json  # noqa: E402

CFG = ref.GPT2Config(n_layer=2, n_head=4, d_model=48, n_ctx=32, vocab=101)
SEED, SCALE = 1234, 10.0
PROMPT = [1, 5, 7, 9, 3, 50, 77, 12]
N_NEW = 64
MIN_MARGIN = 1e-3   # top-1 minus top-2 logit, at every step


def weights():
    w = ref.init_weights_f32(CFG, SEED)
    return {k: (v if ref.is_layernorm(k) and k.endswith(".weight") else v * SCALE) for k, v in w.items()}


def llama_weights():
    w = lref.init_weights_f32(LLAMA_CFG, SEED)
    return {k: (v if lref.is_norm(k) else v * SCALE) for k, v in w.items()}


def recompute_greedy(model, prompt, n_new):
    """Greedy generation by full recomputation, the window policy of generate_greedy."""
    T = model.cfg.n_ctx
    seq, win, out, margins = list(prompt), list(prompt[-T:]), [], []
    with torch.no_grad():
        for _ in range(n_new):
            _, logits = model(torch.tensor([win]))
            top = torch.topk(logits[0, -1], 2).values
            margins.append(float(top[0] - top[1]))
            t = int(torch.argmax(logits[0, -1]))
            out.append(t)
            seq.append(t)
            win = seq[-ref.window_keep(T):] if len(win) == T else win + [t]
    return out, margins


def in_both_precisions(model_class, cfg, w):
    """The model with weights w in float32 and in float64."""
    models = []
    for dtype in (torch.float32, torch.float64):
        models.append(model_class(cfg, dtype))
        ref.load_state(models[-1], w)
    return models


def checked_greedy(name, m32, m64):
    """generate_greedy in float32 with a KV cache, checked as the docstring says."""
    tokens = (lref if name == "llama" else ref).generate_greedy(m32, PROMPT, N_NEW)
    expect, margins = recompute_greedy(m64, PROMPT, N_NEW)
    if tokens != expect:
        sys.exit(f"gpt2_generate: {name}'s KV-cache generation {tokens} differs from recomputation in float64 "
                 f"{expect}")
    if min(margins) < MIN_MARGIN:
        sys.exit(f"gpt2_generate: a step's top-2 logit margin {min(margins):.2e} is below {MIN_MARGIN} ({name})")
    if len(set(tokens)) < 16:
        sys.exit(f"gpt2_generate: only {len(set(tokens))} distinct tokens ({name}); the test would not see a wrong "
                 f"cache")
    print(f"gpt2_generate: {name}: {N_NEW} tokens ({len(set(tokens))} distinct), smallest top-2 margin "
          f"{min(margins):.3g}: {tokens}")
    return tokens, min(margins)


def save_ref(path, cfg, tokens, margin, generator, shape):
    meta = dict(shape, n_layer=str(cfg.n_layer), n_head=str(cfg.n_head), d_model=str(cfg.d_model),
                n_ctx=str(cfg.n_ctx), vocab=str(cfg.vocab), seed=str(SEED), scale=str(SCALE),
                window_keep=str(ref.window_keep(cfg.n_ctx)), min_margin=f"{margin:.6g}", generator=generator)
    ref.save_safetensors(path, {"prompt": torch.tensor(PROMPT, dtype=torch.int32),
                                "tokens": torch.tensor(tokens, dtype=torch.int32)}, meta)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)

    w = weights()
    tokens, margin = checked_greedy("gpt2", *in_both_precisions(ref.GPT2, CFG, w))
    ref.save_safetensors(os.path.join(args.out, "gpt_gen_model.safetensors"), w, {"n_head": str(CFG.n_head)})
    save_ref(os.path.join(args.out, "gpt_gen_ref.safetensors"), CFG, tokens, margin,
             "tools/gpt2_generate.py, greedy, float32, KV cache", {})

    w = llama_weights()
    tokens, margin = checked_greedy("llama", *in_both_precisions(lref.Llama, LLAMA_CFG, w))
    d = os.path.join(args.out, "llama_gen")
    os.makedirs(d, exist_ok=True)
    ref.save_safetensors(os.path.join(d, "model.safetensors"), w)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(llama_config_json(LLAMA_CFG), f, indent=2, sort_keys=True)
        f.write("\n")
    save_ref(os.path.join(args.out, "llama_gen_ref.safetensors"), LLAMA_CFG, tokens, margin,
             "tools/gpt2_generate.py, greedy, float32, KV cache (llama_reference.decode_forward)",
             {"arch": "llama", "n_kv_head": str(LLAMA_CFG.n_kv_head), "d_ff": str(LLAMA_CFG.d_ff)})


if __name__ == "__main__":
    main()
