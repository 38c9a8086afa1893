#!/usr/bin/python3
"""llama_kernels_reference.py - the float64 PyTorch reference for the Llama
family's kernels of the compute backend (strata/backend.h), and the fixture
the C tests compare against.

    /usr/bin/python3 tools/llama_kernels_reference.py [--out tests/fixtures]

Writes tests/fixtures/llama_kernels_ref.safetensors: for each op, its inputs
(F32, exactly what the C test feeds the kernel), and its outputs and input
gradients computed in float64 from those inputs (F64). The loss whose
gradients are stored is sum(out * dout) with a random dout (stored, F32).

The ops are written after Hugging Face's modeling_llama.py (no transformers
library here; plain torch 1.13), in float64:
    rmsnorm    LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * weight
    linear     nn.Linear without bias: x @ w^T, w [out, in]
    rope       LlamaRotaryEmbedding + rotate_half + apply_rotary_pos_emb,
               on the q and k parts of fused q|k|v rows; v untouched
    attention  repeat_kv + eager causal attention (GQA: NKV < NH, MQA: NKV = 1)
    swiglu     LlamaMLP's act_fn(gate) * up with act_fn = silu, on the fused
               gate|up projection's output
Where HF computes in float32 whatever the model's dtype, so does this
reference: the rotary angles. LlamaRotaryEmbedding builds inv_freq and
freqs = position.float() * inv_freq in float32 (autocast off) and returns
cos and sin cast to the model's dtype; the fixture keeps those float32 cos
and sin tables too, so the C test can hold its angles to HF's bits. (HF's
RMSNorm and softmax upcast to float32 only from lower precisions; here they
run in float64.)

Deterministic (fixed generators, one thread): a rerun writes a
byte-identical file. Before writing, it checks itself and fails loudly:
autograd against central finite differences for every op's inputs, the HF
formulations against op-by-op spellings (explicit RMSNorm, per-head
attention loops with kv head h // (NH / NKV), the rotation as an explicit
2x2 rotation per pair), the rotation's gradient being the rotation by minus
the angle (which undoes it only up to cos^2 + sin^2 of float32 values, 1
within 2^-22), and that the fixture's float32 inv_freq equals the correctly
rounded one the C kernel computes (so its angles are HF's to the bit).
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_reference as ref  # noqa: E402  (save_safetensors / load_safetensors)

F64, F32 = torch.float64, torch.float32
SEED = 16

# Shapes: odd, small, T past one attention block of 64 rows.
RMS = dict(N=7, C=48, eps=1e-6)
LIN = dict(N=7, IC=48, OC=33)
ROPE = dict(B=2, T=5, NH=6, NKV=2, hs=16)
ROPE_CASES = [("a", 10000.0, 0), ("b", 500000.0, 4093)]          # (name, theta, pos0)
ROPE_TABLES = [("h128_t10000", 128, 10000.0, 0), ("h128_t500000", 128, 500000.0, 8185)]  # Llama 2 / 3 heads
ROPE_TABLE_T = 16
ATT_CASES = [("gqa", dict(B=2, T=67, NH=6, NKV=2, hs=16)), ("mqa", dict(B=2, T=13, NH=4, NKV=1, hs=16))]
SWIGLU = dict(N=7, F=43)   # F not a multiple of 8: the kernel's scalar tail too


def check(cond, what):
    if not cond:
        raise AssertionError(what)


# ---------------------------------------------------------------------------
# The ops, after modeling_llama.py
# ---------------------------------------------------------------------------

def llama_rmsnorm(x, weight, eps):
    """LlamaRMSNorm.forward, in x's dtype."""
    variance = x.pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    return weight * x


def rope_inv_freq(dim, base):
    """LlamaRotaryEmbedding's (default rope type) inv_freq: float32."""
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rope_cos_sin(dim, base, position_ids):
    """LlamaRotaryEmbedding.forward: float32 angles, cos and sin float32.
    position_ids [B, T] int64; returns cos, sin [B, T, dim]."""
    inv_freq = rope_inv_freq(dim, base)
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    """[B, NKV, T, hs] -> [B, NKV * n_rep, T, hs]: kv head j serves query heads j*n_rep .. j*n_rep + n_rep - 1."""
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def split_qkv(qkv, NH, NKV, hs):
    """Fused rows [B, T, (NH + 2 NKV) hs] -> q [B, NH, T, hs], k, v [B, NKV, T, hs] (HF's view + transpose)."""
    B, T, _ = qkv.shape
    q = qkv[..., : NH * hs].view(B, T, NH, hs).transpose(1, 2)
    k = qkv[..., NH * hs: (NH + NKV) * hs].view(B, T, NKV, hs).transpose(1, 2)
    v = qkv[..., (NH + NKV) * hs:].view(B, T, NKV, hs).transpose(1, 2)
    return q, k, v


def rope_rows(x, B, T, NH, NKV, hs, theta, pos0):
    """The rotary embedding on the q and k parts of fused rows x [B, T, W]; v unchanged."""
    position_ids = (pos0 + torch.arange(T, dtype=torch.int64))[None, :].expand(B, T)
    cos, sin = rope_cos_sin(hs, theta, position_ids)
    q, k, v = split_qkv(x, NH, NKV, hs)
    q, k = apply_rotary_pos_emb(q, k, cos.to(x.dtype), sin.to(x.dtype))
    merge = lambda t: t.transpose(1, 2).reshape(B, T, -1)  # noqa: E731
    return torch.cat((merge(q), merge(k), merge(v)), dim=-1)


def eager_causal_attention(qkv, NH, NKV, hs):
    """repeat_kv + eager_attention_forward with a causal mask; out [B, T, NH hs] (before o_proj)."""
    B, T, _ = qkv.shape
    q, k, v = split_qkv(qkv, NH, NKV, hs)
    k, v = repeat_kv(k, NH // NKV), repeat_kv(v, NH // NKV)
    scaling = hs ** -0.5
    attn_weights = torch.matmul(q, k.transpose(2, 3)) * scaling
    mask = torch.full((T, T), float("-inf"), dtype=qkv.dtype).triu(1)
    attn_weights = F.softmax(attn_weights + mask, dim=-1, dtype=qkv.dtype)
    attn_output = torch.matmul(attn_weights, v)
    return attn_output.transpose(1, 2).reshape(B, T, NH * hs)


def swiglu(gu, F_):
    """LlamaMLP's act_fn(gate_proj(x)) * up_proj(x) on the fused gate|up output."""
    return F.silu(gu[..., :F_]) * gu[..., F_:]


# ---------------------------------------------------------------------------
# Op-by-op spellings, for checking the above only
# ---------------------------------------------------------------------------

def spec_rmsnorm(x, w, eps):
    out = torch.empty_like(x)
    for n in range(x.shape[0]):
        r = 1.0 / math.sqrt(sum(float(v) ** 2 for v in x[n]) / x.shape[1] + eps)
        out[n] = x[n] * r * w
    return out


def spec_rope(x, B, T, NH, NKV, hs, theta, pos0, sign=1.0):
    """The rotation of each pair (i, i + hs/2) by the angle (sign -1: by minus the angle, the transpose)."""
    half, out = hs // 2, x.clone()
    inv = rope_inv_freq(hs, theta)
    for b in range(B):
        for t in range(T):
            ang = (torch.tensor(float(pos0 + t), dtype=F32) * inv)  # float32 product, as HF
            c, s = ang.cos().to(x.dtype), sign * ang.sin().to(x.dtype)
            for h in range(NH + NKV):
                lo, hi = x[b, t, h * hs: h * hs + half], x[b, t, h * hs + half: (h + 1) * hs]
                out[b, t, h * hs: h * hs + half] = lo * c - hi * s
                out[b, t, h * hs + half: (h + 1) * hs] = hi * c + lo * s
    return out


def spec_attention(qkv, NH, NKV, hs):
    B, T, _ = qkv.shape
    C, group = NH * hs, NH // NKV
    out = torch.zeros(B, T, C, dtype=qkv.dtype)
    for b in range(B):
        for h in range(NH):
            g = h // group
            q = qkv[b, :, h * hs:(h + 1) * hs]
            k = qkv[b, :, C + g * hs: C + (g + 1) * hs]
            v = qkv[b, :, C + (NKV + g) * hs: C + (NKV + g + 1) * hs]
            for i in range(T):
                s = (k[: i + 1] @ q[i]) / math.sqrt(hs)
                p = torch.exp(s - s.max())
                out[b, i, h * hs:(h + 1) * hs] = (p / p.sum()) @ v[: i + 1]
    return out


# ---------------------------------------------------------------------------
# Gradients and their check
# ---------------------------------------------------------------------------

def forward_backward(fn, inputs, dout):
    """out = fn(*inputs) in float64 and the gradients of sum(out * dout) w.r.t. each input."""
    xs = [t.detach().to(F64).requires_grad_(True) for t in inputs]
    out = fn(*xs)
    (out * dout.to(F64)).sum().backward()
    return out.detach(), [x.grad.detach() for x in xs]


def check_finite_differences(name, fn, inputs, dout, grads, gen, picks=4):
    """Central differences of sum(fn(*inputs) * dout) at the largest and a few random entries of each input."""
    worst = 0.0
    base = [t.detach().to(F64) for t in inputs]
    d = dout.to(F64)
    h = 1e-6
    for j, g in enumerate(grads):
        flat = g.reshape(-1)
        ks = [int(flat.abs().argmax())] + [int(torch.randint(0, flat.numel(), (1,), generator=gen)) for _ in range(picks)]
        for k in ks:
            def loss_at(delta):
                xs = [t.clone() for t in base]
                xs[j].view(-1)[k] += delta
                with torch.no_grad():
                    return float((fn(*xs) * d).sum())
            fd = (loss_at(h) - loss_at(-h)) / (2 * h)
            an = float(flat[k])
            err = abs(fd - an)
            check(err <= 1e-7 + 1e-6 * abs(an), f"{name}: input {j}[{k}] autograd {an:.12g} vs finite difference {fd:.12g}")
            worst = max(worst, err)
    return worst


# ---------------------------------------------------------------------------
# The fixture
# ---------------------------------------------------------------------------

def randn(gen, *shape, scale=1.0):
    return (scale * torch.randn(*shape, generator=gen, dtype=F32)).to(F32)


def correctly_rounded_inv_freq(dim, base):
    """What the C kernel computes: 1.0f / (float)pow(theta, (float)(2i) / dim), pow in double."""
    e = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
    p = torch.tensor([math.pow(float(torch.tensor(base, dtype=F32)), float(v)) for v in e], dtype=F64).to(F32)
    return 1.0 / p


def build(gen, fd_gen, out, meta, summary):
    # RMSNorm: rows of very different scales, one small enough for eps to matter.
    N, C, eps = RMS["N"], RMS["C"], RMS["eps"]
    scales = torch.tensor([1.0, 1e-3, 10.0, 0.5, 3.0, 1e-2, 2.0], dtype=F32)[:, None]
    x, w, dout = randn(gen, N, C) * scales, 1.0 + randn(gen, C, scale=0.1), randn(gen, N, C)
    fn = lambda x_, w_: llama_rmsnorm(x_, w_, eps)  # noqa: E731
    y, (dx, dw) = forward_backward(fn, [x, w], dout)
    check((y - spec_rmsnorm(x.to(F64), w.to(F64), eps)).abs().max() < 1e-12, "rmsnorm: HF and the spec disagree")
    fd = check_finite_differences("rmsnorm", fn, [x, w], dout, [dx, dw], fd_gen)
    rstd = torch.rsqrt(x.to(F64).pow(2).mean(-1) + eps)
    out.update({"rmsnorm.x": x, "rmsnorm.w": w, "rmsnorm.dout": dout, "rmsnorm.out": y, "rmsnorm.rstd": rstd,
                "rmsnorm.dx": dx, "rmsnorm.dw": dw})
    meta.update({"rmsnorm.N": str(N), "rmsnorm.C": str(C), "rmsnorm.eps": repr(eps)})
    summary.append(f"  rmsnorm   N={N} C={C} eps={eps}: fd max |err| {fd:.1e}")

    # Linear, nn.Linear's [out, in] weight.
    N, IC, OC = LIN["N"], LIN["IC"], LIN["OC"]
    x, w, dout = randn(gen, N, IC), randn(gen, OC, IC, scale=0.2), randn(gen, N, OC)
    fn = lambda x_, w_: F.linear(x_, w_)  # noqa: E731
    y, (dx, dw) = forward_backward(fn, [x, w], dout)
    check((y - x.to(F64) @ w.to(F64).T).abs().max() < 1e-12, "linear: F.linear is not x @ w^T")
    fd = check_finite_differences("linear", fn, [x, w], dout, [dx, dw], fd_gen)
    out.update({"linear.x": x, "linear.w": w, "linear.dout": dout, "linear.out": y, "linear.dx": dx, "linear.dw": dw})
    meta.update({"linear.N": str(N), "linear.IC": str(IC), "linear.OC": str(OC)})
    summary.append(f"  linear    N={N} IC={IC} OC={OC}: fd max |err| {fd:.1e}")

    # Rotary embeddings on fused q|k|v rows.
    B, T, NH, NKV, hs = ROPE["B"], ROPE["T"], ROPE["NH"], ROPE["NKV"], ROPE["hs"]
    W = (NH + 2 * NKV) * hs
    meta.update({"rope.B": str(B), "rope.T": str(T), "rope.NH": str(NH), "rope.NKV": str(NKV), "rope.hs": str(hs)})
    for name, theta, pos0 in ROPE_CASES:
        check(torch.equal(rope_inv_freq(hs, theta), correctly_rounded_inv_freq(hs, theta)),
              f"rope {name}: torch's inv_freq is not the correctly rounded one; the C angles would differ")
        x, dout = randn(gen, B, T, W), randn(gen, B, T, W)
        fn = lambda x_: rope_rows(x_, B, T, NH, NKV, hs, theta, pos0)  # noqa: E731
        y, (dx,) = forward_backward(fn, [x], dout)
        check((y - spec_rope(x.to(F64), B, T, NH, NKV, hs, theta, pos0)).abs().max() < 1e-12,
              f"rope {name}: rotate_half and the explicit rotation disagree")
        # The gradient is the transpose, the rotation by minus the angle; it
        # undoes the rotation up to cos^2 + sin^2 of float32 values, 1 within 2^-22.
        check((dx - spec_rope(dout.to(F64), B, T, NH, NKV, hs, theta, pos0, -1.0)).abs().max() < 1e-12,
              f"rope {name}: the gradient is not the rotation by minus the angle")
        back = spec_rope(y, B, T, NH, NKV, hs, theta, pos0, -1.0)
        check((back - x.to(F64)).abs().max() <= 2.0 ** -21 * x.abs().max(), f"rope {name}: the transpose does not undo it")
        fd = check_finite_differences(f"rope {name}", fn, [x], dout, [dx], fd_gen)
        pos = (pos0 + torch.arange(T, dtype=torch.int64))[None, :]
        cos, sin = rope_cos_sin(hs, theta, pos)
        out.update({f"rope.{name}.x": x, f"rope.{name}.dout": dout, f"rope.{name}.out": y, f"rope.{name}.dx": dx,
                    f"rope.{name}.cos": cos[0, :, : hs // 2].contiguous(),
                    f"rope.{name}.sin": sin[0, :, : hs // 2].contiguous()})
        meta.update({f"rope.{name}.theta": repr(theta), f"rope.{name}.pos0": str(pos0)})
        summary.append(f"  rope {name}    B={B} T={T} NH={NH} NKV={NKV} hs={hs} theta={theta:g} pos0={pos0}: "
                       f"fd max |err| {fd:.1e}")
    for name, dim, theta, pos0 in ROPE_TABLES:
        check(torch.equal(rope_inv_freq(dim, theta), correctly_rounded_inv_freq(dim, theta)),
              f"rope table {name}: torch's inv_freq is not the correctly rounded one")
        pos = (pos0 + torch.arange(ROPE_TABLE_T, dtype=torch.int64))[None, :]
        cos, sin = rope_cos_sin(dim, theta, pos)
        out.update({f"rope_table.{name}.cos": cos[0, :, : dim // 2].contiguous(),
                    f"rope_table.{name}.sin": sin[0, :, : dim // 2].contiguous()})
        meta.update({f"rope_table.{name}.hs": str(dim), f"rope_table.{name}.theta": repr(theta),
                     f"rope_table.{name}.pos0": str(pos0), f"rope_table.{name}.T": str(ROPE_TABLE_T)})

    # Grouped-query and multi-query causal attention.
    for name, s in ATT_CASES:
        B, T, NH, NKV, hs = s["B"], s["T"], s["NH"], s["NKV"], s["hs"]
        qkv, dout = randn(gen, B, T, (NH + 2 * NKV) * hs), randn(gen, B, T, NH * hs)
        fn = lambda q_: eager_causal_attention(q_, NH, NKV, hs)  # noqa: E731
        y, (dqkv,) = forward_backward(fn, [qkv], dout)
        check((y - spec_attention(qkv.to(F64), NH, NKV, hs)).abs().max() < 1e-12,
              f"attention {name}: repeat_kv + eager and the per-head loops disagree")
        fd = check_finite_differences(f"attention {name}", fn, [qkv], dout, [dqkv], fd_gen)
        out.update({f"attention.{name}.qkv": qkv, f"attention.{name}.dout": dout, f"attention.{name}.out": y,
                    f"attention.{name}.dqkv": dqkv})
        meta.update({f"attention.{name}.{k}": str(v) for k, v in s.items()})
        summary.append(f"  attention {name} B={B} T={T} NH={NH} NKV={NKV} hs={hs}: fd max |err| {fd:.1e}")

    # SwiGLU, gates from -100 to 100 (exp's clamps) besides normal ones.
    N, F_ = SWIGLU["N"], SWIGLU["F"]
    gu, dout = randn(gen, N, 2 * F_, scale=2.0), randn(gen, N, F_)
    extremes = torch.tensor([-100.0, -90.0, -20.0, -1.2785, 0.0, 20.0, 90.0, 100.0], dtype=F32)
    gu[0, : len(extremes)] = extremes
    gu[1, F_ - len(extremes):F_] = extremes   # in the last, partial vector of a row too
    fn = lambda gu_: swiglu(gu_, F_)  # noqa: E731
    y, (dgu,) = forward_backward(fn, [gu], dout)
    g64 = gu.to(F64)[:, :F_]
    check((y - g64 / (1 + torch.exp(-g64)) * gu.to(F64)[:, F_:]).abs().max() < 1e-12, "swiglu: silu is not x sigmoid(x)")
    fd = check_finite_differences("swiglu", fn, [gu], dout, [dgu], fd_gen)
    out.update({"swiglu.gu": gu, "swiglu.dout": dout, "swiglu.out": y, "swiglu.dgu": dgu})
    meta.update({"swiglu.N": str(N), "swiglu.F": str(F_)})
    summary.append(f"  swiglu    N={N} F={F_}: fd max |err| {fd:.1e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    gen, fd_gen = torch.Generator().manual_seed(SEED), torch.Generator().manual_seed(SEED + 1)
    tensors, meta, summary = {}, {"seed": str(SEED), "loss": "sum(out * dout)"}, []
    build(gen, fd_gen, tensors, meta, summary)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "llama_kernels_ref.safetensors")
    ref.save_safetensors(path, tensors, meta)
    back, back_meta = ref.load_safetensors(path)
    check(set(back) == set(tensors) and back_meta == meta, f"{path}: round trip lost keys")
    for n, t in tensors.items():
        check(back[n].dtype == t.dtype and torch.equal(back[n], t), f"{path}: round trip changed {n}")
    print("llama_kernels_reference: checks passed")
    print("\n".join(summary))
    print(f"  wrote {path} ({os.path.getsize(path)} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
