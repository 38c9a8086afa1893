/*
 * strata/train.h - the in-memory trainer: every parameter, gradient and Adam
 * moment in host memory, one optimizer step per call over M micro-batches.
 * It is the reference that the SSD-offloaded schedules must match.
 *
 *     train_config tc = train_config_defaults();
 *     gpt_config_from_name(&tc.model, "gpt2-tiny", &err);
 *     tc.B = 4; tc.T = 64; tc.micro_batches = 2;
 *     trainer *t;
 *     if (trainer_create(&t, &tc, NULL, &err) != ST_OK) ...   // NULL: init from tc.seed
 *     train_step_stats st;
 *     if (trainer_step(t, tokens, &st, &err) != ST_OK) ...   // tokens: [micro_batches][B][T+1]
 *     trainer_free(t);
 *
 * Each micro-batch row holds T+1 tokens: inputs are the first T, targets the
 * last T. The loss of a step is the mean over its micro-batches; gradients
 * are accumulated in fp32 as the mean over micro-batches, clipped by global
 * norm, then AdamW steps every unit. Bit-for-bit deterministic for a given
 * configuration, whatever the thread count.
 *
 * The forward and backward passes run on tc.backend (strata/backend.h): the
 * workspace is its device memory, while the parameters, gradients and
 * moments stay in host memory, where the optimizer steps them; every
 * backend gives the CPU backend's bits (the checking backend runs its code).
 */
#ifndef STRATA_TRAIN_H
#define STRATA_TRAIN_H

#include <stdint.h>

#include "strata/checkpoint.h"
#include "strata/model.h"
#include "strata/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct train_config {
    gpt_config model;
    gpt_precision precision;
    int B, T;            /* micro-batch: B sequences of T tokens */
    int micro_batches;      /* M micro-batches per optimizer step */
    int recompute;       /* keep only block inputs, recompute in backward */
    lr_schedule lr;
    adamw_hparams adam;
    float clip;          /* global-norm clipping; 0 turns it off */
    uint64_t seed;       /* parameter initialization */
    const compute_backend *backend;  /* NULL: the CPU backend */
} train_config;

/* GPT-2-like defaults: lr 6e-4 -> 6e-5 with 10% warmup over 100 steps,
 * AdamW (0.9, 0.95, 1e-8, wd 0.1), clip 1.0, recompute on, fp32. The model
 * shape, B and T must still be set. */
train_config train_config_defaults(void);
st_status train_config_check(train_config *tc, st_error *err);
/* The backend a configuration computes on: tc->backend, or the CPU backend. */
const compute_backend *train_config_backend(const train_config *tc);

typedef struct train_step_stats {
    float loss;        /* mean over the step's micro-batches */
    float grad_norm;   /* global L2 norm before clipping */
    float lr;
    double seconds;
} train_step_stats;

typedef struct trainer trainer;

/* init: gpt_num_params floats to start from (copied), or NULL for a fresh
 * initialization from tc->seed. */
st_status trainer_create(trainer **out, const train_config *tc, const float *init, st_error *err);
/* The same, the starting weights read unit by unit (a checkpoint on disk):
 * read_unit(ctx, u, out, err) fills unit u straight into the trainer. */
st_status trainer_create_from(trainer **out, const train_config *tc, gpt_unit_reader read_unit, void *ctx,
                              st_error *err);
void trainer_free(trainer *t);
/* Bytes the trainer allocates for tc: parameters, gradients, moments,
 * compute copy and activations. */
size_t trainer_memory_bytes(const train_config *tc);

/* One optimizer step on tokens[micro_batches][B][T+1]. ST_EINVAL (and no
 * step) for a token id outside the vocabulary. */
st_status trainer_step(trainer *t, const int32_t *tokens, train_step_stats *stats, st_error *err);
/* Mean loss on tokens[B][T+1] with the current weights (no update). ST_EINVAL
 * for B or T beyond the configuration's, or a token outside the vocabulary. */
st_status trainer_eval(trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err);

long trainer_steps_done(const trainer *t);
const train_config *trainer_config(const trainer *t);
/* The fp32 master weights (gpt_num_params floats, unit layout). */
const float *trainer_params(const trainer *t);
/* What compute reads: the master weights in fp32, a bf16 copy in mixed. */
gpt_weights trainer_compute_weights(const trainer *t);

/* Commits and resume (strata/checkpoint.h). save writes the state of the
 * last step (master weights, moments) into st as tensors in segments of
 * seg elements, through stage (4096-aligned, store_padded_bytes(seg * 4)
 * bytes); the caller records its meta and commits. load replaces the state
 * with a committed one and sets the steps done (the learning-rate schedule
 * and Adam's bias correction go on from there); the compute copy is rebuilt
 * from the master weights. */
st_status trainer_save_state(trainer *t, store *st, size_t seg, void *stage, st_error *err);
st_status trainer_load_state(trainer *t, ckpt_reader *r, long steps_done, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
