#!/usr/bin/python3
"""gpt2_generate.py - greedy generation with a KV cache in plain PyTorch: the
reference that Strata's decoder (gpt_decoder, strata/model.h) must match
token for token.

    /usr/bin/python3 tools/gpt2_generate.py            # writes tests/fixtures/gpt_gen_*.safetensors
    /usr/bin/python3 tools/gpt2_generate.py --out DIR  # elsewhere, to compare (byte-identical)

The model is the fixtures' small shape (2 layers, 4 heads, d_model 48,
n_ctx 32, vocabulary 101) with tools/gpt2_reference.init_weights_f32(seed
1234), every tensor but the LayerNorm gains scaled by 10 (std 0.2): at the
fixtures' std of 0.02 the greedy continuation is one token repeated, which
would not tell a right cache from a wrong one. The prompt is 8 fixed token
ids and 64 tokens are generated, so the 32-position cache fills and the
window is recomputed (gpt2_reference.window_keep) three times.

Generation runs in float32 (torch's, the same BLAS as Strata's) with
gpt2_reference.generate_greedy. Before writing, the script checks that (1)
it equals greedy generation by full recomputation (GPT2.forward over each
window) in float64, token for token, and (2) every step's top logit leads
the runner-up by a margin far above float32 rounding (the smallest margin
is written in the metadata), so that the C test compares decisions, not
rounding.

Files:
  gpt_gen_model.safetensors  the weights, F32, Hugging Face names
  gpt_gen_ref.safetensors    prompt [8] I32, tokens [64] I32 (expected), metadata
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402

CFG = ref.GPT2Config(n_layer=2, n_head=4, d_model=48, n_ctx=32, vocab=101)
SEED, SCALE = 1234, 10.0
PROMPT = [1, 5, 7, 9, 3, 50, 77, 12]
N_NEW = 64
MIN_MARGIN = 1e-3   # top-1 minus top-2 logit, at every step


def weights():
    w = ref.init_weights_f32(CFG, SEED)
    return {k: (v if ref.is_layernorm(k) and k.endswith(".weight") else v * SCALE) for k, v in w.items()}


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    w = weights()
    m32 = ref.GPT2(CFG, torch.float32)
    ref.load_state(m32, w)
    tokens = ref.generate_greedy(m32, PROMPT, N_NEW)
    m64 = ref.GPT2(CFG, torch.float64)
    ref.load_state(m64, w)
    expect, margins = recompute_greedy(m64, PROMPT, N_NEW)
    if tokens != expect:
        sys.exit(f"gpt2_generate: the KV-cache generation {tokens} differs from recomputation in float64 {expect}")
    if min(margins) < MIN_MARGIN:
        sys.exit(f"gpt2_generate: a step's top-2 logit margin {min(margins):.2e} is below {MIN_MARGIN}")
    if len(set(tokens)) < 16:
        sys.exit(f"gpt2_generate: only {len(set(tokens))} distinct tokens; the test would not see a wrong cache")
    os.makedirs(args.out, exist_ok=True)
    meta = {"n_layer": str(CFG.n_layer), "n_head": str(CFG.n_head), "d_model": str(CFG.d_model),
            "n_ctx": str(CFG.n_ctx), "vocab": str(CFG.vocab), "seed": str(SEED), "scale": str(SCALE),
            "window_keep": str(ref.window_keep(CFG.n_ctx)), "min_margin": f"{min(margins):.6g}",
            "generator": "tools/gpt2_generate.py, greedy, float32, KV cache"}
    ref.save_safetensors(os.path.join(args.out, "gpt_gen_model.safetensors"), w, {"n_head": str(CFG.n_head)})
    ref.save_safetensors(os.path.join(args.out, "gpt_gen_ref.safetensors"),
                         {"prompt": torch.tensor(PROMPT, dtype=torch.int32),
                          "tokens": torch.tensor(tokens, dtype=torch.int32)}, meta)
    print(f"gpt2_generate: {N_NEW} tokens ({len(set(tokens))} distinct), smallest top-2 margin "
          f"{min(margins):.3g}: {tokens}")


if __name__ == "__main__":
    main()
