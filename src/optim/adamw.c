/* adamw.c - AdamW with decoupled weight decay, clipping, LR schedule. */
#include <math.h>
#include <omp.h>

#include "strata/optim.h"

adamw_hparams adamw_defaults(void) {
    return (adamw_hparams){.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
}

void adamw_update(float *p, const float *g, float *m, float *v, st_bf16 *p16, size_t n,
                  const adamw_hparams *h, float lr, float grad_scale, long t, int decay) {
    /* Scalars in double, as torch computes them in Python floats. */
    const float b1 = h->beta1, b2 = h->beta2, eps = h->eps;
    const float step_size = (float)(lr / (1.0 - pow(h->beta1, (double)t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(h->beta2, (double)t));
    const float keep = decay ? (float)(1.0 - (double)lr * h->weight_decay) : 1.0f;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale;
        float pi = p[i] * keep;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        pi -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
        if (p16) p16[i] = st_f32_to_bf16(pi);
    }
}

void adamw_step_range(const gpt_config *cfg, int unit, size_t lo, size_t hi, const adamw_hparams *h, float lr,
                      float grad_scale, long t, float *p, const float *g, float *m, float *v, st_bf16 *p16) {
    for (int i = 0; i < gpt_unit_tensor_count(cfg, unit); i++) {
        gpt_tensor_info ti = gpt_unit_tensor(cfg, unit, i);
        size_t a = ti.offset > lo ? ti.offset : lo, b = ti.offset + ti.numel < hi ? ti.offset + ti.numel : hi;
        if (a >= b) continue;
        size_t k = a - lo;   /* the arrays start at element lo */
        adamw_update(p + k, g + k, m + k, v + k, p16 ? p16 + k : NULL, b - a, h, lr, grad_scale, t, ti.decay);
    }
}

void adamw_step_unit(const gpt_config *cfg, int unit, size_t lo, size_t hi, const adamw_hparams *h,
                     float lr, float grad_scale, long t, float *p, const float *g, float *m, float *v,
                     st_bf16 *p16) {
    adamw_step_range(cfg, unit, lo, hi, h, lr, grad_scale, t, p + lo, g + lo, m + lo, v + lo, p16 ? p16 + lo : NULL);
}

float clip_scale(double norm, float max_norm) {
    if (max_norm <= 0.0f) return 1.0f;
    double s = (double)max_norm / (norm + 1e-6);
    return s < 1.0 ? (float)s : 1.0f;
}

st_status lr_schedule_check(const lr_schedule *s, st_error *err) {
    if (!(s->max_lr > 0) || !isfinite(s->max_lr))
        return st_fail(err, ST_EINVAL, "learning rate %g must be positive", s->max_lr);
    if (!(s->min_lr >= 0 && s->min_lr <= s->max_lr))
        return st_fail(err, ST_EINVAL, "minimum learning rate %g must be in [0, %g]", s->min_lr, s->max_lr);
    if (s->warmup < 0) return st_fail(err, ST_EINVAL, "warmup %ld must not be negative", s->warmup);
    if (s->total < 1) return st_fail(err, ST_EINVAL, "total steps %ld must be at least 1", s->total);
    return ST_OK;
}

float lr_schedule_at(const lr_schedule *s, long step) {
    if (step < s->warmup) return (float)((double)s->max_lr * (double)(step + 1) / (double)s->warmup);
    double span = (double)(s->total - s->warmup);
    double r = span > 0 ? (double)(step - s->warmup + 1) / span : 1.0;
    if (r < 0) r = 0;
    if (r > 1) r = 1;
    return (float)(s->min_lr + 0.5 * (s->max_lr - s->min_lr) * (1.0 + cos(M_PI * r)));
}
