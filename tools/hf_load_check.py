#!/usr/bin/python3
"""hf_load_check.py - loads a Hugging Face model directory the way transformers
does, without transformers (not installable here), and evaluates it: the check
that what `strata export` writes is a checkpoint LlamaForCausalLM and
GPT2LMHeadModel load.

    /usr/bin/python3 tools/hf_load_check.py DIR [--tokens FILE.bin --batch B --seq T]

What it holds the directory to, step by step as transformers' from_pretrained
goes:

1. config.json: "architectures" and "model_type" name LlamaForCausalLM /
   "llama" or GPT2LMHeadModel / "gpt2", and every field the model's config
   class needs to build that model is present and consistent (for Llama:
   hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
   num_key_value_heads, vocab_size, max_position_embeddings, rms_norm_eps,
   rope_theta, rope_scaling (null or a complete "llama3" entry),
   tie_word_embeddings, hidden_act "silu", no biases; head_dim, when present,
   hidden_size / num_attention_heads); torch_dtype names the tensors' dtype.
2. The weights: model.safetensors, or the shards model.safetensors.index.json
   lists in "weight_map" (every name in exactly one listed file, no tensor
   outside the map, "total_size" the bytes of all tensors).
3. Each safetensors file as the safetensors library (Rust) validates it: an
   8-byte header length within the file, a JSON header of tensors and
   string-to-string "__metadata__", known dtypes, data offsets that tile the
   data exactly (sorted, contiguous, from 0 to the end of the file) and
   match each tensor's shape and dtype.
4. The state dict into the model (tools/llama_reference.Llama or
   tools/gpt2_reference.GPT2: Hugging Face's parameter names and shapes) with
   load_state_dict(strict=True): no missing and no unexpected key; a tied
   model has no lm_head.weight (transformers ties it to the embedding).

Then, with --tokens (raw uint16 ids), it prints "loss X": the mean next-token
loss over the first B*T+1 tokens, as `strata eval` computes it, in float32.
Any failed check exits 1 naming the file and what is wrong.
"""

import argparse
import array
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as gref  # noqa: E402
import llama_reference as lref  # noqa: E402

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}
TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}


def fail(msg):
    sys.exit(f"hf_load_check: {msg}")


def need(cfg, key, kind, where):
    """cfg[key], which must be there and of kind (a type or a tuple of them; bool is not a number)."""
    if key not in cfg:
        fail(f"{where}: no \"{key}\"")
    kinds = kind if isinstance(kind, tuple) else (kind,)
    v = cfg[key]
    if not isinstance(v, kinds) or isinstance(v, bool) and bool not in kinds:
        fail(f"{where}: \"{key}\" is {v!r}, not {' or '.join(k.__name__ for k in kinds)}")
    return v


def model_config(d):
    """The reference model's config from config.json, checked as the docstring says."""
    where = os.path.join(d, "config.json")
    with open(where) as f:
        c = json.load(f)
    arch = c.get("architectures")
    if arch == ["LlamaForCausalLM"]:
        if c.get("model_type") != "llama":
            fail(f"{where}: model_type {c.get('model_type')!r} for LlamaForCausalLM")
        if need(c, "hidden_act", str, where) != "silu":
            fail(f"{where}: hidden_act {c['hidden_act']!r}")
        for bias in ("attention_bias", "mlp_bias"):
            if c.get(bias, False):
                fail(f"{where}: {bias} is set")
        C, NH = need(c, "hidden_size", int, where), need(c, "num_attention_heads", int, where)
        if "head_dim" in c and c["head_dim"] != C // NH:
            fail(f"{where}: head_dim {c['head_dim']} is not hidden_size / heads = {C // NH}")
        scaling = c.get("rope_scaling")
        if scaling is not None:
            for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
                need(scaling, k, (int, float), where + " rope_scaling")
            if scaling.get("rope_type", scaling.get("type")) != "llama3":
                fail(f"{where}: rope_scaling {scaling}")
        return "llama", lref.LlamaConfig(
            n_layer=need(c, "num_hidden_layers", int, where), n_head=NH,
            n_kv_head=need(c, "num_key_value_heads", int, where), d_model=C,
            d_ff=need(c, "intermediate_size", int, where), n_ctx=need(c, "max_position_embeddings", int, where),
            vocab=need(c, "vocab_size", int, where), tied=need(c, "tie_word_embeddings", bool, where),
            rope_theta=float(need(c, "rope_theta", (int, float), where)),
            norm_eps=float(need(c, "rms_norm_eps", (int, float), where)), rope_scaling=scaling), c
    if arch == ["GPT2LMHeadModel"]:
        if c.get("model_type") != "gpt2":
            fail(f"{where}: model_type {c.get('model_type')!r} for GPT2LMHeadModel")
        if c.get("activation_function", "gelu_new") != "gelu_new":
            fail(f"{where}: activation_function {c['activation_function']!r}")
        if c.get("tie_word_embeddings", True) is not True:
            fail(f"{where}: an untied GPT-2 head")
        return "gpt2", gref.GPT2Config(
            n_layer=need(c, "n_layer", int, where), n_head=need(c, "n_head", int, where),
            d_model=need(c, "n_embd", int, where), n_ctx=need(c, "n_positions", int, where),
            vocab=need(c, "vocab_size", int, where)), c
    fail(f"{where}: architectures {arch!r} is neither LlamaForCausalLM nor GPT2LMHeadModel")


def read_checked(path):
    """A safetensors file's tensors, validated as the Rust library does."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read()
    if size < 8:
        fail(f"{path}: {size} bytes, no header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > size:
        fail(f"{path}: header of {n} bytes in a file of {size}")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        fail(f"{path}: the header is not JSON: {e}")
    meta = header.pop("__metadata__", None) or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        fail(f"{path}: __metadata__ values must be strings: {meta}")
    end_of_last = 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        if info["dtype"] not in DTYPE_BYTES:
            fail(f"{path}: {name} has dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        if begin != end_of_last:
            fail(f"{path}: {name} starts at {begin}, not where the previous tensor ends ({end_of_last})")
        if end - begin != math.prod(info["shape"]) * DTYPE_BYTES[info["dtype"]]:
            fail(f"{path}: {name}'s {end - begin} bytes are not its shape {info['shape']} of {info['dtype']}")
        end_of_last = end
    if 8 + n + end_of_last != size:
        fail(f"{path}: the tensors end at byte {8 + n + end_of_last} of {size}")
    tensors, _ = gref.load_safetensors(path)
    return tensors, {name: info["dtype"] for name, info in header.items()}


def read_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_checked(os.path.join(d, "model.safetensors"))
    with open(index) as f:
        idx = json.load(f)
    wmap = idx.get("weight_map")
    if not isinstance(wmap, dict) or not wmap:
        fail(f"{index}: no weight_map")
    tensors, dtypes = {}, {}
    for shard in sorted(set(wmap.values())):
        t, dt = read_checked(os.path.join(d, shard))
        for name in t:
            if wmap.get(name) != shard:
                fail(f"{d}/{shard}: {name} is mapped to {wmap.get(name)!r}")
        tensors.update(t)
        dtypes.update(dt)
    if set(wmap) != set(tensors):
        fail(f"{index}: maps {sorted(set(wmap) - set(tensors))} that no shard holds")
    total = sum(t.numel() * DTYPE_BYTES[dtypes[k]] for k, t in tensors.items())
    if idx.get("metadata", {}).get("total_size") != total:
        fail(f"{index}: total_size {idx.get('metadata', {}).get('total_size')} is not the tensors' {total} bytes")
    return tensors, dtypes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--tokens", help="raw uint16 token ids (*.bin)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(1)
    kind, cfg, raw_cfg = model_config(args.dir)
    tensors, dtypes = read_weights(args.dir)
    kinds = set(dtypes.values())
    if len(kinds) != 1 or raw_cfg.get("torch_dtype") != TORCH_DTYPE.get(next(iter(kinds))):
        fail(f"{args.dir}: torch_dtype {raw_cfg.get('torch_dtype')!r} for tensors of {sorted(kinds)}")
    model = (lref.Llama if kind == "llama" else gref.GPT2)(cfg, torch.float32)
    state = {k: v.to(torch.float32) for k, v in tensors.items()}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as e:
        fail(f"{args.dir}: load_state_dict(strict=True): {e}")
    print(f"{kind}: {len(tensors)} tensors of {sorted(kinds)[0]} load strictly", file=sys.stderr)
    if args.tokens:
        ids = array.array("H")
        with open(args.tokens, "rb") as f:
            ids.frombytes(f.read())
        n = args.batch * args.seq
        flat = torch.tensor(ids[:n + 1], dtype=torch.long)
        with torch.no_grad():
            loss, _ = model(flat[:n].view(args.batch, args.seq), flat[1:].view(args.batch, args.seq))
        print(f"loss {float(loss):.6f}")


if __name__ == "__main__":
    main()
