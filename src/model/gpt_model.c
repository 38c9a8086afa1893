/* gpt_model.c - whole-model forward and backward over one micro-batch, with
 * optional activation recomputation and bf16 compute weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/model.h"

struct gpt_workspace {
    gpt_config cfg;
    int B, T, recompute;
    gpt_precision precision;
    float *xs;        /* [L+1][B,T,C]: each block's input, then the last block's output */
    float *acts;      /* one block's activations (recompute) or all L */
    float *scratch;   /* max(block backward scratch, head scratch) */
    float *dres;      /* [B,T,C] gradient flowing down the residual stream */
    float *embed32;   /* mixed precision: the embedding unit widened to f32 */
    float *block32;   /* mixed precision: one block widened to f32 */
};

static size_t ws_floats(const gpt_config *cfg, int B, int T, int recompute, gpt_precision p,
                        size_t *acts_n, size_t *scratch_n) {
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model;
    size_t a = gpt_block_acts_numel(cfg, B, T) * (recompute ? 1 : (size_t)cfg->n_layer);
    size_t s = gpt_block_scratch_numel(cfg, B, T), h = gpt_head_scratch_numel(cfg, B, T);
    if (h > s) s = h;
    if (acts_n) *acts_n = a;
    if (scratch_n) *scratch_n = s;
    size_t total = ((size_t)cfg->n_layer + 1) * N * C + a + s + N * C;
    if (p == GPT_MIXED_BF16) total += gpt_unit_numel(cfg, 0) + gpt_unit_numel(cfg, 1);
    return total;
}

size_t gpt_workspace_bytes(const gpt_config *cfg, int B, int T, int recompute, gpt_precision precision) {
    return ws_floats(cfg, B, T, recompute, precision, NULL, NULL) * sizeof(float) + sizeof(gpt_workspace);
}

st_status gpt_workspace_create(gpt_workspace **out, const gpt_config *cfg, int B, int T, int recompute,
                               gpt_precision precision, st_error *err) {
    if (B < 1 || T < 1) return st_fail(err, ST_EINVAL, "micro-batch %d x %d must be at least 1 x 1", B, T);
    if (T > cfg->n_ctx)
        return st_fail(err, ST_EINVAL, "sequence length %d is longer than the model's context %d", T, cfg->n_ctx);
    gpt_workspace *ws = calloc(1, sizeof *ws);
    if (!ws) return st_fail(err, ST_ENOMEM, "out of memory allocating a workspace");
    *ws = (gpt_workspace){.cfg = *cfg, .B = B, .T = T, .recompute = recompute, .precision = precision};
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model;
    size_t acts_n, scratch_n;
    size_t total = ws_floats(cfg, B, T, recompute, precision, &acts_n, &scratch_n);
    /* One allocation, carved up; 64-byte aligned for the vector loads. */
    float *m = st_alloc_aligned(64, total * sizeof(float));
    if (!m) {
        char buf[32];
        free(ws);
        return st_fail(err, ST_ENOMEM, "out of memory allocating %s of activations",
                       st_format_bytes((double)total * sizeof(float), buf, sizeof buf));
    }
    ws->xs = m; m += ((size_t)cfg->n_layer + 1) * N * C;
    ws->acts = m; m += acts_n;
    ws->scratch = m; m += scratch_n;
    ws->dres = m; m += N * C;
    if (precision == GPT_MIXED_BF16) {
        ws->embed32 = m; m += gpt_unit_numel(cfg, 0);
        ws->block32 = m;
    }
    *out = ws;
    return ST_OK;
}

void gpt_workspace_free(gpt_workspace *ws) {
    if (!ws) return;
    st_free_aligned(ws->xs);
    free(ws);
}

/* The f32 weights of unit u: a pointer into w.f32, or u widened from bf16. */
static float *unit_weights(gpt_workspace *ws, gpt_weights w, int u) {
    const gpt_config *c = &ws->cfg;
    if (w.precision == GPT_FP32) return (float *)w.f32 + gpt_unit_offset(c, u);
    float *dst = u == 0 ? ws->embed32 : ws->block32;
    gpt_bf16_to_f32(w.bf16 + gpt_unit_offset(c, u), dst, gpt_unit_numel(c, u));
    return dst;
}

static gpt_block_acts acts_of(gpt_workspace *ws, int l, int B, int T) {
    size_t per = gpt_block_acts_numel(&ws->cfg, B, T);
    return gpt_block_acts_view(&ws->cfg, B, T, ws->acts + (ws->recompute ? 0 : (size_t)l * per));
}

/* Runs embedding and every block; leaves the final hidden state in xs[L]
 * and, when the embedding weights are needed next, returns them widened. */
static gpt_embed_w forward_blocks(gpt_workspace *ws, gpt_weights w, const int32_t *tokens, int B, int T) {
    const gpt_config *c = &ws->cfg;
    const size_t NC = (size_t)B * T * c->d_model;
    gpt_embed_w ew = gpt_embed_view(c, unit_weights(ws, w, 0));
    gpt_embed_forward(c, &ew, B, T, tokens, ws->xs);
    for (int l = 0; l < c->n_layer; l++) {
        gpt_block_w bw = gpt_block_view(c, unit_weights(ws, w, 1 + l));
        gpt_block_acts a = acts_of(ws, l, B, T);
        gpt_block_forward(c, &bw, B, T, ws->xs + (size_t)l * NC, ws->xs + (size_t)(l + 1) * NC, &a);
    }
    return ew;   /* in mixed precision embed32 still holds the widened unit 0 */
}

/* The workspace holds micro-batches of up to ws->B x ws->T tokens. */
static int fits(const gpt_workspace *ws, int B, int T) { return B >= 1 && T >= 1 && B <= ws->B && T <= ws->T; }

float gpt_forward(gpt_workspace *ws, gpt_weights w, const int32_t *tokens, const int32_t *targets,
                  int B, int T, float *logits) {
    const gpt_config *c = &ws->cfg;
    if (!fits(ws, B, T)) return NAN;
    gpt_embed_w ew = forward_blocks(ws, w, tokens, B, T);
    const float *xL = ws->xs + (size_t)c->n_layer * B * T * c->d_model;
    if (!targets && !logits) return 0.0f;
    return gpt_head_forward_backward(c, &ew, NULL, B, T, xL, targets, 0.0f, NULL, logits, ws->scratch);
}

float gpt_forward_backward(gpt_workspace *ws, gpt_weights w, float *grads, const int32_t *tokens,
                           const int32_t *targets, int B, int T, float grad_scale) {
    const gpt_config *c = &ws->cfg;
    if (!fits(ws, B, T)) return NAN;
    const size_t NC = (size_t)B * T * c->d_model;
    gpt_embed_w ew = forward_blocks(ws, w, tokens, B, T);
    gpt_embed_w eg = gpt_embed_view(c, grads);
    float loss = gpt_head_forward_backward(c, &ew, &eg, B, T, ws->xs + (size_t)c->n_layer * NC, targets,
                                           grad_scale, ws->dres, NULL, ws->scratch);
    for (int l = c->n_layer - 1; l >= 0; l--) {
        gpt_block_w bw = gpt_block_view(c, unit_weights(ws, w, 1 + l));
        gpt_block_w bg = gpt_block_view(c, grads + gpt_unit_offset(c, 1 + l));
        gpt_block_acts a = acts_of(ws, l, B, T);
        const float *x = ws->xs + (size_t)l * NC;
        if (ws->recompute) /* rebuild this block's activations; its output goes to scratch */
            gpt_block_forward(c, &bw, B, T, x, ws->scratch, &a);
        gpt_block_backward(c, &bw, &bg, B, T, x, &a, ws->dres, ws->dres, ws->scratch);
    }
    gpt_embed_backward(c, &eg, B, T, tokens, ws->dres);
    return loss;
}
