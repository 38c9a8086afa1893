#!/usr/bin/python3
"""torch_generate.py - greedy generation with a KV cache in plain PyTorch on
the CPU: the baseline for Strata's `gpt_decoder` (bench/generate.sh).

    /usr/bin/python3 bench/torch_generate.py --weights W.safetensors --prompt 1,2,3 --new 128 \
        --threads 2 --repeats 3
    /usr/bin/python3 bench/torch_generate.py --write W.safetensors --model gpt2-124m   # random weights
    /usr/bin/python3 bench/torch_generate.py --write DIR --model smollm2-135m          # a Llama directory

GPT-2: the model is tools/gpt2_reference.GPT2 in float32 (fused QKV addmm,
F.layer_norm, tanh GELU, the LM head tied to wte), and the generation is
gpt2_reference.generate_greedy: the prompt in one pass, then one token at a
time against a preallocated cache of every layer's keys and values, the LM
head on the last position only, argmax. Llama (--weights a model
directory): tools/llama_reference.Llama in float32 (nn.Linear projections,
RMSNorm, rotate-half RoPE, repeat_kv, SwiGLU), loaded as
tools/hf_load_check.py loads a directory, with llama_reference's
generate_greedy (its cache holds the rotated keys of the KV heads). Each repeat generates --new tokens
after the prompt; its tokens/s is --new over the time from the prompt's
pass to the last token (prefill included). Prints one line per repeat, the
median, and the generated ids (to compare with Strata's).

--write makes a model of random weights at a shape (GPT-2's init: matrices
N(0, 0.02), the residual projections N(0, 0.02/sqrt(2L)), norm gains 1,
biases 0) and writes it as safetensors (a Llama shape: a model directory
with config.json), for both sides to load.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gpt2_reference as ref  # noqa: E402
import hf_load_check  # noqa: E402
import llama_reference as lref  # noqa: E402
from make_fixtures import llama_config_json  # noqa: E402

SHAPES = {
    # configs/demo.json's model: 4 layers, 4 heads, d_model 256, n_ctx 256, GPT-2's vocabulary
    "demo": ref.GPT2Config(n_layer=4, n_head=4, d_model=256, n_ctx=256, vocab=50257),
    "gpt2-124m": ref.PRESETS["gpt2-124m"],
    "smollm2-135m": lref.PRESETS["smollm2-135m"],
}


def write_random(path, cfg, seed):
    llama = isinstance(cfg, lref.LlamaConfig)
    g = torch.Generator().manual_seed(seed)
    out = {}
    shapes = (lref if llama else ref).param_shapes(cfg)
    for name, shape in shapes.items():
        if lref.is_norm(name) if llama else ref.is_layernorm(name):
            out[name] = torch.ones(shape) if name.endswith(".weight") else torch.zeros(shape)
        elif name.endswith(".bias"):
            out[name] = torch.zeros(shape)
        else:
            resid = name.endswith(("c_proj.weight", "o_proj.weight", "down_proj.weight"))
            std = 0.02 / math.sqrt(2 * cfg.n_layer) if resid else 0.02
            out[name] = torch.randn(shape, generator=g) * std
    if not llama:
        ref.save_safetensors(path, out, {"n_head": str(cfg.n_head)})
        return
    os.makedirs(path, exist_ok=True)
    ref.save_safetensors(os.path.join(path, "model.safetensors"), out)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(llama_config_json(cfg), f, indent=2)


def load_model(path):
    if os.path.isdir(path):   # a Llama directory
        _, cfg, _ = hf_load_check.model_config(path)
        w, _ = hf_load_check.read_weights(path)
        model = lref.Llama(cfg, torch.float32)
        model.load_state_dict(w, strict=True)
        return model.eval()
    w, meta = ref.load_safetensors(path)
    C = w["wte.weight"].shape[1]
    n_layer = 1 + max(int(k.split(".")[1]) for k in w if k.startswith("h."))
    cfg = ref.GPT2Config(n_layer=n_layer, n_head=int(meta["n_head"]), d_model=C,
                         n_ctx=w["wpe.weight"].shape[0], vocab=w["wte.weight"].shape[0])
    model = ref.GPT2(cfg, torch.float32)
    ref.load_state(model, w)
    return model.eval()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weights", help="safetensors file (GPT-2) or model directory (Llama) to generate with")
    ap.add_argument("--write", help="write random weights here (with --model) and exit")
    ap.add_argument("--model", choices=sorted(SHAPES), default="demo")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prompt", default="50256", help="comma-separated token ids")
    ap.add_argument("--new", type=int, default=128, help="tokens to generate")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.write:
        write_random(args.write, SHAPES[args.model], args.seed)
        return
    torch.set_num_threads(args.threads)
    model = load_model(args.weights)
    prompt = [int(t) for t in args.prompt.split(",")]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {model.cfg}; "
          f"prompt {len(prompt)} tokens, {args.new} new", flush=True)
    rates, ids = [], None
    for r in range(args.repeats):
        t0 = time.perf_counter()
        ids = (lref if isinstance(model, lref.Llama) else ref).generate_greedy(model, prompt, args.new)
        dt = time.perf_counter() - t0
        rates.append(args.new / dt)
        print(f"repeat {r}: {dt:.3f} s, {args.new / dt:.2f} tokens/s", flush=True)
    print("ids " + ",".join(map(str, ids)))
    print(f"tokens/s {statistics.median(rates):.2f}")


if __name__ == "__main__":
    main()
