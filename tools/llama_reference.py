"""llama_reference.py - the PyTorch numerical reference for Strata's Llama family.

The architecture of Hugging Face's LlamaForCausalLM (Llama 2 and 3, Mistral
without sliding windows, SmolLM), written in plain torch (no transformers
library here) after its modeling_llama.py, with its parameter names and
layouts:

    model.embed_tokens.weight [V, C]
    model.layers.N.input_layernorm.weight [C]             RMSNorm
    model.layers.N.self_attn.{q,k,v,o}_proj.weight       nn.Linear layout [out, in]:
        q [NH*hs, C], k and v [NKV*hs, C], o [C, NH*hs]   (no biases)
    model.layers.N.post_attention_layernorm.weight [C]
    model.layers.N.mlp.{gate,up}_proj.weight [F, C], mlp.down_proj.weight [C, F]
    model.norm.weight [C]
    lm_head.weight [V, C]                                absent when tied to embed_tokens

Per block: x += o_proj(attn(rope(q), rope(k), v)) over input_layernorm(x);
x += down_proj(silu(gate_proj(h)) * up_proj(h)) over post_attention_layernorm(x).
RMSNorm: x * rsqrt(mean(x^2) + eps) * w. Rotary embeddings in the rotate-half
layout: q_embed = q cos + rotate_half(q) sin, angles pos * inv_freq with
inv_freq[i] = theta^(-2i/hs) ("default") or Llama 3.1's smoothed scaling
("llama3"). Attention: key/value head h // (NH/NKV) serves query head h
(repeat_kv), softmax(q k^T / sqrt(hs)) causal.

What lives here:
  * LlamaConfig / Llama: the model, in any dtype (float64 for the fixtures).
  * naive_forward: the same written straight from the formulas, one head at a
    time, to check Llama against; slow, tiny configs only.
  * PRESETS: the named shapes the benchmarks run (bench/torch_train.py).
  * inv_freq: the rotary frequencies for a config (both rope types).
  * KVCache / decode_forward / generate_greedy: greedy generation with a
    cache of keys and values (gpt2_reference's window policy).
  * param_names / param_shapes / is_decayed / init_weights_f32: the fixture
    conventions, as gpt2_reference.py has them for GPT-2.

The training-step pieces (lr_at, clip_scale, adamw_step_manual, bf16_round)
and the safetensors reader/writer are gpt2_reference's: one of each.
"""

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

import gpt2_reference


@dataclass(frozen=True)
class LlamaConfig:
    n_layer: int
    n_head: int
    n_kv_head: int
    d_model: int
    d_ff: int
    n_ctx: int
    vocab: int
    tied: bool = False
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    # Llama 3.1's "llama3" rope scaling, as config.json's rope_scaling spells
    # it ({"rope_type": "llama3", "factor": ..., "low_freq_factor": ...,
    # "high_freq_factor": ..., "original_max_position_embeddings": ...}), or
    # None for the default rotary frequencies.
    rope_scaling: dict = field(default=None, hash=False, compare=False)

    def __post_init__(self):
        if self.d_model % self.n_head:
            raise ValueError("d_model must be a multiple of n_head")
        if self.n_head % self.n_kv_head:
            raise ValueError("n_head must be a multiple of n_kv_head")
        if (self.d_model // self.n_head) % 2:
            raise ValueError("the head size must be even (rotary pairs)")

    @property
    def head_size(self):
        return self.d_model // self.n_head


# The shapes Strata knows by name (src/model/gpt.c) that the benchmarks run in
# PyTorch; rope scaling is left out, it does not change the work.
PRESETS = {
    "llama-tiny": LlamaConfig(n_layer=2, n_head=4, n_kv_head=2, d_model=128, d_ff=352, n_ctx=1024, vocab=50257),
    "llama-mini": LlamaConfig(n_layer=6, n_head=6, n_kv_head=2, d_model=384, d_ff=1024, n_ctx=1024, vocab=50257,
                              tied=True),
    "smollm2-135m": LlamaConfig(n_layer=30, n_head=9, n_kv_head=3, d_model=576, d_ff=1536, n_ctx=8192,
                                vocab=49152, tied=True, rope_theta=100000.0),
    "smollm2-360m": LlamaConfig(n_layer=32, n_head=15, n_kv_head=5, d_model=960, d_ff=2560, n_ctx=8192,
                                vocab=49152, tied=True, rope_theta=100000.0),
}


def inv_freq(cfg, dtype=torch.float64):
    """The rotary inverse frequencies [hs/2], as HF's rope init functions
    compute them (in float64 here: the math, not float32's rounding of it)."""
    hs = cfg.head_size
    base = torch.tensor(cfg.rope_theta, dtype=torch.float64)
    f = 1.0 / (base ** (torch.arange(0, hs, 2, dtype=torch.int64).to(torch.float64) / hs))
    s = cfg.rope_scaling
    if s is not None:
        if s.get("rope_type", s.get("type")) != "llama3":
            raise ValueError(f"rope scaling {s} is not supported")
        factor, lo, hi = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        lo_wavelen, hi_wavelen = old / lo, old / hi
        wavelen = 2 * math.pi / f
        scaled = torch.where(wavelen > lo_wavelen, f / factor, f)
        smooth = (old / wavelen - lo) / (hi - lo)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < hi_wavelen) & ~(wavelen > lo_wavelen)
        f = torch.where(medium, smoothed, scaled)
    return f.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_cos_sin(cfg, positions, dtype):
    """cos, sin [T, hs] for integer positions [T]."""
    freqs = positions.to(torch.float64)[:, None] * inv_freq(cfg)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class RMSNorm(nn.Module):
    def __init__(self, n, eps, dtype):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n, dtype=dtype))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Attention(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.cfg = cfg
        hs = cfg.head_size
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_head * hs, bias=False, dtype=dtype)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_head * hs, bias=False, dtype=dtype)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_head * hs, bias=False, dtype=dtype)
        self.o_proj = nn.Linear(cfg.n_head * hs, cfg.d_model, bias=False, dtype=dtype)

    def forward(self, x, cos, sin):
        cfg = self.cfg
        B, T, _ = x.shape
        hs = cfg.head_size
        q = self.q_proj(x).view(B, T, cfg.n_head, hs).transpose(1, 2)      # [B, NH, T, hs]
        k = self.k_proj(x).view(B, T, cfg.n_kv_head, hs).transpose(1, 2)   # [B, NKV, T, hs]
        v = self.v_proj(x).view(B, T, cfg.n_kv_head, hs).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = cfg.n_head // cfg.n_kv_head
        k = k.repeat_interleave(group, dim=1)   # repeat_kv: kv head h // group serves query head h
        v = v.repeat_interleave(group, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = torch.softmax(att.masked_fill(future, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, cfg.n_head * hs)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False, dtype=dtype)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False, dtype=dtype)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False, dtype=dtype)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps, dtype)
        self.self_attn = Attention(cfg, dtype)
        self.post_attention_layernorm = RMSNorm(cfg.d_model, cfg.norm_eps, dtype)
        self.mlp = MLP(cfg, dtype)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab, cfg.d_model, dtype=dtype)
        self.layers = nn.ModuleList([Block(cfg, dtype) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps, dtype)


class Llama(nn.Module):
    """LlamaForCausalLM with Hugging Face parameter names.

    forward(idx [B, T] int64, targets [B, T] or None, pos0=0) returns
    (mean cross-entropy over B*T positions or None, logits [B, T, V]).
    """

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self.model = Inner(cfg, dtype)
        if not cfg.tied:
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False, dtype=dtype)

    def forward(self, idx, targets=None, pos0=0):
        B, T = idx.shape
        if pos0 + T > self.cfg.n_ctx:
            raise ValueError(f"positions up to {pos0 + T} exceed n_ctx {self.cfg.n_ctx}")
        x = self.model.embed_tokens(idx)
        cos, sin = rope_cos_sin(self.cfg, torch.arange(pos0, pos0 + T), x.dtype)
        for block in self.model.layers:
            x = block(x, cos, sin)
        head = self.model.embed_tokens.weight if self.cfg.tied else self.lm_head.weight
        logits = F.linear(self.model.norm(x), head)
        if targets is None:
            return None, logits
        flat = logits.reshape(B * T, -1)
        if flat.dtype in (torch.bfloat16, torch.float16):
            flat = flat.float()
        return F.cross_entropy(flat, targets.reshape(B * T)), logits


class KVCache:
    """Keys (rotated) and values of every layer for up to max_len positions:
    k[l], v[l] are [n_kv_head, max_len, hs]; len is how many are filled."""

    def __init__(self, cfg, max_len, dtype=torch.float32):
        shape = (cfg.n_kv_head, max_len, cfg.head_size)
        self.k = [torch.empty(shape, dtype=dtype) for _ in range(cfg.n_layer)]
        self.v = [torch.empty(shape, dtype=dtype) for _ in range(cfg.n_layer)]
        self.max_len = max_len
        self.len = 0


def decode_forward(model, cache, idx):
    """Appends idx (a 1-D tensor of N token ids at positions cache.len ...) to
    the cache and returns the logits [V] of the last of them: Llama.forward
    over the cached tokens and idx, computing only the new rows (the keys are
    cached after their rotation, at the position they were written at). Call
    it under torch.inference_mode(); gpt2_reference.generate_greedy drives it."""
    cfg = model.cfg
    N, pos, hs, NH, NKV = idx.shape[0], cache.len, cfg.head_size, cfg.n_head, cfg.n_kv_head
    if pos + N > cache.max_len:
        raise ValueError(f"{pos + N} positions exceed the cache's {cache.max_len}")
    x = model.model.embed_tokens(idx)                                   # [N, C]
    cos, sin = rope_cos_sin(cfg, torch.arange(pos, pos + N), x.dtype)   # [N, hs]
    for l, block in enumerate(model.model.layers):
        attn = block.self_attn
        h = block.input_layernorm(x)
        q = attn.q_proj(h).view(N, NH, hs).transpose(0, 1)             # [NH, N, hs]
        k = attn.k_proj(h).view(N, NKV, hs).transpose(0, 1)            # [NKV, N, hs]
        cache.k[l][:, pos:pos + N] = k * cos + rotate_half(k) * sin
        cache.v[l][:, pos:pos + N] = attn.v_proj(h).view(N, NKV, hs).transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        group = NH // NKV
        keys = cache.k[l][:, :pos + N].repeat_interleave(group, dim=0)  # [NH, pos+N, hs]
        vals = cache.v[l][:, :pos + N].repeat_interleave(group, dim=0)
        att = (q @ keys.transpose(1, 2)) * (1.0 / math.sqrt(hs))
        if N > 1:  # query i (position pos+i) sees keys 0 .. pos+i
            att = att.masked_fill(torch.ones(N, pos + N, dtype=torch.bool).triu(pos + 1), float("-inf"))
        y = (torch.softmax(att, dim=-1) @ vals).transpose(0, 1).reshape(N, NH * hs)
        x = x + attn.o_proj(y)
        x = x + block.mlp(block.post_attention_layernorm(x))
    cache.len = pos + N
    head = model.model.embed_tokens.weight if cfg.tied else model.lm_head.weight
    return F.linear(model.model.norm(x[-1]), head)


def generate_greedy(model, prompt, n_new, max_len=None, on_token=None):
    """gpt2_reference.generate_greedy (the same window policy) with Llama's cache."""
    return gpt2_reference.generate_greedy(model, prompt, n_new, max_len, on_token, decode_forward, KVCache)


def param_names(cfg):
    """Every parameter name in a fixed order (the order of Llama.named_parameters)."""
    names = ["model.embed_tokens.weight"]
    for i in range(cfg.n_layer):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight",
                  p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                  p + "self_attn.v_proj.weight", p + "self_attn.o_proj.weight",
                  p + "post_attention_layernorm.weight",
                  p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight", p + "mlp.down_proj.weight"]
    names.append("model.norm.weight")
    if not cfg.tied:
        names.append("lm_head.weight")
    return names


def param_shapes(cfg):
    C, V, F_, hs = cfg.d_model, cfg.vocab, cfg.d_ff, cfg.head_size
    leaf_shapes = {
        "self_attn.q_proj.weight": (cfg.n_head * hs, C), "self_attn.k_proj.weight": (cfg.n_kv_head * hs, C),
        "self_attn.v_proj.weight": (cfg.n_kv_head * hs, C), "self_attn.o_proj.weight": (C, cfg.n_head * hs),
        "mlp.gate_proj.weight": (F_, C), "mlp.up_proj.weight": (F_, C), "mlp.down_proj.weight": (C, F_),
    }
    shapes = {}
    for name in param_names(cfg):
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            shapes[name] = (V, C)
        elif name.startswith("model.layers."):
            shapes[name] = leaf_shapes.get(name.split(".", 3)[-1], (C,))
        else:
            shapes[name] = (C,)
    return shapes


def is_norm(name):
    return name.endswith("layernorm.weight") or name == "model.norm.weight"


def is_decayed(name):
    """Weight decay applies to matrices and embeddings, not to the RMSNorm gains."""
    return not is_norm(name)


def init_weights_f32(cfg, seed):
    """The fixture initialisation, float32, drawn in param_names order from one
    torch.Generator: matrices and embeddings ~ 0.02 N(0, 1), RMSNorm gains
    1 + 0.1 N(0, 1) (not 1, so that their gradients matter)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(cfg).items():
        z = torch.randn(shape, generator=g, dtype=torch.float32)
        out[name] = 1.0 + 0.1 * z if is_norm(name) else 0.02 * z
    return out


# {name: tensor} into a model's parameters: the GPT-2 reference's, one of it
load_state = gpt2_reference.load_state


def naive_inv_freq(cfg):
    """inv_freq again, one frequency at a time from the written formulas
    (Llama 3.1's scaling as its paper states it), to check inv_freq against."""
    hs, out = cfg.head_size, []
    for i in range(hs // 2):
        f = cfg.rope_theta ** (-2.0 * i / hs)
        s = cfg.rope_scaling
        if s:
            wavelen = 2 * math.pi / f
            old = s["original_max_position_embeddings"]
            if wavelen < old / s["high_freq_factor"]:
                pass                                    # high frequencies: kept
            elif wavelen > old / s["low_freq_factor"]:
                f = f / s["factor"]                     # low frequencies: slowed by the factor
            else:                                       # between: a blend, smooth in 1/wavelen
                smooth = (old / wavelen - s["low_freq_factor"]) / (s["high_freq_factor"] - s["low_freq_factor"])
                f = (1 - smooth) * f / s["factor"] + smooth * f
        out.append(f)
    return torch.tensor(out, dtype=torch.float64)


def naive_forward(w, idx, cfg, pos0=0):
    """The model straight from the formulas, one head and one position pair at a
    time, for checking Llama only. w: {name: float64 tensor}. Returns logits."""
    B, T = idx.shape
    C, NH, NKV, hs = cfg.d_model, cfg.n_head, cfg.n_kv_head, cfg.head_size
    half = hs // 2
    freq = naive_inv_freq(cfg)

    def rmsnorm(x, g):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + cfg.norm_eps) * g

    def rotate(vec, pos):   # vec [hs]: pairs (i, i + half) turned by pos * freq[i]
        out = vec.clone()
        for i in range(half):
            a = pos * freq[i].item()
            c, s = math.cos(a), math.sin(a)
            out[i] = vec[i] * c - vec[i + half] * s
            out[i + half] = vec[i + half] * c + vec[i] * s
        return out

    x = w["model.embed_tokens.weight"][idx]
    for l in range(cfg.n_layer):
        p = f"model.layers.{l}."
        h = rmsnorm(x, w[p + "input_layernorm.weight"])
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        v = h @ w[p + "self_attn.v_proj.weight"].T
        y = torch.empty(B, T, NH * hs, dtype=x.dtype)
        for b in range(B):
            for head in range(NH):
                kv = head // (NH // NKV)
                qs = torch.stack([rotate(q[b, t, head * hs:(head + 1) * hs], pos0 + t) for t in range(T)])
                ks = torch.stack([rotate(k[b, t, kv * hs:(kv + 1) * hs], pos0 + t) for t in range(T)])
                s = qs @ ks.T / math.sqrt(hs)
                for i in range(T):
                    s[i, i + 1:] = float("-inf")
                e = torch.exp(s - s.max(dim=1, keepdim=True).values)
                y[b, :, head * hs:(head + 1) * hs] = (e / e.sum(dim=1, keepdim=True)) @ v[b, :, kv * hs:(kv + 1) * hs]
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"])
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1.0 + torch.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if cfg.tied else w["lm_head.weight"]
    return rmsnorm(x, w["model.norm.weight"]) @ head.T
