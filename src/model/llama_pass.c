/* llama_pass.c - forward and backward of a Llama block (Hugging Face's
 * LlamaDecoderLayer), as a compute backend's ops on device memory. The block
 * reuses GPT-2's views and activation names (strata/model.h says which
 * field holds what); gpt_pass.c sends Llama configs here. N = B*T rows,
 * hs = C / NH, QKV = (NH + 2 NKV) hs, F = d_ff. */
#include "model/model_internal.h"

rope_params llama_rope_params(const gpt_config *cfg) {
    const gpt_rope_scaling *r = &cfg->rope_scaling;
    return (rope_params){.theta = cfg->rope_theta, .factor = r->factor, .low_freq_factor = r->low_freq_factor,
                         .high_freq_factor = r->high_freq_factor, .original_context = (float)r->original_context};
}

void llama_rotate_qk(const compute_backend *be, const gpt_config *cfg, float *qkv, int N, int T, int pos0,
                     int backward) {
    const int hs = cfg->d_model / cfg->n_head, QKV = (cfg->n_head + 2 * cfg->n_kv_head) * hs;
    const rope_params rp = llama_rope_params(cfg);
    void (*rope)(const compute_backend *, float *, int, int, int, int, int, int, rope_params) =
        backward ? be->rope_backward : be->rope_forward;
    rope(be, qkv, N, T, cfg->n_head, hs, QKV, pos0, rp);
    rope(be, qkv + (size_t)cfg->n_head * hs, N, T, cfg->n_kv_head, hs, QKV, pos0, rp);
}

void llama_block_forward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, int B, int T,
                         const float *x, float *y, gpt_block_acts *a) {
    const int C = cfg->d_model, N = B * T, F = cfg->d_ff, hs = C / cfg->n_head;
    const int QKV = (cfg->n_head + 2 * cfg->n_kv_head) * hs;
    /* attention: res2 = x + o_proj(attn(rope(q), rope(k), v)) over rmsnorm(x) */
    be->rmsnorm_forward(be, a->ln1, a->ln1_rstd, x, w->ln1_w, N, C, cfg->norm_eps);
    be->linear_forward(be, a->qkv, a->ln1, w->qkv_w, N, C, QKV);
    llama_rotate_qk(be, cfg, a->qkv, N, T, 0, 0);
    be->attention_forward(be, a->atty, a->att, a->qkv, B, T, C, cfg->n_head, cfg->n_kv_head);
    be->linear_forward(be, y, a->atty, w->attproj_w, N, C, C);   /* y as scratch */
    be->residual_forward(be, a->res2, x, y, (size_t)N * C);
    /* MLP: y = res2 + down(silu(gate) * up) over rmsnorm(res2) */
    be->rmsnorm_forward(be, a->ln2, a->ln2_rstd, a->res2, w->ln2_w, N, C, cfg->norm_eps);
    be->linear_forward(be, a->fch, a->ln2, w->fc_w, N, C, 2 * F);
    be->swiglu_forward(be, a->fch_gelu, a->fch, N, F);
    be->linear_forward(be, y, a->fch_gelu, w->fcproj_w, N, F, C);
    be->residual_forward(be, y, a->res2, y, (size_t)N * C);
}

size_t llama_block_scratch_numel(const gpt_config *cfg, int B, int T) {
    const size_t N = (size_t)B * T, C = (size_t)cfg->d_model, F = (size_t)cfg->d_ff, hs = C / (size_t)cfg->n_head;
    const size_t QKV = ((size_t)cfg->n_head + 2 * (size_t)cfg->n_kv_head) * hs;
    /* dsw [N,F], dfch [N,2F], dln2, dres2, datty, dln1 [N,C], dqkv [N,QKV], datt [B,NH,T,T] */
    return N * 3 * F + N * 4 * C + N * QKV + (size_t)B * cfg->n_head * T * T;
}

void llama_block_backward(const compute_backend *be, const gpt_config *cfg, const gpt_block_w *w, gpt_block_w *g,
                          int B, int T, const float *x, const gpt_block_acts *a, const float *dy, float *dx,
                          float *scratch) {
    const int C = cfg->d_model, N = B * T, F = cfg->d_ff, hs = C / cfg->n_head;
    const int QKV = (cfg->n_head + 2 * cfg->n_kv_head) * hs;
    const size_t NC = (size_t)N * C;
    float *dsw = scratch, *dfch = dsw + (size_t)N * F, *dln2 = dfch + (size_t)N * 2 * F, *dres2 = dln2 + NC;
    float *datty = dres2 + NC, *dln1 = datty + NC, *dqkv = dln1 + NC, *datt = dqkv + (size_t)N * QKV;

    /* MLP */
    be->linear_backward(be, dsw, g->fcproj_w, dy, a->fch_gelu, w->fcproj_w, N, F, C);
    be->swiglu_backward(be, dfch, dsw, a->fch, N, F);
    be->linear_backward(be, dln2, g->fc_w, dfch, a->ln2, w->fc_w, N, C, 2 * F);
    be->copy(be, dres2, dy, NC * sizeof(float));   /* after this, dy is not read: dx may alias it */
    be->rmsnorm_backward(be, dres2, g->ln2_w, dln2, a->res2, w->ln2_w, a->ln2_rstd, N, C);

    /* attention; the rotation is undone on the q and k gradients */
    be->linear_backward(be, datty, g->attproj_w, dres2, a->atty, w->attproj_w, N, C, C);
    be->attention_backward(be, dqkv, datt, datty, a->qkv, a->att, B, T, C, cfg->n_head, cfg->n_kv_head);
    llama_rotate_qk(be, cfg, dqkv, N, T, 0, 1);
    be->linear_backward(be, dln1, g->qkv_w, dqkv, a->ln1, w->qkv_w, N, C, QKV);
    be->copy(be, dx, dres2, NC * sizeof(float));
    be->rmsnorm_backward(be, dx, g->ln1_w, dln1, x, w->ln1_w, a->ln1_rstd, N, C);
}
