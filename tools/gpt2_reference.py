"""gpt2_reference.py - the PyTorch numerical reference for Strata's C engine.

What lives here (plain torch 1.13 + the standard library, nothing else):
  * GPT2Config / GPT2: the GPT-2 architecture exactly as the C engine
    implements it, with Hugging Face tensor names and layouts (Conv1D weights
    are [in, out], the LM head is tied to wte). Runs in any dtype: float64
    for the fixtures, float32 (optionally under bf16 autocast) for the bench.
  * naive_forward: the same model spelled out op by op from the written spec
    (explicit LayerNorm and tanh-GELU formulas, one head at a time). It exists
    only to check GPT2 against the spec; it is slow, use it on tiny configs.
  * init_weights_f32: the fixture initialisation (fixed torch.Generator).
  * lr_at, clip_scale, adamw_step_manual, bf16_round: the training-step
    pieces whose exact formulas the C engine must reproduce.
  * save_safetensors / load_safetensors: a minimal safetensors writer and
    reader (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL).

Import it from the tools/ folder:

    import sys; sys.path.insert(0, "tools")
    import gpt2_reference as ref
    cfg = ref.GPT2Config(n_layer=2, n_head=4, d_model=48, n_ctx=32, vocab=101)
    model = ref.GPT2(cfg, dtype=torch.float64)
    ref.load_state(model, ref.load_safetensors("tests/fixtures/gpt_small_init.safetensors")[0])
    loss, logits = model(inputs, targets)
"""

import ctypes
import json
import math
import struct
import sys
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

if sys.byteorder != "little":  # safetensors is little-endian; we copy raw memory
    raise RuntimeError("gpt2_reference.py assumes a little-endian host")

LN_EPS = 1e-5


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class GPT2Config:
    n_layer: int
    n_head: int
    d_model: int
    n_ctx: int
    vocab: int

    def __post_init__(self):
        if self.d_model % self.n_head != 0:
            raise ValueError("d_model must be a multiple of n_head")


# The published GPT-2 sizes (vocabulary 50257, context 1024).
PRESETS = {
    "gpt2-124m": GPT2Config(n_layer=12, n_head=12, d_model=768, n_ctx=1024, vocab=50257),
    "gpt2-350m": GPT2Config(n_layer=24, n_head=16, d_model=1024, n_ctx=1024, vocab=50257),
    "gpt2-774m": GPT2Config(n_layer=36, n_head=20, d_model=1280, n_ctx=1024, vocab=50257),
    "gpt2-1558m": GPT2Config(n_layer=48, n_head=25, d_model=1600, n_ctx=1024, vocab=50257),
}


class Conv1D(nn.Module):
    """Hugging Face's Conv1D: y = x @ weight + bias with weight [in, out]."""

    def __init__(self, n_in, n_out, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(n_out, dtype=dtype))

    def forward(self, x):
        # One GEMM with the bias folded in (addmm), as HF and the C engine do.
        y = torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight)
        return y.view(*x.shape[:-1], self.weight.shape[1])


class LayerNorm(nn.Module):
    def __init__(self, n, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(n, dtype=dtype))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, LN_EPS)


class Attention(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = Conv1D(cfg.d_model, 3 * cfg.d_model, dtype)  # fused q|k|v
        self.c_proj = Conv1D(cfg.d_model, cfg.d_model, dtype)
        # True where j > i: the future positions a query may not see.
        future = torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool).triu(1)
        self.register_buffer("future", future, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # [B, nh, T, hs]
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        # torch 1.13 has no scaled_dot_product_attention: the manual form.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.c_fc = Conv1D(cfg.d_model, 4 * cfg.d_model, dtype)
        self.c_proj = Conv1D(4 * cfg.d_model, cfg.d_model, dtype)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg, dtype):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.d_model, dtype)
        self.attn = Attention(cfg, dtype)
        self.ln_2 = LayerNorm(cfg.d_model, dtype)
        self.mlp = MLP(cfg, dtype)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """GPT-2 with Hugging Face parameter names (wte.weight, h.0.ln_1.weight, ...).

    forward(idx [B, T] int64, targets [B, T] or None) returns
    (mean cross-entropy over B*T positions or None, logits [B, T, V]).
    """

    def __init__(self, cfg, dtype=torch.float32):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model, dtype=dtype)
        self.wpe = nn.Embedding(cfg.n_ctx, cfg.d_model, dtype=dtype)
        self.h = nn.ModuleList([Block(cfg, dtype) for _ in range(cfg.n_layer)])
        self.ln_f = LayerNorm(cfg.d_model, dtype)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.cfg.n_ctx:
            raise ValueError(f"sequence length {T} exceeds n_ctx {self.cfg.n_ctx}")
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied LM head
        if targets is None:
            return None, logits
        flat = logits.reshape(B * T, -1)
        if flat.dtype in (torch.bfloat16, torch.float16):
            flat = flat.float()  # the loss in fp32 under autocast, as usual
        loss = F.cross_entropy(flat, targets.reshape(B * T))
        return loss, logits


class KVCache:
    """Keys and values of every layer for up to max_len positions, preallocated:
    k[l], v[l] are [n_head, max_len, hs]; len is how many positions are filled."""

    def __init__(self, cfg, max_len, dtype=torch.float32):
        hs = cfg.d_model // cfg.n_head
        self.k = [torch.empty(cfg.n_head, max_len, hs, dtype=dtype) for _ in range(cfg.n_layer)]
        self.v = [torch.empty(cfg.n_head, max_len, hs, dtype=dtype) for _ in range(cfg.n_layer)]
        self.max_len = max_len
        self.len = 0


def decode_forward(model, cache, idx):
    """Appends idx (a 1-D tensor of N token ids, positions cache.len ...) to the
    cache and returns the logits [V] of the last of them: the forward of
    GPT2 over the cached tokens and idx, computing only the new rows. Call it
    under torch.inference_mode()."""
    cfg = model.cfg
    N, pos, C, nh = idx.shape[0], cache.len, cfg.d_model, cfg.n_head
    hs = C // nh
    if pos + N > cache.max_len:
        raise ValueError(f"{pos + N} positions exceed the cache's {cache.max_len}")
    x = model.wte(idx) + model.wpe.weight[pos:pos + N]                  # [N, C]
    for l, block in enumerate(model.h):
        attn = block.attn
        q, k, v = attn.c_attn(block.ln_1(x)).split(C, dim=1)          # [N, C] each
        cache.k[l][:, pos:pos + N] = k.view(N, nh, hs).transpose(0, 1)
        cache.v[l][:, pos:pos + N] = v.view(N, nh, hs).transpose(0, 1)
        keys, vals = cache.k[l][:, :pos + N], cache.v[l][:, :pos + N]  # [nh, pos+N, hs]
        att = (q.view(N, nh, hs).transpose(0, 1) @ keys.transpose(1, 2)) * (1.0 / math.sqrt(hs))
        if N > 1:  # query i (position pos+i) sees keys 0 .. pos+i
            future = torch.ones(N, pos + N, dtype=torch.bool).triu(pos + 1)
            att = att.masked_fill(future, float("-inf"))
        y = (torch.softmax(att, dim=-1) @ vals).transpose(0, 1).reshape(N, C)
        x = x + attn.c_proj(y)
        x = x + block.mlp(block.ln_2(x))
    cache.len = pos + N
    return F.linear(model.ln_f(x[-1]), model.wte.weight)  # the last position's logits only


def window_keep(max_len):
    """Tokens a full cache keeps (the new one included) when it starts over:
    GPT-2's positions are absolute, so the K/V of a shifted window are not
    those of the cache; the window is recomputed from its last max_len // 2
    tokens (Strata's gpt_decoder does the same)."""
    return max(1, max_len // 2)


def generate_greedy(model, prompt, n_new, max_len=None, on_token=None, decode=decode_forward,
                    cache_class=KVCache):
    """Greedy generation with a KV cache of max_len positions (default n_ctx):
    the prompt (its last max_len tokens) in one pass, then one token at a time;
    when the cache is full, the window starts over from the last
    window_keep(max_len) tokens. Returns the n_new token ids (no stop at
    end-of-text: the caller decides). on_token(i, id) is called as each comes.
    decode and cache_class are the architecture's (llama_reference passes its
    own); the policy is the same for both."""
    max_len = max_len or model.cfg.n_ctx
    cache = cache_class(model.cfg, max_len, next(model.parameters()).dtype)
    seq = [int(t) for t in prompt]
    out = []
    with torch.inference_mode():
        logits = decode(model, cache, torch.tensor(seq[-max_len:], dtype=torch.long))
        for i in range(n_new):
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            seq.append(nxt)
            if on_token:
                on_token(i, nxt)
            if i + 1 == n_new:
                break
            if cache.len == max_len:  # full: recompute the window's last tokens
                cache.len = 0
                window = seq[-window_keep(max_len):]
                logits = decode(model, cache, torch.tensor(window, dtype=torch.long))
            else:
                logits = decode(model, cache, torch.tensor([nxt], dtype=torch.long))
    return out


def param_names(cfg):
    """Every parameter name in a fixed order (the order of GPT2.named_parameters)."""
    names = ["wte.weight", "wpe.weight"]
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        names += [p + "ln_1.weight", p + "ln_1.bias",
                  p + "attn.c_attn.weight", p + "attn.c_attn.bias",
                  p + "attn.c_proj.weight", p + "attn.c_proj.bias",
                  p + "ln_2.weight", p + "ln_2.bias",
                  p + "mlp.c_fc.weight", p + "mlp.c_fc.bias",
                  p + "mlp.c_proj.weight", p + "mlp.c_proj.bias"]
    return names + ["ln_f.weight", "ln_f.bias"]


def param_shapes(cfg):
    C, V = cfg.d_model, cfg.vocab
    shapes = {}
    for name in param_names(cfg):
        leaf = name.split(".", 2)[-1] if name.startswith("h.") else name
        shapes[name] = {
            "wte.weight": (V, C), "wpe.weight": (cfg.n_ctx, C),
            "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
            "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
            "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,),
            "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,),
        }.get(leaf, (C,))  # LayerNorm weights and biases
    return shapes


def is_decayed(name):
    """Weight decay applies to matrices and embeddings only, not biases or LayerNorm."""
    return name in ("wte.weight", "wpe.weight") or name.endswith(
        ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"))


def is_layernorm(name):
    return ".ln_1." in name or ".ln_2." in name or name.startswith("ln_f.")


def load_state(model, tensors):
    """Copy tensors {name: tensor} into model's parameters (converting the dtype)."""
    params = dict(model.named_parameters())
    missing = set(params) - set(tensors)
    if missing:
        raise KeyError(f"missing parameters: {sorted(missing)}")
    with torch.no_grad():
        for name, p in params.items():
            if tuple(tensors[name].shape) != tuple(p.shape):
                raise ValueError(f"{name}: shape {tuple(tensors[name].shape)} != {tuple(p.shape)}")
            p.copy_(tensors[name].to(p.dtype))


def init_weights_f32(cfg, seed):
    """The fixture initialisation, float32, drawn in param_names order from one
    torch.Generator: matrices, embeddings and every bias ~ N(0, 0.02); LayerNorm
    weights 1 + N(0, 0.1), LayerNorm biases N(0, 0.02)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(cfg).items():
        z = torch.randn(shape, generator=g, dtype=torch.float32)
        if is_layernorm(name) and name.endswith(".weight"):
            out[name] = 1.0 + 0.1 * z
        else:
            out[name] = 0.02 * z
    return out


def naive_forward(w, idx, cfg):
    """The model written straight from the spec, for checking GPT2 only.

    w: {name: float64 tensor}; idx: [B, T] int64. Returns logits [B, T, V].
    """
    B, T = idx.shape
    C, nh = cfg.d_model, cfg.n_head
    hs = C // nh

    def layernorm(x, g, b):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)  # biased variance
        return (x - mean) / torch.sqrt(var + LN_EPS) * g + b

    def gelu_tanh(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    x = w["wte.weight"][idx] + w["wpe.weight"][torch.arange(T)]
    for i in range(cfg.n_layer):
        p = f"h.{i}."
        h = layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
        y = torch.empty(B, T, C, dtype=x.dtype)
        for b in range(B):
            for head in range(nh):
                sl = slice(head * hs, (head + 1) * hs)
                s = q[b, :, sl] @ k[b, :, sl].T / math.sqrt(hs)  # [T, T]
                for i_ in range(T):
                    s[i_, i_ + 1:] = float("-inf")
                e = torch.exp(s - s.max(dim=1, keepdim=True).values)
                y[b, :, sl] = (e / e.sum(dim=1, keepdim=True)) @ v[b, :, sl]
        x = x + (y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"])
        h = layernorm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        h = gelu_tanh(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + (h @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"])
    x = layernorm(x, w["ln_f.weight"], w["ln_f.bias"])
    return x @ w["wte.weight"].T


def naive_loss(logits, targets):
    """Mean cross-entropy, via an explicit log-sum-exp."""
    z = logits.reshape(-1, logits.shape[-1])
    t = targets.reshape(-1)
    m = z.max(dim=1, keepdim=True).values
    lse = (m.squeeze(1) + torch.log(torch.exp(z - m).sum(dim=1)))
    return (lse - z[torch.arange(z.shape[0]), t]).mean()


# ---------------------------------------------------------------------------
# Training-step pieces
# ---------------------------------------------------------------------------

def lr_at(step, max_lr, min_lr, warmup, total):
    """Linear warmup, then cosine decay to min_lr (0-based step)."""
    if step < warmup:
        return max_lr * (step + 1) / warmup
    ratio = min(max((step - warmup + 1) / (total - warmup), 0.0), 1.0)
    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * ratio))


def global_grad_norm(grads):
    """L2 norm over all gradients (float64 accumulation)."""
    return math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads))


def clip_scale(norm, max_norm):
    """The factor torch.nn.utils.clip_grad_norm_ multiplies every gradient by:
    min(1, max_norm / (norm + 1e-6))."""
    return min(1.0, max_norm / (norm + 1e-6))


def adamw_step_manual(p, g, m, v, t, lr, beta1, beta2, eps, wd):
    """One AdamW step in place, written out as torch.optim.AdamW (foreach=False)
    computes it; t is the 1-based step count after this step."""
    p.mul_(1.0 - lr * wd)  # decoupled decay, from the old weights
    m.mul_(beta1).add_(g, alpha=1.0 - beta1)
    v.mul_(beta2).addcmul_(g, g, value=1.0 - beta2)
    bias_c1 = 1.0 - beta1 ** t
    bias_c2 = 1.0 - beta2 ** t
    denom = v.sqrt() / math.sqrt(bias_c2) + eps
    p.addcdiv_(m, denom, value=-lr / bias_c1)


def bf16_round(w):
    """w -> float32 -> bfloat16 (round to nearest even) -> w's dtype."""
    return w.to(torch.float32).to(torch.bfloat16).to(w.dtype)


def bf16_round_bits(w32):
    """Independent bit-level bf16 rounding of a float32 tensor (finite values),
    returned as float32: used to check that torch rounds to nearest even."""
    bits = torch.frombuffer(bytearray(tensor_bytes(w32.contiguous())), dtype=torch.int32).to(torch.int64)
    bits = bits & 0xFFFFFFFF
    lsb = (bits >> 16) & 1
    bits = ((bits + 0x7FFF + lsb) >> 16) << 16
    bits = torch.where(bits >= 2 ** 31, bits - 2 ** 32, bits).to(torch.int32)
    return torch.frombuffer(bytearray(tensor_bytes(bits)), dtype=torch.float32).reshape(w32.shape).clone()


# ---------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------

DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16",
    torch.bfloat16: "BF16", torch.int64: "I64", torch.int32: "I32",
    torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}
DTYPES_BY_NAME = {v: k for k, v in DTYPES.items()}


def tensor_bytes(t):
    """The raw little-endian bytes of a tensor, row-major."""
    t = t.detach().contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def save_safetensors(path, tensors, metadata=None):
    """Write {name: tensor}. metadata: {str: str} or None.
    Tensors go in order of element size (largest first), then name, as the
    safetensors library orders them; with the JSON header padded with spaces
    to a multiple of 8 bytes, every tensor's data is then naturally aligned
    in the file. Output is byte-for-byte deterministic."""
    header = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(sorted(metadata.items()))
    blobs, offset = [], 0
    for name in sorted(tensors, key=lambda n: (-tensors[n].element_size(), n)):
        t = tensors[name]
        if t.dtype not in DTYPES:
            raise TypeError(f"{name}: unsupported dtype {t.dtype}")
        data = tensor_bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """Read a safetensors file: returns ({name: tensor}, metadata {str: str})."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} exceeds file size {len(raw)}")
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {}) or {}
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        dtype = DTYPES_BY_NAME[info["dtype"]]
        begin, end = info["data_offsets"]
        shape = info["shape"]
        numel = math.prod(shape)
        esize = torch.empty((), dtype=dtype).element_size()
        if end - begin != numel * esize or end > len(data):
            raise ValueError(f"{path}: tensor {name} has bad data_offsets {begin}..{end}")
        if numel == 0:
            out[name] = torch.empty(shape, dtype=dtype)
        else:
            out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype).reshape(shape).clone()
    return out, metadata
