/* gpt_pass.c - forward and backward of the GPT-2 pieces: embedding, block,
 * head (ln_f + tied LM head + cross-entropy), each a sequence of a compute
 * backend's ops on device memory (strata/backend.h). Shapes: N = B*T rows. */
#include "strata/backend.h"
#include "strata/model.h"

/* Rows of logits computed at once in the head: bounds its scratch to
 * HEAD_CHUNK * Vp floats (200 MB at GPT-2's vocabulary) whatever B*T is; chunks
 * of 1024 rows keep the three head products near the sgemm peak. */
#define HEAD_CHUNK GPT_HEAD_CHUNK_ROWS

/* --- activations ------------------------------------------------------------- */

size_t gpt_block_acts_numel(const gpt_config *cfg, int B, int T) {
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model;
    return N * C * 5 + N * 4 + N * 3 * C + (size_t)B * cfg->n_head * T * T + N * 4 * C * 2;
}

gpt_block_acts gpt_block_acts_view(const gpt_config *cfg, int B, int T, float *m) {
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model;
    gpt_block_acts a;
    a.ln1 = m; m += N * C;
    a.ln1_mean = m; m += N;
    a.ln1_rstd = m; m += N;
    a.qkv = m; m += N * 3 * C;
    a.att = m; m += (size_t)B * cfg->n_head * T * T;
    a.atty = m; m += N * C;
    a.res2 = m; m += N * C;
    a.ln2 = m; m += N * C;
    a.ln2_mean = m; m += N;
    a.ln2_rstd = m; m += N;
    a.fch = m; m += N * 4 * C;
    a.fch_gelu = m;
    return a;
}

size_t gpt_block_scratch_numel(const gpt_config *cfg, int B, int T) {
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model;
    /* dfch [N,4C], dln2 [N,C], dres2 [N,C], datty [N,C], dqkv [N,3C], dln1 [N,C], datt [B,NH,T,T] */
    return N * 11 * C + (size_t)B * cfg->n_head * T * T;
}

size_t gpt_head_scratch_numel(const gpt_config *cfg, int B, int T) {
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model;
    const size_t chunk = N < HEAD_CHUNK ? N : HEAD_CHUNK;
    /* lnf [N,C], dlnf [N,C], mean, rstd, losses [N], logits chunk [chunk, Vp] */
    return 2 * N * C + 3 * N + chunk * (size_t)cfg->padded_vocab;
}

/* --- embedding ------------------------------------------------------------------ */

void gpt_embed_forward(const compute_backend *be, const gpt_config *cfg, const gpt_embed_w *w, int B, int T,
                       const int32_t *tokens, float *x0) {
    be->embed_forward(be, x0, tokens, w->wte, w->wpe, B, T, cfg->d_model, cfg->padded_vocab);
}

void gpt_embed_backward(const compute_backend *be, const gpt_config *cfg, gpt_embed_w *g, int B, int T,
                        const int32_t *tokens, const float *dx0) {
    be->embed_backward(be, g->wte, g->wpe, tokens, dx0, B, T, cfg->d_model, cfg->padded_vocab);
}

/* --- transformer block ------------------------------------------------------------ */

void gpt_block_forward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, int B, int T,
                       const float *x, float *y, gpt_block_acts *a) {
    const int C = cfg->d_model, N = B * T;
    be->layernorm_forward(be, a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, N, C);
    be->matmul_forward(be, a->qkv, a->ln1, w->qkv_w, w->qkv_b, N, C, 3 * C);
    be->attention_forward(be, a->atty, a->att, a->qkv, B, T, C, cfg->n_head, cfg->n_head);
    be->matmul_forward(be, y, a->atty, w->attproj_w, w->attproj_b, N, C, C);   /* y as scratch */
    be->residual_forward(be, a->res2, x, y, (size_t)N * C);
    be->layernorm_forward(be, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2_w, w->ln2_b, N, C);
    be->matmul_forward(be, a->fch, a->ln2, w->fc_w, w->fc_b, N, C, 4 * C);
    be->gelu_forward(be, a->fch_gelu, a->fch, (size_t)N * 4 * C);
    be->matmul_forward(be, y, a->fch_gelu, w->fcproj_w, w->fcproj_b, N, 4 * C, C);
    be->residual_forward(be, y, a->res2, y, (size_t)N * C);
}

void gpt_block_backward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, gpt_block_w *g,
                        int B, int T, const float *x, const gpt_block_acts *a, const float *dy, float *dx,
                        float *scratch) {
    const int C = cfg->d_model, N = B * T;
    const size_t NC = (size_t)N * C;
    float *dfch = scratch, *dln2 = dfch + 4 * NC, *dres2 = dln2 + NC, *datty = dres2 + NC;
    float *dqkv = datty + NC, *dln1 = dqkv + 3 * NC, *datt = dln1 + NC;

    /* MLP: y = res2 + gelu(ln2 @ fc_w + fc_b) @ fcproj_w + fcproj_b */
    be->matmul_backward(be, dfch, g->fcproj_w, g->fcproj_b, dy, a->fch_gelu, w->fcproj_w, N, 4 * C, C);
    be->gelu_backward(be, dfch, a->fch, 4 * NC);
    be->matmul_backward(be, dln2, g->fc_w, g->fc_b, dfch, a->ln2, w->fc_w, N, C, 4 * C);
    be->copy(be, dres2, dy, NC * sizeof(float));   /* after this, dy is not read: dx may alias it */
    be->layernorm_backward(be, dres2, g->ln2_w, g->ln2_b, dln2, a->res2, w->ln2_w, a->ln2_mean, a->ln2_rstd, N, C);

    /* attention: res2 = x + attn(ln1) @ attproj_w + attproj_b */
    be->matmul_backward(be, datty, g->attproj_w, g->attproj_b, dres2, a->atty, w->attproj_w, N, C, C);
    be->attention_backward(be, dqkv, datt, datty, a->qkv, a->att, B, T, C, cfg->n_head, cfg->n_head);
    be->matmul_backward(be, dln1, g->qkv_w, g->qkv_b, dqkv, a->ln1, w->qkv_w, N, C, 3 * C);
    be->copy(be, dx, dres2, NC * sizeof(float));
    be->layernorm_backward(be, dx, g->ln1_w, g->ln1_b, dln1, x, w->ln1_w, a->ln1_mean, a->ln1_rstd, N, C);
}

/* --- head -------------------------------------------------------------------------- */

float gpt_head_forward_backward(const compute_backend *be, const gpt_config *cfg, const gpt_embed_w *w,
                                gpt_embed_w *g, int B, int T, const float *x, const int32_t *targets,
                                float grad_scale, float *dx, float *logits, float *scratch) {
    const int C = cfg->d_model, N = B * T, V = cfg->vocab_size, Vp = cfg->padded_vocab;
    const int chunk = N < HEAD_CHUNK ? N : HEAD_CHUNK;
    float *lnf = scratch, *dlnf = lnf + (size_t)N * C, *mean = dlnf + (size_t)N * C;
    float *rstd = mean + N, *losses = rstd + N, *chunk_logits = losses + N;
    /* Without targets there is no loss: its gradient is zero. */
    const int backward = dx != NULL && targets != NULL;
    if (dx && !targets) be->memset(be, dx, 0, (size_t)N * C * sizeof(float));
    /* d(mean loss * grad_scale)/dlogit = (softmax - onehot) * grad_scale / N */
    const float dscale = backward ? grad_scale / (float)N : 0.0f;
    /* The caller's logits are host memory: on a unified backend that is
     * device memory, so the chunks are computed in place; otherwise each
     * chunk is computed in scratch and copied out. */
    const int logits_in_place = logits && be->unified;

    be->layernorm_forward(be, lnf, mean, rstd, x, w->lnf_w, w->lnf_b, N, C);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int rows = N - r0 < chunk ? N - r0 : chunk;
        float *lg = logits_in_place ? logits + (size_t)r0 * Vp : chunk_logits;
        const float *h = lnf + (size_t)r0 * C;
        be->sgemm(be, 0, 1, rows, Vp, C, 1.0f, h, C, w->wte, C, 0.0f, lg, Vp);
        if (logits && !logits_in_place)
            be->to_host(be, logits + (size_t)r0 * Vp, lg, (size_t)rows * Vp * sizeof(float));
        if (!targets) continue;   /* logits wanted, no loss */
        be->crossentropy_softmax(be, lg, losses + r0, targets + r0, rows, V, Vp, dscale);
        if (!backward) continue;
        /* A zero scale leaves the logits in place: the gradient is zero. */
        if (dscale == 0.0f) be->memset(be, lg, 0, (size_t)rows * Vp * sizeof(float));
        /* dlnf = dlogits @ wte ; dwte += dlogits^T @ lnf */
        be->sgemm(be, 0, 0, rows, C, Vp, 1.0f, lg, Vp, w->wte, C, 0.0f, dlnf + (size_t)r0 * C, C);
        be->sgemm(be, 1, 0, Vp, C, rows, 1.0f, lg, Vp, h, C, 1.0f, g->wte, C);
    }
    if (backward) {
        be->memset(be, dx, 0, (size_t)N * C * sizeof(float));
        be->layernorm_backward(be, dx, g->lnf_w, g->lnf_b, dlnf, x, w->lnf_w, mean, rstd, N, C);
    }
    if (!targets) return 0.0f;
    return (float)(be->sum(be, losses, N) / N);
}
