#!/usr/bin/python3
"""make_fixtures.py - write the numerical fixtures the C tests compare against.

    /usr/bin/python3 tools/make_fixtures.py [--out tests/fixtures]

Writes (see tests/fixtures/README.md for the contents and hyperparameters):
    gpt_small_init.safetensors      F32 initial weights, Hugging Face names
    gpt_small_ref_fp32.safetensors  float64 forward/backward/3 AdamW steps
    gpt_small_ref_bf16.safetensors  the same with bf16-rounded compute weights
    gpt_small_hf_bf16.safetensors   the init as a Hub-style BF16 checkpoint
    gpt_small_f16.safetensors       the init as F16

Deterministic: fixed seeds, one thread, so two runs give byte-identical files.
Before writing anything it checks the reference against itself: GPT2 against
an op-by-op implementation of the spec, autograd against finite differences,
torch.optim.AdamW against the written-out AdamW formula, and torch's bf16
rounding against a bit-level round-to-nearest-even.
"""

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402
import llama_reference as lref  # noqa: E402

CFG = ref.GPT2Config(n_layer=2, n_head=4, d_model=48, n_ctx=32, vocab=101)
# Llama: grouped-query attention (2 query heads per key/value head), an
# untied head, Llama 3.1's rope scaling with an original context (32) at
# which the head's six frequencies fall in all three of its bands (one
# kept, one blended, four slowed by the factor).
LLAMA_CFG = lref.LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, d_model=48, d_ff=80, n_ctx=32, vocab=101,
                             tied=False, rope_theta=10000.0, norm_eps=1e-5,
                             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
# and the other corners: multi-query attention, the head tied to the embedding,
# the default frequencies at Llama 3's theta
LLAMA_TIED_CFG = lref.LlamaConfig(n_layer=2, n_head=4, n_kv_head=1, d_model=48, d_ff=64, n_ctx=32, vocab=101,
                                  tied=True, rope_theta=500000.0, norm_eps=1e-6)
B, T = 2, 16
MICRO_BATCHES = 2
STEPS = 3
SEED = 1234            # init; the tokens come from SEED + 1
MAX_LR, MIN_LR, WARMUP, TOTAL_STEPS = 1e-3, 1e-4, 2, 4
BETA1, BETA2, EPS, WEIGHT_DECAY = 0.9, 0.95, 1e-8, 0.1
CLIP = 0.5             # below every step's gradient norm: clipping always triggers

F64 = torch.float64


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Family:
    """One architecture's fixtures: its reference module and configuration, the
    prefix of its files, and what its self-checks look at."""

    def __init__(self, prefix, cfg, module, model_class, fd_names, shape_meta, extra_grad_check=None):
        self.prefix, self.cfg, self.module, self.model_class = prefix, cfg, module, model_class
        self.fd_names, self.shape_meta, self.extra_grad_check = fd_names, shape_meta, extra_grad_check
        self.names = module.param_names(cfg)

    def new_model(self):
        return self.model_class(self.cfg, dtype=F64)

    def load_state(self, model, weights):
        self.module.load_state(model, weights)


def gpt2_wpe_check(grads):
    # Positions T..n_ctx-1 are never used: their wpe gradient is exactly zero.
    check(bool((grads["wpe.weight"][T:] == 0).all()), "wpe rows >= T have a gradient")
    check(bool((grads["wpe.weight"][:T].abs().sum(1) > 0).all()), "a wpe row < T has no gradient")


GPT2 = Family("gpt_small", CFG, ref, ref.GPT2,
              ["wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias",
               "h.0.attn.c_attn.weight", "h.0.attn.c_attn.bias", "h.1.attn.c_proj.weight",
               "h.0.mlp.c_fc.bias", "h.1.mlp.c_proj.weight", "h.1.mlp.c_proj.bias",
               "ln_f.weight", "ln_f.bias"],
              {"n_layer": str(CFG.n_layer), "n_head": str(CFG.n_head), "d_model": str(CFG.d_model),
               "n_ctx": str(CFG.n_ctx), "vocab": str(CFG.vocab)},
              gpt2_wpe_check)


def llama_family(prefix, cfg):
    meta = {"arch": "llama", "n_layer": str(cfg.n_layer), "n_head": str(cfg.n_head),
            "n_kv_head": str(cfg.n_kv_head), "d_model": str(cfg.d_model), "d_ff": str(cfg.d_ff),
            "n_ctx": str(cfg.n_ctx), "vocab": str(cfg.vocab), "tied": str(int(cfg.tied)),
            "rope_theta": repr(cfg.rope_theta), "norm_eps": repr(cfg.norm_eps)}
    if cfg.rope_scaling:
        meta["rope_scaling"] = json.dumps(cfg.rope_scaling, sort_keys=True)
    fd = ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
          "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
          "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight",
          "model.layers.0.post_attention_layernorm.weight", "model.layers.0.mlp.gate_proj.weight",
          "model.layers.1.mlp.up_proj.weight", "model.layers.1.mlp.down_proj.weight", "model.norm.weight"]
    if not cfg.tied:
        fd.append("lm_head.weight")
    return Family(prefix, cfg, lref, lref.Llama, fd, meta)


def llama_config_json(cfg):
    """The config.json transformers' LlamaConfig reads for cfg."""
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": cfg.d_model,
            "intermediate_size": cfg.d_ff, "num_hidden_layers": cfg.n_layer, "num_attention_heads": cfg.n_head,
            "num_key_value_heads": cfg.n_kv_head, "vocab_size": cfg.vocab, "max_position_embeddings": cfg.n_ctx,
            "rms_norm_eps": cfg.norm_eps, "rope_theta": cfg.rope_theta, "rope_scaling": cfg.rope_scaling,
            "tie_word_embeddings": cfg.tied, "hidden_act": "silu", "attention_bias": False, "mlp_bias": False,
            "torch_dtype": "float32"}


LLAMA = llama_family("llama_small", LLAMA_CFG)
LLAMA_TIED = llama_family("llama_tied", LLAMA_TIED_CFG)


def metadata(fam, precision):
    meta = dict(fam.shape_meta)
    meta.update({
        "B": str(B), "T": str(T),
        "micro_batches": str(MICRO_BATCHES), "steps": str(STEPS),
        "max_lr": repr(MAX_LR), "min_lr": repr(MIN_LR), "warmup": str(WARMUP),
        "total_steps": str(TOTAL_STEPS), "beta1": repr(BETA1), "beta2": repr(BETA2),
        "eps": repr(EPS), "weight_decay": repr(WEIGHT_DECAY), "clip": repr(CLIP),
        "seed": str(SEED), "precision": precision,
        "clip_formula": "g *= min(1, clip / (grad_norm + 1e-6))",
    })
    if fam is GPT2:
        meta["ln_eps"] = repr(ref.LN_EPS)
    return meta


def forward_backward(fam, model, weights, inputs, targets, loss_scale=1.0, zero=True):
    """Load weights into model, run forward and backward of loss * loss_scale.
    Returns (loss, logits); gradients accumulate in model's .grad."""
    fam.load_state(model, weights)
    if zero:
        model.zero_grad(set_to_none=True)
    loss, logits = model(inputs, targets)
    (loss * loss_scale).backward()
    return loss.detach(), logits.detach()


def grads_of(model):
    return {n: p.grad.detach().clone() for n, p in model.named_parameters()}


# ---------------------------------------------------------------------------
# Self-checks of the reference
# ---------------------------------------------------------------------------

def check_bf16_rounding(init):
    for name, w in init.items():
        torch_way = w.to(torch.bfloat16).to(torch.float32)
        check(torch.equal(torch_way, ref.bf16_round_bits(w)), f"bf16 rounding differs on {name}")
    # Ties: 1 + 2^-8 lies halfway between two bf16 values; even mantissa wins.
    ties = torch.tensor([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8], dtype=torch.float32)
    check(torch.equal(ties.to(torch.bfloat16).float(),
                      torch.tensor([1.0, 1.0 + 4 * 2.0 ** -8])), "bf16 ties not to even")


def check_against_spec(fam, w64, inputs, targets):
    model = fam.new_model()
    fam.load_state(model, w64)
    with torch.no_grad():
        loss, logits = model(inputs, targets)
        naive = fam.module.naive_forward(w64, inputs, fam.cfg)
        nloss = ref.naive_loss(naive, targets)
    err = (logits - naive).abs().max().item()
    check(err < 1e-12, f"{fam.prefix}: the model and the op-by-op spec disagree: max |dlogits| = {err:g}")
    check(abs(loss.item() - nloss.item()) < 1e-12, "cross-entropy disagrees with log-sum-exp")
    probs = torch.softmax(logits, dim=-1).sum(-1)
    check((probs - 1).abs().max().item() < 1e-12, "softmax rows do not sum to 1")
    # Small weights: the first loss is close to uniform guessing, ln(V).
    check(abs(loss.item() - math.log(fam.cfg.vocab)) < 0.5, f"initial loss {loss.item()} far from ln(V)")
    return err


def check_finite_differences(fam, w64, grads, inputs, targets):
    """Central differences on the largest and one random entry of several tensors."""
    model = fam.new_model()
    g = torch.Generator().manual_seed(SEED + 2)
    h, worst, count = 1e-5, 0.0, 0
    for name in fam.fd_names:
        flat_grad = grads[name].reshape(-1)
        picks = [int(flat_grad.abs().argmax()),
                 int(torch.randint(0, flat_grad.numel(), (1,), generator=g))]
        for k in picks:
            def loss_at(delta):
                w = dict(w64)
                w[name] = w64[name].clone()
                w[name].view(-1)[k] += delta
                fam.load_state(model, w)
                with torch.no_grad():
                    return model(inputs, targets)[0].item()
            fd = (loss_at(h) - loss_at(-h)) / (2 * h)
            an = flat_grad[k].item()
            err = abs(fd - an)
            check(err <= 1e-8 + 1e-5 * abs(an),
                  f"finite difference: {name}[{k}] autograd {an:.10g} vs fd {fd:.10g}")
            worst, count = max(worst, err), count + 1
    if fam.extra_grad_check:
        fam.extra_grad_check(grads)
    return worst, count


# ---------------------------------------------------------------------------
# The reference run
# ---------------------------------------------------------------------------

def run_reference(fam, init, tokens, precision):
    """Step-0 forward/backward plus STEPS training steps, float64 master.

    precision "fp32": compute weights = the master itself.
    precision "bf16": compute weights = bf16 rounding of the master (via fp32),
                      gradients taken w.r.t. them and applied to the master.
    """
    compute = (lambda w: w) if precision == "fp32" else ref.bf16_round
    names = fam.names
    is_decayed = fam.module.is_decayed
    master = {n: init[n].to(F64) for n in names}
    model = fam.new_model()
    out = {"tokens": tokens.to(torch.int32)}

    # Step 0, micro-batch 0 alone, at the initial weights.
    inputs, targets = tokens[0, 0, :, :-1], tokens[0, 0, :, 1:]
    loss, logits = forward_backward(fam, model, {n: compute(w) for n, w in master.items()},
                                    inputs, targets)
    out["logits"], out["loss"] = logits, loss.reshape(1)
    for n, gr in grads_of(model).items():
        out["grad." + n] = gr

    # Training: torch.optim.AdamW on the master, a hand-written AdamW beside it.
    params = {n: master[n].clone() for n in names}
    opt = torch.optim.AdamW(
        [{"params": [params[n] for n in names if is_decayed(n)], "weight_decay": WEIGHT_DECAY},
         {"params": [params[n] for n in names if not is_decayed(n)], "weight_decay": 0.0}],
        lr=MAX_LR, betas=(BETA1, BETA2), eps=EPS, foreach=False)
    manual = {n: master[n].clone() for n in names}
    mom = {n: torch.zeros_like(master[n]) for n in names}
    vel = {n: torch.zeros_like(master[n]) for n in names}

    step_loss, grad_norm, lrs, scales = [], [], [], []
    for s in range(STEPS):
        weights = {n: compute(params[n]) for n in names}
        if precision == "bf16":
            for n, w in weights.items():
                check(torch.equal(w, w.to(torch.bfloat16).to(F64)), f"{n} not bf16-exact")
        model.zero_grad(set_to_none=True)
        losses = []
        for mb in range(MICRO_BATCHES):
            x, y = tokens[s, mb, :, :-1], tokens[s, mb, :, 1:]
            loss, _ = forward_backward(fam, model, weights, x, y, 1.0 / MICRO_BATCHES, zero=False)
            losses.append(loss.item())
        grads = grads_of(model)
        norm = ref.global_grad_norm(grads.values())
        check(norm > CLIP, f"step {s}: grad norm {norm} <= clip {CLIP}: clipping would not trigger")
        scale = ref.clip_scale(norm, CLIP)
        lr = ref.lr_at(s, MAX_LR, MIN_LR, WARMUP, TOTAL_STEPS)
        for group in opt.param_groups:
            group["lr"] = lr
        for n in names:
            params[n].grad = grads[n] * scale
            ref.adamw_step_manual(manual[n], grads[n] * scale, mom[n], vel[n], s + 1, lr,
                                  BETA1, BETA2, EPS, WEIGHT_DECAY if is_decayed(n) else 0.0)
        opt.step()
        for n in names:
            check(torch.equal(params[n], manual[n]), f"step {s}: torch AdamW != written-out AdamW on {n}")
        step_loss.append(sum(losses) / MICRO_BATCHES)
        grad_norm.append(norm)
        lrs.append(lr)
        scales.append(scale)

    out["step_loss"] = torch.tensor(step_loss, dtype=F64)
    out["grad_norm"] = torch.tensor(grad_norm, dtype=F64)
    out["lr"] = torch.tensor(lrs, dtype=F64)
    for n in names:
        out["step3." + n] = params[n].detach().clone()
    return out, scales


def write_checked(path, tensors, meta):
    ref.save_safetensors(path, tensors, meta)
    back, back_meta = ref.load_safetensors(path)
    check(set(back) == set(tensors) and back_meta == (meta or {}), f"{path}: round trip lost keys")
    for n, t in tensors.items():
        check(back[n].dtype == t.dtype and torch.equal(back[n], t), f"{path}: round trip changed {n}")
    return os.path.getsize(path)


def family_fixtures(fam, args, summary, sizes):
    """Self-checks, then the init and the fp32 and bf16 references of one family."""
    init = fam.module.init_weights_f32(fam.cfg, SEED)
    tokens = torch.randint(0, fam.cfg.vocab, (STEPS, MICRO_BATCHES, B, T + 1),
                           generator=torch.Generator().manual_seed(SEED + 1), dtype=torch.int64)

    # Self-checks, in float64 on the initial weights (and their bf16 rounding).
    check_bf16_rounding(init)
    x0, y0 = tokens[0, 0, :, :-1], tokens[0, 0, :, 1:]
    for label, w64 in (("fp32", {n: t.to(F64) for n, t in init.items()}),
                       ("bf16", {n: ref.bf16_round(t.to(F64)) for n, t in init.items()})):
        spec_err = check_against_spec(fam, w64, x0, y0)
        model = fam.new_model()
        forward_backward(fam, model, w64, x0, y0)
        fd_err, fd_n = check_finite_differences(fam, w64, grads_of(model), x0, y0)
        summary.append(f"  check {fam.prefix} {label}: model vs op-by-op spec max|dlogits| {spec_err:.2e}; "
                       f"finite differences on {fd_n} entries, max |err| {fd_err:.2e}")

    path = lambda name: os.path.join(args.out, name)  # noqa: E731
    init_meta = {k: v for k, v in metadata(fam, "fp32").items()
                 if k in fam.shape_meta or k in ("seed", "ln_eps")}
    init_meta["init"] = ("randn float32 per tensor in parameter order: 0.02*z, "
                         + ("LayerNorm weights 1+0.1*z" if fam is GPT2 else "RMSNorm weights 1+0.1*z"))
    if fam is GPT2:
        sizes[fam.prefix + "_init"] = write_checked(path(fam.prefix + "_init.safetensors"), init, init_meta)
    else:
        # a Hugging Face model directory, as the Hub ships one
        os.makedirs(path(fam.prefix), exist_ok=True)
        init_meta["format"] = "pt"
        sizes[fam.prefix + "/model"] = write_checked(path(fam.prefix + "/model.safetensors"), init, init_meta)
        with open(path(fam.prefix + "/config.json"), "w") as f:
            json.dump(llama_config_json(fam.cfg), f, indent=2, sort_keys=True)
            f.write("\n")

    for precision in ("fp32", "bf16"):
        out, scales = run_reference(fam, init, tokens, precision)
        name = f"{fam.prefix}_ref_{precision}"
        sizes[name] = write_checked(path(name + ".safetensors"), out, metadata(fam, precision))
        gn = out["grad_norm"].tolist()
        summary.append(
            f"  {fam.prefix} {precision}: loss(step0,mb0) {out['loss'].item():.10f}  "
            f"step_loss {', '.join(f'{v:.10f}' for v in out['step_loss'].tolist())}\n"
            f"        grad_norm {', '.join(f'{v:.6f}' for v in gn)} > clip {CLIP}: "
            f"clipped on every step (scales {', '.join(f'{v:.4f}' for v in scales)})\n"
            f"        lr {', '.join(f'{v:g}' for v in out['lr'].tolist())}")
    summary.append(f"  {fam.prefix}: {fam.cfg}, {sum(t.numel() for t in init.values())} parameters")
    return init


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)  # same summation order on every run
    torch.use_deterministic_algorithms(True)

    expected_lr = [5e-4, 1e-3, 5.5e-4]
    for s, want in enumerate(expected_lr):
        check(abs(ref.lr_at(s, MAX_LR, MIN_LR, WARMUP, TOTAL_STEPS) - want) < 1e-15, "lr schedule")

    os.makedirs(args.out, exist_ok=True)
    path = lambda name: os.path.join(args.out, name)  # noqa: E731
    summary, sizes = [], {}
    init = family_fixtures(GPT2, args, summary, sizes)

    hf = {"transformer." + n: t.to(torch.bfloat16) for n, t in init.items()}
    for i in range(CFG.n_layer):
        mask = torch.ones(CFG.n_ctx, CFG.n_ctx).tril().view(1, 1, CFG.n_ctx, CFG.n_ctx)
        hf[f"transformer.h.{i}.attn.bias"] = mask.to(torch.bfloat16)
        hf[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4, dtype=torch.bfloat16)
    hf["lm_head.weight"] = init["wte.weight"].to(torch.bfloat16)
    sizes["gpt_small_hf_bf16"] = write_checked(path("gpt_small_hf_bf16.safetensors"), hf,
                                               {"format": "pt"})
    f16 = {n: t.to(torch.float16) for n, t in init.items()}
    sizes["gpt_small_f16"] = write_checked(path("gpt_small_f16.safetensors"), f16, {"format": "pt"})

    for fam in (LLAMA, LLAMA_TIED):
        family_fixtures(fam, args, summary, sizes)

    print(f"make_fixtures: B={B} T={T}")
    print("\n".join(summary))
    for name, size in sizes.items():
        print(f"  wrote {name}.safetensors ({size} bytes)")


if __name__ == "__main__":
    main()
