/* gpt_model.c - whole-model forward and backward over one micro-batch, with
 * optional activation recomputation and bf16 compute weights, on any compute
 * backend. The caller's weights, gradients, tokens and logits are host
 * memory; the workspace is device memory. On a unified backend the host
 * arrays are used in place, as device memory; otherwise they cross with
 * to_device/to_host one unit at a time. */
#include <math.h>
#include <stdlib.h>

#include "strata/backend.h"
#include "strata/model.h"
#include "model/model_internal.h"

/* The workspace's device buffers. The last five exist only on a backend
 * that is not unified: a unified one uses the caller's host arrays. */
enum ws_buffer {
    WS_XS,           /* [L+1][B,T,C]: each block's input, then the last block's output */
    WS_ACTS,         /* one block's activations (recompute) or all L */
    WS_SCRATCH,      /* max(block backward scratch, head scratch) */
    WS_DRES,         /* [B,T,C] gradient flowing down the residual stream */
    WS_EMBED32,      /* the embedding or head unit's f32 weights (mixed precision: widened; not unified: copied in) */
    WS_BLOCK32,      /* one block's f32 weights, the same way */
    WS_STAGE16,      /* mixed precision, not unified: a unit's bf16 weights as copied in, before widening */
    WS_EMBED_GRADS,  /* not unified: the head unit's gradients, then the embedding unit's (tied: one unit,
                        from the head to the embedding's backward) */
    WS_BLOCK_GRADS,  /* not unified: one block's gradients during its backward */
    WS_TOKENS,       /* not unified: [B,T] input ids */
    WS_TARGETS,      /* not unified: [B,T] target ids */
    WS_BUFFERS
};

struct gpt_workspace {
    const compute_backend *be;
    gpt_config cfg;
    int B, T, recompute;
    gpt_precision precision;
    void *mem[WS_BUFFERS];   /* device allocations, NULL where not needed; typed below */
    float *xs, *acts, *scratch, *dres, *embed32, *block32, *embed_grads, *block_grads;
    st_bf16 *stage16;
    int32_t *tokens, *targets;
};

static void ws_buffer_bytes(const compute_backend *be, const gpt_config *cfg, int B, int T, int recompute,
                            gpt_precision p, size_t bytes[WS_BUFFERS]) {
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model, f = sizeof(float);
    /* the two end units share their buffers: an untied head is done with them before the embedding's backward */
    const size_t embed_n = gpt_end_units_numel(cfg), block_n = gpt_unit_numel(cfg, 1);
    size_t s = gpt_block_scratch_numel(cfg, B, T), h = gpt_head_scratch_numel(cfg, B, T);
    if (h > s) s = h;
    const int mirror = !be->unified, mixed = p == GPT_MIXED_BF16;
    bytes[WS_XS] = ((size_t)cfg->n_layer + 1) * N * C * f;
    bytes[WS_ACTS] = gpt_block_acts_numel(cfg, B, T) * (recompute ? 1 : (size_t)cfg->n_layer) * f;
    bytes[WS_SCRATCH] = s * f;
    bytes[WS_DRES] = N * C * f;
    bytes[WS_EMBED32] = mixed || mirror ? embed_n * f : 0;
    bytes[WS_BLOCK32] = mixed || mirror ? block_n * f : 0;
    bytes[WS_STAGE16] = mixed && mirror ? (embed_n > block_n ? embed_n : block_n) * sizeof(st_bf16) : 0;
    bytes[WS_EMBED_GRADS] = mirror ? embed_n * f : 0;
    bytes[WS_BLOCK_GRADS] = mirror ? block_n * f : 0;
    bytes[WS_TOKENS] = bytes[WS_TARGETS] = mirror ? N * sizeof(int32_t) : 0;
}

size_t gpt_workspace_bytes(const compute_backend *be, const gpt_config *cfg, int B, int T, int recompute,
                           gpt_precision precision) {
    size_t bytes[WS_BUFFERS], total = sizeof(gpt_workspace);
    ws_buffer_bytes(be, cfg, B, T, recompute, precision, bytes);
    for (int i = 0; i < WS_BUFFERS; i++) total += bytes[i];
    return total;
}

st_status gpt_workspace_create(gpt_workspace **out, const compute_backend *be, const gpt_config *cfg, int B, int T,
                               int recompute, gpt_precision precision, st_error *err) {
    if (B < 1 || T < 1) return st_fail(err, ST_EINVAL, "micro-batch %d x %d must be at least 1 x 1", B, T);
    if (T > cfg->n_ctx)
        return st_fail(err, ST_EINVAL, "sequence length %d is longer than the model's context %d", T, cfg->n_ctx);
    gpt_workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return st_fail(err, ST_ENOMEM, "out of memory allocating a workspace");
    *ws = (gpt_workspace){.be = be, .cfg = *cfg, .B = B, .T = T, .recompute = recompute, .precision = precision};
    size_t bytes[WS_BUFFERS];
    ws_buffer_bytes(be, cfg, B, T, recompute, precision, bytes);
    for (int i = 0; i < WS_BUFFERS; i++) {
        if (bytes[i] == 0 || (ws->mem[i] = be->alloc(be, bytes[i])) != NULL) continue;
        char buf[32];
        gpt_workspace_free(ws);
        return st_fail(err, ST_ENOMEM, "out of memory allocating %s of activations on the %s backend",
                       st_format_bytes((double)gpt_workspace_bytes(be, cfg, B, T, recompute, precision), buf,
                                       sizeof buf), be->name);
    }
    ws->xs = ws->mem[WS_XS];
    ws->acts = ws->mem[WS_ACTS];
    ws->scratch = ws->mem[WS_SCRATCH];
    ws->dres = ws->mem[WS_DRES];
    ws->embed32 = ws->mem[WS_EMBED32];
    ws->block32 = ws->mem[WS_BLOCK32];
    ws->stage16 = ws->mem[WS_STAGE16];
    ws->embed_grads = ws->mem[WS_EMBED_GRADS];
    ws->block_grads = ws->mem[WS_BLOCK_GRADS];
    ws->tokens = ws->mem[WS_TOKENS];
    ws->targets = ws->mem[WS_TARGETS];
    *out = ws;
    return ST_OK;
}

void gpt_workspace_free(gpt_workspace *ws) {
    if (!ws) return;
    for (int i = 0; i < WS_BUFFERS; i++) ws->be->free(ws->be, ws->mem[i]);
    free(ws);
}

float *gpt_unit_weights_on(const compute_backend *be, const gpt_config *c, gpt_weights w, int u, float *dst,
                           st_bf16 *stage16) {
    const size_t off = gpt_unit_offset(c, u), n = gpt_unit_numel(c, u);
    if (w.precision == GPT_FP32) {
        if (be->unified) return (float *)w.f32 + off;
        be->to_device(be, dst, w.f32 + off, n * sizeof(float));
        return dst;
    }
    const st_bf16 *src = w.bf16 + off;
    if (!be->unified) {
        be->to_device(be, stage16, src, n * sizeof(st_bf16));
        src = stage16;
    }
    be->bf16_to_f32(be, dst, src, n);
    return dst;
}

static float *unit_weights(gpt_workspace *ws, gpt_weights w, int u) {
    return gpt_unit_weights_on(ws->be, &ws->cfg, w, u, gpt_unit_is_block(&ws->cfg, u) ? ws->block32 : ws->embed32,
                               ws->stage16);
}

/* Unit u's gradients on the device, holding the caller's values so far: on
 * a unified backend the host array itself (the copy onto itself is free). */
static float *grads_to_device(gpt_workspace *ws, float *grads, int u) {
    const compute_backend *be = ws->be;
    float *host = grads + gpt_unit_offset(&ws->cfg, u);
    float *dev = be->unified ? host : gpt_unit_is_block(&ws->cfg, u) ? ws->block_grads : ws->embed_grads;
    be->to_device(be, dev, host, gpt_unit_numel(&ws->cfg, u) * sizeof(float));
    return dev;
}

static void grads_to_host(gpt_workspace *ws, float *grads, int u, const float *dev) {
    ws->be->to_host(ws->be, grads + gpt_unit_offset(&ws->cfg, u), dev, gpt_unit_numel(&ws->cfg, u) * sizeof(float));
}

/* Token ids on the device: the caller's on a unified backend, else copied into dev. */
static const int32_t *ids_to_device(gpt_workspace *ws, int32_t *dev, const int32_t *ids, int B, int T) {
    if (!ids || ws->be->unified) return ids;
    ws->be->to_device(ws->be, dev, ids, (size_t)B * T * sizeof(int32_t));
    return dev;
}

static gpt_block_acts acts_of(gpt_workspace *ws, int l, int B, int T) {
    size_t per = gpt_block_acts_numel(&ws->cfg, B, T);
    return gpt_block_acts_view(&ws->cfg, B, T, ws->acts + (ws->recompute ? 0 : (size_t)l * per));
}

/* Runs embedding and every block on device tokens; leaves the final hidden
 * state in xs[L] and returns the head unit's weights on the device: when
 * tied the embedding unit's, which stay there (embed32, or the caller's
 * array) for the head. */
static gpt_embed_w forward_blocks(gpt_workspace *ws, gpt_weights w, const int32_t *tokens, int B, int T) {
    const compute_backend *be = ws->be;
    const gpt_config *c = &ws->cfg;
    const size_t NC = (size_t)B * T * c->d_model;
    float *e = unit_weights(ws, w, 0);
    gpt_embed_w ew = gpt_embed_view(c, e);
    gpt_embed_forward(be, c, &ew, B, T, tokens, ws->xs);
    for (int l = 0; l < c->n_layer; l++) {
        gpt_block_w bw = gpt_block_view(c, unit_weights(ws, w, 1 + l));
        gpt_block_acts a = acts_of(ws, l, B, T);
        gpt_block_forward(be, c, &bw, B, T, ws->xs + (size_t)l * NC, ws->xs + (size_t)(l + 1) * NC, &a);
    }
    const int hu = gpt_head_unit(c);
    return gpt_head_view(c, hu == 0 ? e : unit_weights(ws, w, hu));
}

/* The workspace holds micro-batches of up to ws->B x ws->T tokens. */
static int fits(const gpt_workspace *ws, int B, int T) { return B >= 1 && T >= 1 && B <= ws->B && T <= ws->T; }

float gpt_forward(gpt_workspace *ws, gpt_weights w, const int32_t *tokens, const int32_t *targets,
                  int B, int T, float *logits) {
    const gpt_config *c = &ws->cfg;
    if (!fits(ws, B, T)) return NAN;
    gpt_embed_w hw = forward_blocks(ws, w, ids_to_device(ws, ws->tokens, tokens, B, T), B, T);
    const float *xL = ws->xs + (size_t)c->n_layer * B * T * c->d_model;
    if (!targets && !logits) return 0.0f;
    return gpt_head_forward_backward(ws->be, c, &hw, NULL, B, T, xL, ids_to_device(ws, ws->targets, targets, B, T),
                                     0.0f, NULL, logits, ws->scratch);
}

float gpt_forward_backward(gpt_workspace *ws, gpt_weights w, float *grads, const int32_t *tokens,
                           const int32_t *targets, int B, int T, float grad_scale) {
    const compute_backend *be = ws->be;
    const gpt_config *c = &ws->cfg;
    if (!fits(ws, B, T)) return NAN;
    const size_t NC = (size_t)B * T * c->d_model;
    const int32_t *tok = ids_to_device(ws, ws->tokens, tokens, B, T);
    gpt_embed_w hw = forward_blocks(ws, w, tok, B, T);
    /* the head unit's gradients; tied, they are the embedding unit's, which
     * collect the head's terms now and the embedding's at the end */
    const int hu = gpt_head_unit(c);
    float *gh = grads_to_device(ws, grads, hu);
    gpt_embed_w hg = gpt_head_view(c, gh);
    float loss = gpt_head_forward_backward(be, c, &hw, &hg, B, T, ws->xs + (size_t)c->n_layer * NC,
                                           ids_to_device(ws, ws->targets, targets, B, T), grad_scale, ws->dres,
                                           NULL, ws->scratch);
    if (hu != 0) grads_to_host(ws, grads, hu, gh);
    for (int l = c->n_layer - 1; l >= 0; l--) {
        gpt_block_w bw = gpt_block_view(c, unit_weights(ws, w, 1 + l));
        float *gl = grads_to_device(ws, grads, 1 + l);
        gpt_block_w bg = gpt_block_view(c, gl);
        gpt_block_acts a = acts_of(ws, l, B, T);
        const float *x = ws->xs + (size_t)l * NC;
        if (ws->recompute) /* rebuild this block's activations; its output goes to scratch */
            gpt_block_forward(be, c, &bw, B, T, x, ws->scratch, &a);
        gpt_block_backward(be, c, &bw, &bg, B, T, x, &a, ws->dres, ws->dres, ws->scratch);
        grads_to_host(ws, grads, 1 + l, gl);
    }
    float *g0 = hu == 0 ? gh : grads_to_device(ws, grads, 0);
    gpt_embed_w eg = gpt_embed_view(c, g0);
    gpt_embed_backward(be, c, &eg, B, T, tok, ws->dres);
    grads_to_host(ws, grads, 0, g0);
    return loss;
}
