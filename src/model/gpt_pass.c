/* gpt_pass.c - forward and backward of the GPT-2 pieces: embedding, block,
 * head (ln_f + tied LM head + cross-entropy). Shapes: N = B*T rows. */
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "model/kernels.h"
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

void gpt_embed_forward(const gpt_config *cfg, const gpt_embed_w *w, int B, int T,
                       const int32_t *tokens, float *x0) {
    const int C = cfg->d_model;
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *te = w->wte + (size_t)tokens[b * T + t] * C, *pe = w->wpe + (size_t)t * C;
            float *o = x0 + ((size_t)b * T + t) * C;
            for (int i = 0; i < C; i++) o[i] = te[i] + pe[i];
        }
}

void gpt_embed_backward(const gpt_config *cfg, gpt_embed_w *g, int B, int T,
                        const int32_t *tokens, const float *dx0) {
    const int C = cfg->d_model;
    /* Tokens repeat, so rows of dwte have several writers: split the work by
     * columns instead, each thread walking every row in order. */
#pragma omp parallel
    {
        int nt = omp_get_num_threads(), th = omp_get_thread_num();
        int lo = (int)((long)C * th / nt), hi = (int)((long)C * (th + 1) / nt);
        for (int n = 0; n < B * T; n++) {
            float *dte = g->wte + (size_t)tokens[n] * C;
            const float *d = dx0 + (size_t)n * C;
            for (int i = lo; i < hi; i++) dte[i] += d[i];
        }
    }
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *dpe = g->wpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *d = dx0 + ((size_t)b * T + t) * C;
            for (int i = 0; i < C; i++) dpe[i] += d[i];
        }
    }
}

/* --- transformer block ------------------------------------------------------------ */

void gpt_block_forward(const gpt_config *cfg, const gpt_block_w *w, int B, int T,
                       const float *x, float *y, gpt_block_acts *a) {
    const int C = cfg->d_model, N = B * T;
    layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, N, C);
    matmul_forward(a->qkv, a->ln1, w->qkv_w, w->qkv_b, N, C, 3 * C);
    attention_forward(a->atty, a->att, a->qkv, B, T, C, cfg->n_head);
    matmul_forward(y, a->atty, w->attproj_w, w->attproj_b, N, C, C);   /* y as scratch */
    residual_forward(a->res2, x, y, (size_t)N * C);
    layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2_w, w->ln2_b, N, C);
    matmul_forward(a->fch, a->ln2, w->fc_w, w->fc_b, N, C, 4 * C);
    gelu_forward(a->fch_gelu, a->fch, (size_t)N * 4 * C);
    matmul_forward(y, a->fch_gelu, w->fcproj_w, w->fcproj_b, N, 4 * C, C);
    residual_forward(y, a->res2, y, (size_t)N * C);
}

void gpt_block_backward(const gpt_config *cfg, const gpt_block_w *w, gpt_block_w *g, int B, int T,
                        const float *x, const gpt_block_acts *a, const float *dy, float *dx,
                        float *scratch) {
    const int C = cfg->d_model, N = B * T;
    const size_t NC = (size_t)N * C;
    float *dfch = scratch, *dln2 = dfch + 4 * NC, *dres2 = dln2 + NC, *datty = dres2 + NC;
    float *dqkv = datty + NC, *dln1 = dqkv + 3 * NC, *datt = dln1 + NC;

    /* MLP: y = res2 + gelu(ln2 @ fc_w + fc_b) @ fcproj_w + fcproj_b */
    matmul_backward(dfch, g->fcproj_w, g->fcproj_b, dy, a->fch_gelu, w->fcproj_w, N, 4 * C, C);
    gelu_backward(dfch, a->fch, 4 * NC);
    matmul_backward(dln2, g->fc_w, g->fc_b, dfch, a->ln2, w->fc_w, N, C, 4 * C);
    memcpy(dres2, dy, NC * sizeof(float));   /* after this, dy is not read: dx may alias it */
    layernorm_backward(dres2, g->ln2_w, g->ln2_b, dln2, a->res2, w->ln2_w, a->ln2_mean, a->ln2_rstd, N, C);

    /* attention: res2 = x + attn(ln1) @ attproj_w + attproj_b */
    matmul_backward(datty, g->attproj_w, g->attproj_b, dres2, a->atty, w->attproj_w, N, C, C);
    attention_backward(dqkv, datt, datty, a->qkv, a->att, B, T, C, cfg->n_head);
    matmul_backward(dln1, g->qkv_w, g->qkv_b, dqkv, a->ln1, w->qkv_w, N, C, 3 * C);
    if (dx != dres2) memcpy(dx, dres2, NC * sizeof(float));
    layernorm_backward(dx, g->ln1_w, g->ln1_b, dln1, x, w->ln1_w, a->ln1_mean, a->ln1_rstd, N, C);
}

/* --- head -------------------------------------------------------------------------- */

float gpt_head_forward_backward(const gpt_config *cfg, const gpt_embed_w *w, gpt_embed_w *g,
                                int B, int T, const float *x, const int32_t *targets,
                                float grad_scale, float *dx, float *logits, float *scratch) {
    const int C = cfg->d_model, N = B * T, V = cfg->vocab_size, Vp = cfg->padded_vocab;
    const int chunk = N < HEAD_CHUNK ? N : HEAD_CHUNK;
    float *lnf = scratch, *dlnf = lnf + (size_t)N * C, *mean = dlnf + (size_t)N * C;
    float *rstd = mean + N, *losses = rstd + N, *chunk_logits = losses + N;
    /* Without targets there is no loss: its gradient is zero. */
    const int backward = dx != NULL && targets != NULL;
    if (dx && !targets) memset(dx, 0, (size_t)N * C * sizeof(float));
    /* d(mean loss * grad_scale)/dlogit = (softmax - onehot) * grad_scale / N */
    const float dscale = backward ? grad_scale / (float)N : 0.0f;

    layernorm_forward(lnf, mean, rstd, x, w->lnf_w, w->lnf_b, N, C);
    for (int r0 = 0; r0 < N; r0 += chunk) {
        const int rows = N - r0 < chunk ? N - r0 : chunk;
        float *lg = logits ? logits + (size_t)r0 * Vp : chunk_logits;
        const float *h = lnf + (size_t)r0 * C;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, Vp, C, 1.0f, h, C, w->wte, C, 0.0f, lg, Vp);
        if (!targets) continue;   /* logits wanted, no loss */
        crossentropy_softmax(lg, losses + r0, targets + r0, rows, V, Vp, dscale);
        if (!backward) continue;
        /* A zero scale leaves the logits in place: the gradient is zero. */
        if (dscale == 0.0f) memset(lg, 0, (size_t)rows * Vp * sizeof(float));
        /* dlnf = dlogits @ wte ; dwte += dlogits^T @ lnf */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, C, Vp, 1.0f, lg, Vp, w->wte, C, 0.0f,
                    dlnf + (size_t)r0 * C, C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Vp, C, rows, 1.0f, lg, Vp, h, C, 1.0f, g->wte, C);
    }
    if (backward) {
        memset(dx, 0, (size_t)N * C * sizeof(float));
        layernorm_backward(dx, g->lnf_w, g->lnf_b, dlnf, x, w->lnf_w, mean, rstd, N, C);
    }
    if (!targets) return 0.0f;
    double sum = 0.0;
    for (int n = 0; n < N; n++) sum += losses[n];
    return (float)(sum / N);
}

/* --- precision conversion -------------------------------------------------------------- */

void gpt_bf16_to_f32(const st_bf16 *src, float *dst, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = st_bf16_to_f32(src[i]);
}

void gpt_f32_to_bf16(const float *src, st_bf16 *dst, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = st_f32_to_bf16(src[i]);
}
