/*
 * strata/schedule.h - one training iteration as data: a list of tasks with
 * dependencies, generated for a schedule (vertical or horizontal), a number
 * of micro-batches, an optimizer-overlap fraction alpha, clipping on or off,
 * and a placement of each kind of state (host memory or SSD).
 *
 * The list says what happens and in which order, nothing about how: it names
 * units (0 = the embedding unit, 1..L = transformer blocks), micro-batches,
 * and element ranges of units, never buffers, files or threads. Three
 * consumers read the same list: an executor runs it, a simulator replays it
 * against a hardware description, and a planner compares lists. So a new
 * schedule is written once and is at the same time runnable, predictable and
 * plannable.
 *
 * Vocabulary. act[u][m] is the input of block unit u for micro-batch m
 * (act[1] comes from the embedding; act[L+1] is the last block's output, the
 * head's input); dact[m] is the gradient flowing down for micro-batch m. A
 * task's deps are indices of earlier tasks in the same list that must finish
 * before it starts. Deferred optimizer work (alpha) from the previous
 * iteration appears at the start of the list, marked `deferred`, placed just
 * ahead of the forward pass's use of that unit's weights.
 *
 *     sched_params p = {.kind = SCHED_VERTICAL, .n_units = cfg.n_layer + 1,
 *                       .micro_batches = 8, .alpha = 0.25, .clipping = 0,
 *                       .weights_on_ssd = 1, .optim_on_ssd = 1, .acts_on_ssd = 1};
 *     sched_list l;
 *     if (sched_build(&p, 1, &l, &err) != ST_OK) ...   // 1: deferred work arrives from the previous iteration
 *     for (int i = 0; i < l.n; i++) describe(&l.tasks[i]);
 *     sched_list_free(&l);
 */
#ifndef STRATA_SCHEDULE_H
#define STRATA_SCHEDULE_H

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sched_kind {
    SCHED_VERTICAL = 0,    /* GreedySnake: all micro-batches of a unit, snake order */
    SCHED_HORIZONTAL = 1,  /* ZeRO-Infinity: each micro-batch through all units */
} sched_kind;

typedef enum task_op {
    TASK_LOAD_WEIGHTS,     /* unit: compute weights into the working set */
    TASK_EMBED_FORWARD,    /* mb: act[1][mb] = wte[tokens] + wpe */
    TASK_BLOCK_FORWARD,    /* unit, mb: act[unit+1][mb] = block(act[unit][mb]) */
    TASK_HEAD,             /* mb: loss on act[L+1][mb]; dact[mb]; unit 0 gradients += */
    TASK_BLOCK_BACKWARD,   /* unit, mb: recompute from act[unit][mb], backward; unit gradients += */
    TASK_EMBED_BACKWARD,   /* mb: unit 0 gradients += from dact[mb] */
    TASK_SAVE_ACT,         /* unit, mb: act[unit][mb] to the SSD */
    TASK_LOAD_ACT,         /* unit, mb: act[unit][mb] from the SSD */
    TASK_SAVE_GRAD,        /* unit, [lo, hi): that share of the gradient accumulator to the SSD */
    TASK_LOAD_GRAD,        /* unit, [lo, hi): that share of the gradient accumulator from the SSD */
    TASK_GRAD_NORM,        /* the global gradient norm (all units complete) */
    TASK_OPTIMIZE,         /* unit, [lo, hi): AdamW on those elements, new compute weights */
    TASK_OP_COUNT
} task_op;

const char *task_op_name(task_op op);

/* The resource a task occupies; what the simulator charges it to. */
typedef enum task_resource { RES_COMPUTE, RES_SSD_READ, RES_SSD_WRITE, RES_OPTIMIZER } task_resource;
task_resource task_op_resource(task_op op);

#define SCHED_MAX_DEPS 6

typedef struct sched_task {
    task_op op;
    int unit;              /* -1 when none */
    int mb;                /* micro-batch, -1 when none */
    double lo, hi;         /* TASK_OPTIMIZE, TASK_SAVE_GRAD, TASK_LOAD_GRAD: share of the unit's elements, [lo, hi) of [0, 1) */
    int deferred;          /* TASK_OPTIMIZE: work of the previous iteration, done in this forward */
    int n_deps;
    int deps[SCHED_MAX_DEPS];
} sched_task;

typedef struct sched_params {
    sched_kind kind;
    int n_units;           /* L + 1 */
    int micro_batches;     /* M */
    double alpha;          /* share of each unit's optimizer step deferred to the next forward */
    int clipping;          /* global-norm clipping: no step before the norm (forces alpha = 1) */
    int weights_on_ssd;    /* compute weights: SSD (loaded per use) or host */
    int optim_on_ssd;      /* master weights and Adam moments: SSD or host (reads/writes are inside TASK_OPTIMIZE) */
    int acts_on_ssd;       /* activation checkpoints: SSD or host */
    int grads_on_ssd;      /* gradients kept between their completion and their step: SSD or host */
} sched_params;

typedef struct sched_list {
    sched_task *tasks;
    int n, cap;
} sched_list;

/* Builds one iteration. deferred_in: the previous iteration left deferred
 * optimizer work (0 for the first iteration). ST_EINVAL on bad params. */
st_status sched_build(const sched_params *p, int deferred_in, sched_list *out, st_error *err);
/* The deferred optimizer work left after the last iteration, to run before
 * weights are saved or the run ends. */
st_status sched_build_flush(const sched_params *p, sched_list *out, st_error *err);
void sched_list_free(sched_list *l);

/* The share of unit u's optimizer step deferred to the next forward:
 * 1 with clipping, else alpha. */
double sched_deferred_share(const sched_params *p);

/* Counts of what a list moves, in units of "one unit's tensor": loads of
 * compute weights, activation saves and loads, gradient saves and loads. */
typedef struct sched_counts {
    int weight_loads, act_saves, act_loads, grad_saves, grad_loads, optimize_tasks;
    int forward_tasks, backward_tasks;
} sched_counts;
void sched_count(const sched_list *l, sched_counts *out);

#ifdef __cplusplus
}
#endif
#endif
