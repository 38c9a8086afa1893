/* gpt_decode.c - generation with a cache of keys and values for both
 * architectures (strata/model.h, gpt_decoder): the prompt in chunks of
 * batched products, then one token at a time, each block's attention reading
 * the cache. GPT-2's positions come from wpe at the cache position; Llama's
 * rotations start there (rope's pos0), so a cached key keeps the rotation of
 * the position it was written at. The ops are the backend's; the caller's
 * tokens, weights and logits are host memory, crossing as gpt_forward's do. */
#include <stdlib.h>
#include <string.h>

#include "strata/generate.h"
#include "strata/model.h"
#include "model/model_internal.h"

/* The decoder's device buffers, for up to `chunk` rows at a time. The last
 * five exist only where needed: unit weights in mixed precision or on a
 * backend that is not unified, the rest on a backend that is not unified. */
enum dec_buffer {
    DEC_X,         /* [chunk, C] the residual stream */
    DEC_LN,        /* [chunk, C] a LayerNorm's or RMSNorm's output */
    DEC_MEAN,      /* [chunk] its statistics (unused: no backward; no mean for RMSNorm) */
    DEC_RSTD,      /* [chunk] */
    DEC_QKV,       /* [chunk, QKV] q|k|v: 3C for GPT-2, (NH + 2 NKV) hs for Llama */
    DEC_ATTY,      /* [chunk, C] attention output before c_proj */
    DEC_TMP,       /* [chunk, C] a projection before it joins the residual */
    DEC_FCH,       /* [chunk, 4C] c_fc's output; Llama: [chunk, 2F] gate|up */
    DEC_GELU,      /* [chunk, 4C] GELU of it; Llama: [chunk, F] SwiGLU of it */
    DEC_ATT,       /* [NH, chunk, max_len] attention probabilities */
    DEC_EMBED32,   /* the embedding or head unit's f32 weights (widened or copied in) */
    DEC_BLOCK32,   /* one block's f32 weights, the same way */
    DEC_STAGE16,   /* mixed precision, not unified: a unit's bf16 weights before widening */
    DEC_TOKENS,    /* not unified: [chunk] token ids */
    DEC_LOGITS,    /* not unified: [Vp] the last position's logits */
    DEC_BUFFERS
};

struct gpt_decoder {
    const compute_backend *be;
    gpt_config cfg;
    gpt_precision precision;
    int max_len, chunk;
    kv_cache cache;    /* cache.len: the tokens it holds, window[0 .. cache.len) */
    int32_t *window;   /* host [max_len] */
    void *mem[DEC_BUFFERS];
    float *x, *ln, *mean, *rstd, *qkv, *atty, *tmp, *fch, *gelu, *att, *embed32, *block32, *logits;
    st_bf16 *stage16;
    int32_t *tokens;
};

int gpt_decoder_keep(int max_len) { return max_len / 2 > 1 ? max_len / 2 : 1; }

static int chunk_of(int max_len) { return max_len < GPT_DECODER_CHUNK ? max_len : GPT_DECODER_CHUNK; }

static int llama(const gpt_config *cfg) { return cfg->arch == GPT_ARCH_LLAMA; }
static int head_size(const gpt_config *cfg) { return cfg->d_model / cfg->n_head; }
/* Floats of a fused q|k|v row. */
static int qkv_width(const gpt_config *cfg) { return (cfg->n_head + 2 * cfg->n_kv_head) * head_size(cfg); }

static void dec_buffer_bytes(const compute_backend *be, const gpt_config *cfg, int max_len, gpt_precision p,
                             size_t bytes[DEC_BUFFERS]) {
    const size_t R = (size_t)chunk_of(max_len), C = (size_t)cfg->d_model, f = sizeof(float);
    /* the end units share a buffer: an untied head is widened or copied in once the embedding is done */
    const size_t embed_n = gpt_end_units_numel(cfg), block_n = gpt_unit_numel(cfg, 1);
    const int mirror = !be->unified, mixed = p == GPT_MIXED_BF16;
    bytes[DEC_X] = bytes[DEC_LN] = bytes[DEC_ATTY] = bytes[DEC_TMP] = R * C * f;
    bytes[DEC_MEAN] = bytes[DEC_RSTD] = R * f;
    bytes[DEC_QKV] = R * (size_t)qkv_width(cfg) * f;
    bytes[DEC_FCH] = R * (llama(cfg) ? 2 * (size_t)cfg->d_ff : 4 * C) * f;
    bytes[DEC_GELU] = R * (llama(cfg) ? (size_t)cfg->d_ff : 4 * C) * f;
    bytes[DEC_ATT] = (size_t)cfg->n_head * R * (size_t)max_len * f;
    bytes[DEC_EMBED32] = mixed || mirror ? embed_n * f : 0;
    bytes[DEC_BLOCK32] = mixed || mirror ? block_n * f : 0;
    bytes[DEC_STAGE16] = mixed && mirror ? (embed_n > block_n ? embed_n : block_n) * sizeof(st_bf16) : 0;
    bytes[DEC_TOKENS] = mirror ? R * sizeof(int32_t) : 0;
    bytes[DEC_LOGITS] = mirror ? (size_t)cfg->padded_vocab * f : 0;
}

size_t gpt_decoder_bytes(const compute_backend *be, const gpt_config *cfg, int max_len, gpt_precision precision) {
    size_t bytes[DEC_BUFFERS], total = sizeof(gpt_decoder) + (size_t)max_len * sizeof(int32_t);
    dec_buffer_bytes(be, cfg, max_len, precision, bytes);
    for (int i = 0; i < DEC_BUFFERS; i++) total += bytes[i];
    return total + kv_cache_bytes(cfg->n_layer, cfg->n_kv_head, head_size(cfg), max_len);
}

st_status gpt_decoder_create(gpt_decoder **out, const compute_backend *be, const gpt_config *cfg, int max_len,
                             gpt_precision precision, st_error *err) {
    if (max_len < 1 || max_len > cfg->n_ctx)
        return st_fail(err, ST_EINVAL, "a decoder of %d positions: must be 1 .. the model's context %d", max_len,
                       cfg->n_ctx);
    gpt_decoder *d = calloc(1, sizeof *d);
    if (!d) return st_fail(err, ST_ENOMEM, "out of memory allocating a decoder");
    *d = (gpt_decoder){.be = be, .cfg = *cfg, .precision = precision, .max_len = max_len, .chunk = chunk_of(max_len)};
    d->window = malloc((size_t)max_len * sizeof(int32_t));
    if (!d->window) {
        gpt_decoder_free(d);
        return st_fail(err, ST_ENOMEM, "out of memory allocating a decoder");
    }
    if (kv_cache_create(&d->cache, be, cfg->n_layer, cfg->n_kv_head, head_size(cfg), max_len, err) != ST_OK) {
        gpt_decoder_free(d);
        return err ? err->status : ST_ENOMEM;
    }
    size_t bytes[DEC_BUFFERS];
    dec_buffer_bytes(be, cfg, max_len, precision, bytes);
    for (int i = 0; i < DEC_BUFFERS; i++) {
        if (bytes[i] == 0 || (d->mem[i] = be->alloc(be, bytes[i])) != NULL) continue;
        char buf[32];
        gpt_decoder_free(d);
        return st_fail(err, ST_ENOMEM, "out of memory allocating a decoder (%s) on the %s backend",
                       st_format_bytes((double)gpt_decoder_bytes(be, cfg, max_len, precision), buf, sizeof buf),
                       be->name);
    }
    d->x = d->mem[DEC_X];
    d->ln = d->mem[DEC_LN];
    d->mean = d->mem[DEC_MEAN];
    d->rstd = d->mem[DEC_RSTD];
    d->qkv = d->mem[DEC_QKV];
    d->atty = d->mem[DEC_ATTY];
    d->tmp = d->mem[DEC_TMP];
    d->fch = d->mem[DEC_FCH];
    d->gelu = d->mem[DEC_GELU];
    d->att = d->mem[DEC_ATT];
    d->embed32 = d->mem[DEC_EMBED32];
    d->block32 = d->mem[DEC_BLOCK32];
    d->stage16 = d->mem[DEC_STAGE16];
    d->tokens = d->mem[DEC_TOKENS];
    d->logits = d->mem[DEC_LOGITS];
    *out = d;
    return ST_OK;
}

void gpt_decoder_free(gpt_decoder *d) {
    if (!d) return;
    for (int i = 0; i < DEC_BUFFERS; i++) d->be->free(d->be, d->mem[i]);
    kv_cache_free(&d->cache);
    free(d->window);
    free(d);
}

int gpt_decoder_len(const gpt_decoder *d) { return d->cache.len; }
const int32_t *gpt_decoder_window(const gpt_decoder *d) { return d->window; }

/* Block l on N rows x[N,C] at positions pos..pos+N-1, in place: their keys
 * and values go into the cache at those positions, and their attention
 * reads the cache's positions up to each one's. */
static void gpt2_block_forward(gpt_decoder *d, const gpt_block_w *w, int l, int N, int pos) {
    const compute_backend *be = d->be;
    const int C = d->cfg.d_model, NH = d->cfg.n_head, hs = C / NH;
    const size_t NC = (size_t)N * C;
    float *k = kv_cache_k(&d->cache, l), *v = kv_cache_v(&d->cache, l);
    /* x = x + attn(ln_1(x)) */
    be->layernorm_forward(be, d->ln, d->mean, d->rstd, d->x, w->ln1_w, w->ln1_b, N, C);
    be->matmul_forward(be, d->qkv, d->ln, w->qkv_w, w->qkv_b, N, C, 3 * C);
    be->kv_cache_write(be, k, v, d->qkv + C, d->qkv + 2 * C, 3 * C, N, pos, d->max_len, NH, hs);
    be->attention_cached_forward(be, d->atty, d->att, d->qkv, 3 * C, k, v, N, pos, d->max_len, NH, NH, hs);
    be->matmul_forward(be, d->tmp, d->atty, w->attproj_w, w->attproj_b, N, C, C);
    be->residual_forward(be, d->x, d->x, d->tmp, NC);
    /* x = x + mlp(ln_2(x)) */
    be->layernorm_forward(be, d->ln, d->mean, d->rstd, d->x, w->ln2_w, w->ln2_b, N, C);
    be->matmul_forward(be, d->fch, d->ln, w->fc_w, w->fc_b, N, C, 4 * C);
    be->gelu_forward(be, d->gelu, d->fch, (size_t)N * 4 * C);
    be->matmul_forward(be, d->tmp, d->gelu, w->fcproj_w, w->fcproj_b, N, 4 * C, C);
    be->residual_forward(be, d->x, d->x, d->tmp, NC);
}

/* The same for a Llama block (llama_block_forward's ops on one sequence of N
 * rows): the rotations start at the cache position, and the cache holds the
 * NKV rotated key heads and the value heads. */
static void llama_block_step(gpt_decoder *d, const gpt_block_w *w, int l, int N, int pos) {
    const compute_backend *be = d->be;
    const gpt_config *c = &d->cfg;
    const int C = c->d_model, NH = c->n_head, NKV = c->n_kv_head, hs = head_size(c), QKV = qkv_width(c);
    const int F = c->d_ff;
    const size_t NC = (size_t)N * C;
    float *k = kv_cache_k(&d->cache, l), *v = kv_cache_v(&d->cache, l);
    /* x = x + o_proj(attn(rope(q), rope(k), v)) over rmsnorm(x) */
    be->rmsnorm_forward(be, d->ln, d->rstd, d->x, w->ln1_w, N, C, c->norm_eps);
    be->linear_forward(be, d->qkv, d->ln, w->qkv_w, N, C, QKV);
    llama_rotate_qk(be, c, d->qkv, N, N, pos, 0);
    be->kv_cache_write(be, k, v, d->qkv + (size_t)NH * hs, d->qkv + (size_t)(NH + NKV) * hs, QKV, N, pos,
                       d->max_len, NKV, hs);
    be->attention_cached_forward(be, d->atty, d->att, d->qkv, QKV, k, v, N, pos, d->max_len, NH, NKV, hs);
    be->linear_forward(be, d->tmp, d->atty, w->attproj_w, N, C, C);
    be->residual_forward(be, d->x, d->x, d->tmp, NC);
    /* x = x + down(silu(gate) * up) over rmsnorm(x) */
    be->rmsnorm_forward(be, d->ln, d->rstd, d->x, w->ln2_w, N, C, c->norm_eps);
    be->linear_forward(be, d->fch, d->ln, w->fc_w, N, C, 2 * F);
    be->swiglu_forward(be, d->gelu, d->fch, N, F);
    be->linear_forward(be, d->tmp, d->gelu, w->fcproj_w, N, F, C);
    be->residual_forward(be, d->x, d->x, d->tmp, NC);
}

/* tokens[0..N) (host) at positions pos.. through the embedding and every
 * block; returns the embedding unit's weights on the device (a tied head's). */
static float *forward_rows(gpt_decoder *d, gpt_weights w, const int32_t *tokens, int N, int pos) {
    const compute_backend *be = d->be;
    const gpt_config *c = &d->cfg;
    const int32_t *tok = tokens;
    if (!be->unified) {
        be->to_device(be, d->tokens, tokens, (size_t)N * sizeof(int32_t));
        tok = d->tokens;
    }
    float *e = gpt_unit_weights_on(be, c, w, 0, d->embed32, d->stage16);
    gpt_embed_w at = gpt_embed_view(c, e);
    if (at.wpe) at.wpe += (size_t)pos * c->d_model;   /* GPT-2's positions pos.. */
    gpt_embed_forward(be, c, &at, 1, N, tok, d->x);
    for (int l = 0; l < c->n_layer; l++) {
        gpt_block_w bw = gpt_block_view(c, gpt_unit_weights_on(be, c, w, 1 + l, d->block32, d->stage16));
        if (llama(c)) llama_block_step(d, &bw, l, N, pos);
        else gpt2_block_forward(d, &bw, l, N, pos);
    }
    return e;
}

/* The head's weights on the device: the embedding unit's e when tied, else
 * the head unit's, in the buffer the embedding unit is done with. */
static gpt_embed_w head_weights(gpt_decoder *d, gpt_weights w, float *e) {
    const int hu = gpt_head_unit(&d->cfg);
    return gpt_head_view(&d->cfg, hu == 0 ? e : gpt_unit_weights_on(d->be, &d->cfg, w, hu, d->embed32, d->stage16));
}

/* logits[Vp] (host) = norm(x[row]) head^T: the one row whose logits are
 * wanted (the head is wte when tied). */
static void head_forward(gpt_decoder *d, const gpt_embed_w *ew, int row, float *logits) {
    const compute_backend *be = d->be;
    const int C = d->cfg.d_model, Vp = d->cfg.padded_vocab;
    const float *x = d->x + (size_t)row * C;
    if (llama(&d->cfg)) be->rmsnorm_forward(be, d->ln, d->rstd, x, ew->lnf_w, 1, C, d->cfg.norm_eps);
    else be->layernorm_forward(be, d->ln, d->mean, d->rstd, x, ew->lnf_w, ew->lnf_b, 1, C);
    float *out = be->unified ? logits : d->logits;
    be->sgemm(be, 0, 1, 1, Vp, C, 1.0f, d->ln, C, ew->head, C, 0.0f, out, Vp);
    if (!be->unified) be->to_host(be, logits, d->logits, (size_t)Vp * sizeof(float));
}

int gpt_decoder_prefill(gpt_decoder *d, gpt_weights w, const int32_t *tokens, size_t n, float *logits) {
    if (n < 1 || w.precision != d->precision) return 0;
    if (n > (size_t)d->max_len) {
        tokens += n - (size_t)d->max_len;
        n = (size_t)d->max_len;
    }
    memmove(d->window, tokens, n * sizeof(int32_t));   /* tokens may be the window itself (a step's restart) */
    d->cache.len = 0;
    float *e = NULL;
    int rows = 0;
    for (int p = 0; p < (int)n; p += rows) {
        rows = (int)n - p < d->chunk ? (int)n - p : d->chunk;
        e = forward_rows(d, w, d->window + p, rows, p);
        d->cache.len = p + rows;
    }
    gpt_embed_w hw = head_weights(d, w, e);
    head_forward(d, &hw, rows - 1, logits);
    return (int)n;
}

int gpt_decoder_step(gpt_decoder *d, gpt_weights w, int32_t token, float *logits) {
    const int len = d->cache.len;
    if (len < 1 || w.precision != d->precision) return -1;
    if (len == d->max_len) {   /* full: the window starts over from its last tokens and this one */
        const int keep = gpt_decoder_keep(d->max_len);
        memmove(d->window, d->window + len - (keep - 1), (size_t)(keep - 1) * sizeof(int32_t));
        d->window[keep - 1] = token;
        gpt_decoder_prefill(d, w, d->window, (size_t)keep, logits);
        return 1;
    }
    d->window[len] = token;
    float *e = forward_rows(d, w, d->window + len, 1, len);
    d->cache.len = len + 1;
    gpt_embed_w hw = head_weights(d, w, e);
    head_forward(d, &hw, 0, logits);
    return 0;
}
