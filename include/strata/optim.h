/*
 * strata/optim.h - AdamW, global-norm gradient clipping, and the learning-rate
 * schedule (linear warmup, then cosine decay).
 *
 * The optimizer works on ranges of one unit of the parameter layout (see
 * strata/model.h), so a scheduler can step a unit, or part of one, as soon as
 * its state is in memory: the math of a step does not depend on how the
 * parameters were split. Each element's update reads only that element's
 * master weight, gradient and moments:
 *
 *     adamw_hparams h = adamw_defaults();
 *     float lr = lr_schedule_at(&sched, step);          // step counts from 0
 *     // sum_sq: be->sum_sq (strata/backend.h) over every unit's gradients
 *     float scale = clip_scale(sqrt(sum_sq), clip);     // 1 when not clipping
 *     adamw_step_unit(&cfg, u, 0, gpt_unit_numel(&cfg, u), &h, lr, scale, step + 1,
 *                     master_u, grads_u, m_u, v_u, bf16_u);
 */
#ifndef STRATA_OPTIM_H
#define STRATA_OPTIM_H

#include <stddef.h>

#include "strata/base.h"
#include "strata/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct adamw_hparams {
    float beta1, beta2, eps;
    float weight_decay;   /* decoupled; applied only to tensors with decay set */
} adamw_hparams;

/* beta1 0.9, beta2 0.95, eps 1e-8, weight decay 0.1 (GPT-2/3 practice). */
adamw_hparams adamw_defaults(void);

/* One AdamW step over n elements, exactly torch.optim.AdamW's arithmetic:
 *   p -= lr*wd*p (if decay);  g' = g*grad_scale
 *   m = b1 m + (1-b1) g';  v = b2 v + (1-b2) g'^2
 *   p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
 * t is the 1-based step number. If p16 is not NULL it receives bf16(p) in
 * the same pass (mixed precision compute weights). Threaded, vectorized. */
void adamw_update(float *p, const float *g, float *m, float *v, st_bf16 *p16, size_t n,
                  const adamw_hparams *h, float lr, float grad_scale, long t, int decay);

/* adamw_update over elements [lo, hi) of unit u, with each tensor's own
 * decay flag. Pointers are to the start of the unit's arrays. */
void adamw_step_unit(const gpt_config *cfg, int unit, size_t lo, size_t hi, const adamw_hparams *h,
                     float lr, float grad_scale, long t, float *p, const float *g, float *m, float *v,
                     st_bf16 *p16);

/* The same over elements [lo, hi) of unit u, for arrays that hold only
 * those elements (p[0] is element lo): a share of a unit read from the SSD. */
void adamw_step_range(const gpt_config *cfg, int unit, size_t lo, size_t hi, const adamw_hparams *h, float lr,
                      float grad_scale, long t, float *p, const float *g, float *m, float *v, st_bf16 *p16);

/* torch's clip_grad_norm_: min(1, max_norm / (norm + 1e-6)); 1 if max_norm <= 0. */
float clip_scale(double norm, float max_norm);

typedef struct lr_schedule {
    float max_lr, min_lr;
    long warmup;   /* steps of linear warmup */
    long total;    /* step at which the cosine reaches min_lr */
} lr_schedule;

/* Learning rate at 0-based step s: max_lr*(s+1)/warmup while s < warmup;
 * then min_lr + (max_lr-min_lr)(1+cos(pi r))/2 with
 * r = clamp((s-warmup+1)/(total-warmup), 0, 1). */
float lr_schedule_at(const lr_schedule *s, long step);
st_status lr_schedule_check(const lr_schedule *s, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
