/* trainer.c - the in-memory trainer (see strata/train.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "strata/train.h"

struct trainer {
    train_config tc;
    size_t n;              /* gpt_num_params */
    float *params;         /* fp32 master weights */
    float *grads;
    float *m, *v;          /* Adam moments */
    st_bf16 *params16;     /* compute copy in mixed precision, else NULL */
    gpt_workspace *ws;
    int32_t *inputs, *targets;   /* [B, T] of the current micro-batch */
    long step;
};

train_config train_config_defaults(void) {
    train_config tc = {0};
    tc.precision = GPT_FP32;
    tc.micro_batches = 1;
    tc.recompute = 1;
    tc.lr = (lr_schedule){.max_lr = 6e-4f, .min_lr = 6e-5f, .warmup = 10, .total = 100};
    tc.adam = adamw_defaults();
    tc.clip = 1.0f;
    tc.seed = 1337;
    return tc;
}

st_status train_config_check(train_config *tc, st_error *err) {
    st_status s = gpt_config_check(&tc->model, err);
    if (s != ST_OK) return s;
    if (tc->B < 1) return st_fail(err, ST_EINVAL, "micro-batch size %d must be at least 1", tc->B);
    if (tc->T < 1) return st_fail(err, ST_EINVAL, "sequence length %d must be at least 1", tc->T);
    if (tc->T > tc->model.n_ctx)
        return st_fail(err, ST_EINVAL, "sequence length %d is longer than the model's context %d", tc->T,
                       tc->model.n_ctx);
    if (tc->micro_batches < 1) return st_fail(err, ST_EINVAL, "gradient accumulation %d must be at least 1", tc->micro_batches);
    if (!(tc->clip >= 0) || !isfinite(tc->clip))
        return st_fail(err, ST_EINVAL, "clip %g must be a finite number, not negative", tc->clip);
    const adamw_hparams *h = &tc->adam;
    if (!(h->beta1 >= 0 && h->beta1 < 1) || !(h->beta2 >= 0 && h->beta2 < 1))
        return st_fail(err, ST_EINVAL, "AdamW betas (%g, %g) must be in [0, 1)", h->beta1, h->beta2);
    if (!(h->eps >= 0) || !isfinite(h->eps) || !(h->weight_decay >= 0) || !isfinite(h->weight_decay))
        return st_fail(err, ST_EINVAL, "AdamW eps %g and weight decay %g must be finite and not negative", h->eps,
                       h->weight_decay);
    if (tc->precision != GPT_FP32 && tc->precision != GPT_MIXED_BF16)
        return st_fail(err, ST_EINVAL, "unknown precision %d", (int)tc->precision);
    return lr_schedule_check(&tc->lr, err);
}

const compute_backend *train_config_backend(const train_config *tc) {
    return tc->backend ? tc->backend : compute_backend_cpu();
}

size_t trainer_memory_bytes(const train_config *tc) {
    size_t n = gpt_num_params(&tc->model);
    size_t bytes = n * 4 * sizeof(float) + (tc->precision == GPT_MIXED_BF16 ? n * sizeof(st_bf16) : 0);
    bytes += gpt_workspace_bytes(train_config_backend(tc), &tc->model, tc->B, tc->T, tc->recompute, tc->precision);
    return bytes + 2 * (size_t)tc->B * tc->T * sizeof(int32_t);
}

void trainer_free(trainer *t) {
    if (!t) return;
    st_free_aligned(t->params);
    st_free_aligned(t->grads);
    st_free_aligned(t->m);
    st_free_aligned(t->v);
    st_free_aligned(t->params16);
    gpt_workspace_free(t->ws);
    free(t->inputs);
    free(t->targets);
    free(t);
}

typedef struct params_array {
    const gpt_config *cfg;
    const float *params;
} params_array;

static st_status copy_unit(void *ctx, int u, float *out, st_error *err) {
    (void)err;
    const params_array *a = ctx;
    memcpy(out, a->params + gpt_unit_offset(a->cfg, u), gpt_unit_numel(a->cfg, u) * sizeof(float));
    return ST_OK;
}

st_status trainer_create(trainer **out, const train_config *tc, const float *init, st_error *err) {
    params_array a = {&tc->model, init};
    return trainer_create_from(out, tc, init ? copy_unit : NULL, &a, err);
}

st_status trainer_create_from(trainer **out, const train_config *tc_in, gpt_unit_reader read_unit, void *ctx,
                              st_error *err) {
    *out = NULL;
    train_config tc = *tc_in;
    st_status s = train_config_check(&tc, err);
    if (s != ST_OK) return s;
    trainer *t = calloc(1, sizeof *t);
    if (!t) return st_fail(err, ST_ENOMEM, "out of memory creating the trainer");
    t->tc = tc;
    t->n = gpt_num_params(&tc.model);
    const size_t bytes = t->n * sizeof(float);
    t->params = st_alloc_aligned(64, bytes);
    t->grads = st_alloc_aligned(64, bytes);
    t->m = st_alloc_aligned(64, bytes);
    t->v = st_alloc_aligned(64, bytes);
    if (tc.precision == GPT_MIXED_BF16) t->params16 = st_alloc_aligned(64, t->n * sizeof(st_bf16));
    t->inputs = malloc((size_t)tc.B * tc.T * sizeof(int32_t));
    t->targets = malloc((size_t)tc.B * tc.T * sizeof(int32_t));
    if (!t->params || !t->grads || !t->m || !t->v || !t->inputs || !t->targets ||
        (tc.precision == GPT_MIXED_BF16 && !t->params16)) {
        char buf[32];
        trainer_free(t);
        return st_fail(err, ST_ENOMEM, "out of memory: the trainer needs %s",
                       st_format_bytes((double)trainer_memory_bytes(&tc), buf, sizeof buf));
    }
    s = gpt_workspace_create(&t->ws, train_config_backend(&tc), &tc.model, tc.B, tc.T, tc.recompute, tc.precision, err);
    if (s != ST_OK) {
        trainer_free(t);
        return s;
    }
    for (int u = 0; read_unit && u < gpt_num_units(&tc.model); u++) {
        s = read_unit(ctx, u, t->params + gpt_unit_offset(&tc.model, u), err);
        if (s != ST_OK) {
            trainer_free(t);
            return s;
        }
    }
    if (!read_unit) gpt_init_params(&tc.model, t->params, tc.seed);
    memset(t->m, 0, bytes);
    memset(t->v, 0, bytes);
    if (t->params16) gpt_f32_to_bf16(t->params, t->params16, t->n);
    *out = t;
    return ST_OK;
}

gpt_weights trainer_compute_weights(const trainer *t) {
    return (gpt_weights){.precision = t->tc.precision, .f32 = t->params, .bf16 = t->params16};
}

/* Splits rows of T+1 tokens into inputs [B,T] and targets [B,T]. */
static void split_rows(trainer *t, const int32_t *rows, int B, int T) {
    for (int b = 0; b < B; b++) {
        memcpy(t->inputs + (size_t)b * T, rows + (size_t)b * (T + 1), (size_t)T * sizeof(int32_t));
        memcpy(t->targets + (size_t)b * T, rows + (size_t)b * (T + 1) + 1, (size_t)T * sizeof(int32_t));
    }
}

st_status trainer_step(trainer *t, const int32_t *tokens, train_step_stats *stats, st_error *err) {
    const train_config *tc = &t->tc;
    const gpt_config *c = &tc->model;
    const int B = tc->B, T = tc->T, M = tc->micro_batches;
    st_status s = gpt_check_tokens(c, tokens, (size_t)M * B * (T + 1), err);
    if (s != ST_OK) return s;
    double t0 = st_now(), loss_sum = 0.0;
    memset(t->grads, 0, t->n * sizeof(float));
    for (int mb = 0; mb < M; mb++) {
        split_rows(t, tokens + (size_t)mb * B * (T + 1), B, T);
        loss_sum += gpt_forward_backward(t->ws, trainer_compute_weights(t), t->grads, t->inputs, t->targets, B,
                                         T, 1.0f / (float)M);
    }
    /* The gradients are host memory: their norm is the CPU backend's sum_sq
     * (host memory is its device memory), whatever backend computed them. */
    const compute_backend *host = compute_backend_cpu();
    double sum_sq = 0.0;
    for (int u = 0; u < gpt_num_units(c); u++)
        sum_sq += host->sum_sq(host, t->grads + gpt_unit_offset(c, u), gpt_unit_numel(c, u));
    const double norm = sqrt(sum_sq);
    const float scale = clip_scale(norm, tc->clip), lr = lr_schedule_at(&tc->lr, t->step);
    for (int u = 0; u < gpt_num_units(c); u++) {
        size_t off = gpt_unit_offset(c, u);
        adamw_step_unit(c, u, 0, gpt_unit_numel(c, u), &tc->adam, lr, scale, t->step + 1, t->params + off,
                        t->grads + off, t->m + off, t->v + off, t->params16 ? t->params16 + off : NULL);
    }
    t->step++;
    if (stats) {
        stats->loss = (float)(loss_sum / M);
        stats->grad_norm = (float)norm;
        stats->lr = lr;
        stats->seconds = st_now() - t0;
    }
    return ST_OK;
}

st_status trainer_eval(trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err) {
    if (B < 1 || T < 1 || B > t->tc.B || T > t->tc.T)   /* inputs/targets hold tc.B x tc.T */
        return st_fail(err, ST_EINVAL, "evaluation batch %d x %d exceeds the training micro-batch %d x %d", B, T, t->tc.B,
                       t->tc.T);
    st_status s = gpt_check_tokens(&t->tc.model, tokens, (size_t)B * (T + 1), err);
    if (s != ST_OK) return s;
    split_rows(t, tokens, B, T);
    *loss = gpt_forward(t->ws, trainer_compute_weights(t), t->inputs, t->targets, B, T, NULL);
    return ST_OK;
}

long trainer_steps_done(const trainer *t) { return t->step; }
const train_config *trainer_config(const trainer *t) { return &t->tc; }
const float *trainer_params(const trainer *t) { return t->params; }

st_status trainer_save_state(trainer *t, store *st, size_t seg, void *stage, st_error *err) {
    const gpt_config *c = &t->tc.model;
    for (int u = 0; u < gpt_num_units(c); u++) {
        const size_t off = gpt_unit_offset(c, u);
        st_status s = ckpt_write_unit(st, u, t->params + off, t->m + off, t->v + off, gpt_unit_numel(c, u), seg,
                                      stage, err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

st_status trainer_load_state(trainer *t, ckpt_reader *r, long steps_done, st_error *err) {
    const gpt_config *c = &t->tc.model;
    float *dst[3] = {t->params, t->m, t->v};
    const store_kind kinds[3] = {STORE_MASTER, STORE_ADAM_M, STORE_ADAM_V};
    for (int u = 0; u < gpt_num_units(c); u++) {
        const size_t off = gpt_unit_offset(c, u), n = gpt_unit_numel(c, u);
        for (int k = 0; k < 3; k++) {
            st_status s = ckpt_read_range(r, kinds[k], u, 0, n, dst[k] + off, err);
            if (s != ST_OK) return s;
        }
    }
    if (t->params16) gpt_f32_to_bf16(t->params, t->params16, t->n);
    t->step = steps_done;
    return ST_OK;
}
