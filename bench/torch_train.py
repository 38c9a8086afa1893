#!/usr/bin/python3
"""torch_train.py - PyTorch CPU training throughput, the baseline for Strata.

    /usr/bin/python3 bench/torch_train.py --model gpt2-124m --batch 4 --seq 64 \
        --threads 2 --steps 5 --warmup 2 --precision fp32
    /usr/bin/python3 bench/torch_train.py --model smollm2-135m ...

One step = forward + backward + gradient clipping + AdamW (torch.optim.AdamW,
foreach=True), on one micro-batch of B x T random tokens; throughput counts
B*T tokens per step over the timed steps (the --warmup steps before them are
run and not counted). The model is tools/gpt2_reference.GPT2, the same
architecture and layout as Strata's (fused QKV GEMM, F.layer_norm, tanh
GELU, manual causal attention: torch 1.13 has no scaled_dot_product_attention).
A Llama preset (smollm2-135m, ...) runs tools/llama_reference.Llama instead:
Hugging Face's LlamaForCausalLM in plain torch (separate q/k/v and gate/up
nn.Linear, RMSNorm and rotate-half RoPE written out, repeat_kv for GQA, the
same manual causal attention), tied head where the preset is tied.
--precision bf16 runs forward and backward under torch.autocast('cpu',
bfloat16) with fp32 master weights, gradients and Adam state.

The last line printed is `tokens/s <value>`.
"""

import argparse
import dataclasses
import os
import platform
import resource
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import gpt2_reference as ref  # noqa: E402
import llama_reference as lref  # noqa: E402

PRESETS = {**ref.PRESETS, **lref.PRESETS}


def parse_args():
    ap = argparse.ArgumentParser(description="PyTorch CPU GPT-2 / Llama training throughput")
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(PRESETS),
                    help="preset; the size flags below override its fields")
    ap.add_argument("--n-layer", type=int)
    ap.add_argument("--n-head", type=int)
    ap.add_argument("--n-kv-head", type=int, help="Llama only")
    ap.add_argument("--d-model", type=int)
    ap.add_argument("--d-ff", type=int, help="Llama only")
    ap.add_argument("--n-ctx", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--batch", type=int, default=4, help="micro-batch size B")
    ap.add_argument("--seq", type=int, default=64, help="sequence length T")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


def build_config(args):
    """(the reference module, its config) for --model and the size flags."""
    base = PRESETS[args.model]
    mod = lref if isinstance(base, lref.LlamaConfig) else ref
    names = ["n_layer", "n_head", "d_model", "n_ctx", "vocab"]
    if mod is lref:
        names += ["n_kv_head", "d_ff"]
    elif args.n_kv_head is not None or args.d_ff is not None:
        sys.exit("torch_train: --n-kv-head and --d-ff are for Llama presets")
    fields = {f: getattr(args, f) for f in names if getattr(args, f) is not None}
    return mod, dataclasses.replace(base, **fields)


def main():
    args = parse_args()
    mod, cfg = build_config(args)
    if args.seq > cfg.n_ctx:
        sys.exit(f"torch_train: --seq {args.seq} exceeds n_ctx {cfg.n_ctx}")
    if args.steps < 1:
        sys.exit("torch_train: --steps must be at least 1")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    model = mod.GPT2(cfg, dtype=torch.float32) if mod is ref else mod.Llama(cfg, dtype=torch.float32)
    names = mod.param_names(cfg)
    params = dict(model.named_parameters())
    is_norm = ref.is_layernorm if mod is ref else lref.is_norm
    with torch.no_grad():  # GPT-2's init; the speed does not depend on it
        for n, p in params.items():
            if is_norm(n):
                p.fill_(1.0 if n.endswith(".weight") else 0.0)
            elif n.endswith(".bias"):
                p.zero_()
            else:
                p.normal_(0.0, 0.02)
    decay = [params[n] for n in names if mod.is_decayed(n)]
    no_decay = [params[n] for n in names if not mod.is_decayed(n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, foreach=True)

    total = args.warmup + args.steps
    gen = torch.Generator().manual_seed(args.seed + 1)
    data = torch.randint(0, cfg.vocab, (total, args.batch, args.seq + 1), generator=gen)

    nparams = sum(p.numel() for p in model.parameters())
    print(f"torch {torch.__version__} on {platform.machine()}, {torch.get_num_threads()} threads; "
          f"{cfg}; {nparams / 1e6:.1f}M parameters; B={args.batch} T={args.seq} "
          f"precision={args.precision}")

    def step(tokens):
        x, y = tokens[:, :-1], tokens[:, 1:]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss, _ = model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        return loss.item(), norm.item()

    timed = []
    for s in range(total):
        t0 = time.perf_counter()
        loss, norm = step(data[s])
        dt = time.perf_counter() - t0
        kind = "warmup" if s < args.warmup else "step"
        if s >= args.warmup:
            timed.append(dt)
        print(f"{kind} {s}: {dt * 1e3:.1f} ms  loss {loss:.4f}  grad_norm {norm:.4f}", flush=True)

    tokens = args.batch * args.seq * len(timed)
    elapsed = sum(timed)
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"step time ms: mean {elapsed / len(timed) * 1e3:.1f}  min {min(timed) * 1e3:.1f}  "
          f"max {max(timed) * 1e3:.1f}  ({len(timed)} timed steps); peak RSS {rss_mib:.0f} MiB")
    # On a shared, noisy machine the fastest step is the least disturbed one.
    print(f"tokens/s (fastest step) {args.batch * args.seq / min(timed):.2f}")
    print(f"tokens/s {tokens / elapsed:.2f}")


if __name__ == "__main__":
    main()
