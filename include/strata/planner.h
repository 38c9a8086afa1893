/*
 * strata/planner.h - choosing how to train: for a model, a sequence length, a
 * global batch and memory budgets on a described machine, searches the
 * schedule (vertical, horizontal), the micro-batch size and count that make
 * up the global batch, the placement of each kind of state (host memory or
 * SSD) and the share alpha of optimizer work deferred to the next forward;
 * simulates every candidate that fits the budgets (strata/sim.h) and ranks
 * them by predicted iteration time (then by SSD traffic: drive wear).
 *
 * Search space and pruning. Micro-batch counts M are the divisors of the
 * global batch up to max_micro_batches; alpha is one of 0, 0.25, 0.5, 1
 * (with clipping the vertical schedule defers every step whatever alpha is,
 * so one value is tried); the block gradient buffers are the default 3, and
 * 6 for placements with gradients on the SSD whose steps stream state (each
 * step holds its unit's buffer, so a slow optimizer holds the backward back
 * unless there are more). Of the 16 placements, only the minimal ones that
 * fit are simulated: moving more state to the SSD adds traffic and frees
 * memory the run does not need, so a placement that contains a fitting one
 * cannot be faster. Memory is the executor's own accounting
 * (sim_memory_need: offload_memory_need on a CPU backend): device working set within mem_device and the rest
 * within mem_host (budgets of 0 take the machine's memory; on a CPU backend,
 * where both tiers are the same RAM, their sum within it).
 *
 * The candidates are listed first, then simulated on all the cores
 * (OpenMP; each simulation depends on its configuration alone), 256 at a
 * time, each chunk ranked in the order listed: the result does not depend
 * on the number of threads.
 *
 *     plan_request q = plan_default_request();
 *     q.model = cfg; q.T = 1024; q.global_batch = 32; q.mem_host = 2ull << 30;
 *     plan_result r;
 *     if (plan_search(&hw, &q, &r, &err) != ST_OK) ...   // ST_ENOMEM: nothing fits; err says the least need
 *     const sim_config *best = &r.best[0].config;       // schedule, B, M, alpha, placement
 */
#ifndef STRATA_PLANNER_H
#define STRATA_PLANNER_H

#include "strata/hw.h"
#include "strata/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PLAN_MAX_BEST 16

typedef struct plan_request {
    gpt_config model;
    int T;                      /* tokens per sequence */
    int global_batch;           /* sequences per optimizer step, split into M micro-batches of B */
    gpt_precision precision;
    int clipping;               /* global-norm clipping on */
    uint64_t mem_device, mem_host;   /* budgets in bytes; 0: the machine's (hw.device_bytes, hw.host_bytes) */
    int schedule;               /* -1: both; else only SCHED_VERTICAL or SCHED_HORIZONTAL */
    int micro_batches;          /* 0: every divisor of the global batch up to max_micro_batches; else only this M */
    double alpha;               /* < 0: 0, 0.25, 0.5 and 1; else only this share */
    int grad_buffers;           /* block gradient buffers (strata/layout.h): < 0: the default and, where
                                   gradients live on the SSD and steps stream state, LAYOUT_GRAD_BLOCK_BUFFERS_MORE;
                                   else only this (0: the default) */
    int max_micro_batches;      /* largest M tried (default 64) */
    int n_best;                 /* how many to keep, at most PLAN_MAX_BEST (default 5) */
    int whole_placements;       /* only whole placements (each kind all in memory or all on the SSD), the
                                   minimal fitting ones: what the best binary split achieves */
    /* optional: called as candidates finish simulating (done of total), one call at a time, from
       whichever thread finished one; NULL: none */
    void (*progress)(void *ctx, int done, int total);
    void *progress_ctx;
} plan_request;

/* Both schedules, every M up to 64, alpha and gradient buffers, mixed precision, clipping on, the machine's
 * memory, 5 kept. */
plan_request plan_default_request(void);

typedef struct plan_choice {
    sim_config config;          /* model, B, T, M, schedule, alpha, gradient buffers, placement */
    sim_result result;          /* the prediction */
    sim_roofline roofline;      /* its roofline bound */
} plan_choice;

typedef struct plan_result {
    plan_choice best[PLAN_MAX_BEST];   /* fastest first */
    int n_best;
    int considered;             /* candidates whose memory was checked: whole placements, and fills of them */
    int simulated;              /* of them, those simulated: fitting, each whole placement with memory filled
                                   by its kinds' parts in every order (placement_fills), a whole one itself
                                   only when no fitting one is within it */
    plan_choice runner_up;      /* the fastest whose placement is not best[0]'s (why that placement won) */
    int has_runner_up;
} plan_result;

/* ST_EINVAL on a bad request (naming the field), ST_ENOMEM when no candidate
 * fits the budgets (the message gives the smallest need per tier). */
st_status plan_search(const hw_desc *hw, const plan_request *req, plan_result *out, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
