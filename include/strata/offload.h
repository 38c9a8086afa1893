/*
 * strata/offload.h - the schedule executor: trains by running the task
 * lists of strata/schedule.h, one iteration per call, with the optimizer
 * step split per unit and partly deferred into the next iteration's forward.
 *
 * This is the engine of SSD-offloaded training (issue 5), built in steps.
 * What runs today: both schedules (vertical snake, horizontal), any alpha,
 * clipping on or off, fp32 or mixed precision, with every kind of state in
 * host memory; its results match the in-memory trainer (strata/train.h):
 * bit for bit for the horizontal schedule, up to the rounding of a different
 * gradient summation order for the vertical one. Placing state on the SSD
 * (through strata/store.h) is the next step: a config asking for it is
 * refused with ST_EUNSUPPORTED rather than silently run in memory.
 *
 *     offload_config oc = {.train = tc, .schedule = SCHED_VERTICAL, .alpha = 0.25};
 *     offload_trainer *t;
 *     if (offload_trainer_create(&t, &oc, NULL, &err) != ST_OK) ...
 *     for (...) offload_trainer_step(t, tokens, &stats, &err);   // tokens: [grad_accum][B][T+1]
 *     offload_trainer_flush(t, &err);        // deferred optimizer work, before saving weights
 *     const float *w = offload_trainer_params(t);
 */
#ifndef STRATA_OFFLOAD_H
#define STRATA_OFFLOAD_H

#include "strata/schedule.h"
#include "strata/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct offload_config {
    train_config train;    /* model, precision, B, T, grad_accum (M), lr, AdamW, clip, seed */
    sched_kind schedule;
    double alpha;          /* share of each unit's optimizer step deferred to the next forward */
    int weights_on_ssd, optim_on_ssd, acts_on_ssd, grads_on_ssd;   /* not yet supported: must be 0 */
} offload_config;

typedef struct offload_trainer offload_trainer;

/* init: gpt_num_params floats to start from (copied), or NULL for a fresh
 * initialization from train.seed (the same as trainer_create's). */
st_status offload_trainer_create(offload_trainer **out, const offload_config *cfg, const float *init, st_error *err);
void offload_trainer_free(offload_trainer *t);
/* One iteration on tokens[grad_accum][B][T+1]; stats as trainer_step's. */
st_status offload_trainer_step(offload_trainer *t, const int32_t *tokens, train_step_stats *stats, st_error *err);
/* Runs the optimizer work still deferred, so that the weights are those of
 * the last completed step. Steps may continue afterwards. */
st_status offload_trainer_flush(offload_trainer *t, st_error *err);
/* The fp32 master weights (valid after a flush). */
const float *offload_trainer_params(const offload_trainer *t);

#ifdef __cplusplus
}
#endif
#endif
