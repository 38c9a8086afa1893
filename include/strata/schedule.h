/*
 * strata/schedule.h - one training iteration as data: a list of tasks with
 * dependencies, generated for a schedule (vertical or horizontal), a number
 * of micro-batches, an optimizer-overlap fraction alpha, clipping on or off,
 * and a placement of each kind of state (host memory or SSD).
 *
 * The list says what happens and in which order, nothing about how: it names
 * units (0 = the embedding unit, 1..L = transformer blocks, and L+1 = the
 * head when it has a unit of its own), micro-batches, and element ranges of
 * units, never buffers, files or threads. Three
 * consumers read the same list: an executor runs it, a simulator replays it
 * against a hardware description, and a planner compares lists. So a new
 * schedule is written once and is at the same time runnable, predictable and
 * plannable.
 *
 * Vocabulary. act[u][m] is the input of block unit u for micro-batch m
 * (act[1] comes from the embedding; act[L+1] is the last block's output, the
 * head's input, whatever unit holds the head); dact[m] is the gradient flowing down for micro-batch m. A
 * task's deps are indices of earlier tasks in the same list that must finish
 * before it starts. Deferred optimizer work (alpha) from the previous
 * iteration appears at the start of the list, marked `deferred`, placed just
 * ahead of the forward pass's use of that unit's weights.
 *
 *     sched_params p = {.kind = SCHED_VERTICAL, .n_units = gpt_num_units(&cfg),
 *                       .separate_head = gpt_head_unit(&cfg) != 0,
 *                       .micro_batches = 8, .alpha = 0.25, .clipping = 0,
 *                       .place = {.weights = 1, .optim = 1, .acts = 1}};
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
    TASK_HEAD,             /* unit (the head's: 0 or L+1), mb: loss on act[L+1][mb]; dact[mb]; unit gradients += */
    TASK_BLOCK_BACKWARD,   /* unit, mb: recompute from act[unit][mb], backward; unit gradients += */
    TASK_EMBED_BACKWARD,   /* mb: unit 0 gradients += from dact[mb] */
    TASK_SAVE_ACT,         /* unit, mb: act[unit][mb] to the SSD */
    TASK_LOAD_ACT,         /* unit, mb: act[unit][mb] from the SSD */
    TASK_SAVE_GRAD,        /* unit, [lo, hi): that share of the gradient accumulator to the SSD */
    TASK_LOAD_GRAD,        /* unit, [lo, hi): that share of the gradient accumulator from the SSD */
    TASK_GRAD_NORM,        /* the global gradient norm (all units complete) */
    TASK_OPTIMIZE,         /* unit, [lo, hi): AdamW on those elements, new compute weights */
    /* copies between host memory and a separate device (sched_params.separate_device) */
    TASK_TOKENS_TO_DEVICE, /* the iteration's token ids and targets to the device */
    TASK_ACT_TO_DEVICE,    /* unit, mb: act[unit][mb] to the device, for the compute task just after */
    TASK_ACT_TO_HOST,      /* unit, mb: act[unit][mb], made by the compute task just before, to the host */
    TASK_GRAD_TO_DEVICE,   /* unit: the unit's gradient accumulator to the device */
    TASK_GRAD_TO_HOST,     /* unit: the unit's gradient accumulator back to the host */
    /* data parallel (sched_params.ranks > 1): each rank keeps a shard of every unit's state */
    TASK_GATHER_WEIGHTS,   /* unit: its compute weights gathered from every rank's shard (after its
                              LOAD_WEIGHTS, which brings this rank's); its compute tasks read them */
    TASK_REDUCE_GRADS,     /* unit: its gradient, complete on every rank, summed over the ranks into
                              each rank's shard (reduce-scatter); its steps and the norm read that */
    TASK_OP_COUNT
} task_op;

const char *task_op_name(task_op op);

/* The resource a task occupies; what the simulator charges it to. Copies
 * between host and device are compute: they run on the compute stream, in
 * list order. Collectives between ranks are the network's, and complete
 * in list order too. */
typedef enum task_resource { RES_COMPUTE, RES_SSD_READ, RES_SSD_WRITE, RES_OPTIMIZER, RES_NETWORK } task_resource;
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

/* Where each kind of training state lives: for each kind, the share of its
 * n parts that is in the SSD store (0: all in host memory, 1: all on the
 * SSD), a part being a unit (the embedding unit, the blocks and a head unit
 * of its own: sched_parts) or, for checkpoints, a checkpoint index of every
 * micro-batch (1..L + 1: each block's input and the head's). The share is of parts,
 * not bytes; placement_units says how many parts it is, and which parts
 * are on the SSD is fixed by the kind (placement_on_ssd):
 *
 *   weights, optim, grads: the last units (u >= n - k). Memory keeps the
 *     units an iteration starts and ends with (the embedding unit first),
 *     whose steps end backward right before the next forward needs them,
 *     so that their loads cannot be read ahead; what memory holds of them
 *     is one prefix of the parameter vector. A head unit of its own is the
 *     last: the first on the SSD, since its load comes after every block's
 *     forward and can be read ahead.
 *   acts: the first checkpoints (1..k). Memory keeps the last blocks',
 *     read back first at the turn from forward to backward.
 *
 * The one placement type of the engine: the executor, the simulator, the
 * planner and the command line all pass this. Today's whole placements
 * are the shares 0 and 1. */
typedef struct placement {
    double weights;   /* compute weights: loaded per use from the SSD, or kept in host memory */
    double optim;     /* master weights and Adam moments (read and written inside TASK_OPTIMIZE) */
    double acts;      /* activation checkpoints */
    double grads;     /* gradients kept between their completion and their step */
} placement;

typedef enum place_kind { PLACE_WEIGHTS, PLACE_OPTIM, PLACE_ACTS, PLACE_GRADS, PLACE_KINDS } place_kind;
double placement_share(placement p, place_kind k);
void placement_set_share(placement *p, place_kind k, double share);
/* How many of a kind's n parts are on the SSD: the share of n, rounded to
 * the nearest part within 0.01 of one and up otherwise, so that every
 * share above 0 puts a part there and a printed share reads back exactly. */
int placement_units(placement p, place_kind k, int n);
/* 1 when part i of a kind is on the SSD: unit i (0..n-1) for weights,
 * optim and grads, checkpoint index i (1..n) for acts. */
int placement_on_ssd(placement p, place_kind k, int i, int n);
/* weights, optim, grads: how many units, from unit 0, stay in memory. */
int placement_memory_units(placement p, place_kind k, int n);

/* The 16 whole placements, numbered so that bit 0 is weights, 1 optim, 2
 * acts, 3 grads: index 0 keeps everything in memory, 15 puts everything
 * on the SSD. */
#define PLACEMENT_COUNT 16
placement placement_at(int index);
/* 1 when anything is on the SSD. */
int placement_any_ssd(placement p);
/* 1 when optimizer steps stream through the SSD: some of the optimizer
 * state or of the compute weights they write is there (strata/layout.h's
 * opt_io_order then orders their reads and writes). */
int placement_streams_optimizer(placement p);
/* 1 when every kind a has on the SSD, b has there too (as large a share). */
int placement_within(placement a, placement b);
/* Fills memory: from a placement that fits, each kind it has on the SSD in
 * turn keeps as many more of its n parts in memory as `fits` still
 * accepts (whole parts; the search assumes memory grows with each part
 * kept), the other kinds as they are; in every order of the kinds, since
 * the first to fill takes the room, and in each order also with the first
 * kind one part short of its most (the others then share the room it
 * leaves). Writes the distinct placements found to out (at most
 * PLACEMENT_FILLS; p itself when nothing is on the SSD) and returns their
 * count. parts: each kind's number of parts (sched_parts_all). */
typedef int (*placement_fit_fn)(placement p, void *ctx);
#define PLACEMENT_FILLS 48   /* 4! orders, each also with its first kind one part short */
int placement_fills(placement p, const int parts[PLACE_KINDS], placement_fit_fn fits, void *ctx,
                    placement out[PLACEMENT_FILLS]);

/* "weights,optim", "optim=0.6,acts" or "none": the --offload spelling,
 * for messages and run.json. */
const char *placement_name(placement p, char *buf, size_t n);

typedef struct sched_params {
    sched_kind kind;
    int n_units;           /* L + 1, or L + 2 with separate_head */
    int separate_head;     /* the head has a unit of its own, the last (an untied head); 0: the head
                              reads and accumulates into unit 0 (tied to the embedding) */
    int micro_batches;     /* M */
    double alpha;          /* share of each streaming unit's optimizer step deferred to the next forward
                              (sched_deferred_share) */
    int clipping;          /* global-norm clipping: no step before the norm (forces alpha = 1) */
    placement place;       /* decides which loads and saves the list holds */
    int ranks;             /* data parallel: this list is one rank's of `ranks` (0 or 1: one process), over
                              its micro_batches of the global batch; each LOAD_WEIGHTS is followed by
                              a GATHER_WEIGHTS, and each unit's gradient, once complete, by a
                              REDUCE_GRADS that its steps and GRAD_NORM wait for */
    int defer_in_memory;   /* 1: alpha defers the steps all in memory too (a GPU, where AdamW on
                              the host runs beside the device's compute, so that deferred it
                              overlaps the next forward); 0: only the steps that stream (the
                              CPU backend, where AdamW shares the cores with compute and a step
                              in memory has no SSD traffic to hide) */
    int separate_device;   /* compute runs on memory that is not host memory (a backend with
                              unified = 0): the list holds the copies between the two, each just
                              before the compute task that reads what it copies in or just after
                              the one that made what it copies out. 0: no copy tasks (the CPU
                              backend, where the device is host memory) */
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

/* The unit the head's tasks use: 0, or n_units - 1 with separate_head. */
int sched_head_unit(const sched_params *p);
/* How many parts a placement's share of kind k is of (placement_units' n):
 * the units for weights, optim and grads; the checkpoint indices 1..L+1
 * for acts. sched_parts_all: all four, indexed by place_kind. */
int sched_parts(const sched_params *p, place_kind k);
void sched_parts_all(const sched_params *p, int parts[PLACE_KINDS]);

/* 1 when unit u's optimizer step moves state through the SSD (its
 * optimizer state or compute weights are there) or the network (several
 * ranks): the steps that run on the optimizer's streaming lane. */
int sched_unit_streams(const sched_params *p, int u);
/* The share of unit u's optimizer step deferred to the next forward: 1
 * with clipping in the vertical schedule, else alpha for a unit whose step
 * streams (sched_unit_streams) and 0 for one whose step is all in memory
 * (alpha there too with defer_in_memory).
 * sched_defers: some unit's share is above 0. */
double sched_deferred_share(const sched_params *p, int u);
int sched_defers(const sched_params *p);
/* The share a streaming unit defers: 1 with clipping in the vertical
 * schedule, else alpha (the split of every unit's store tensors). */
double sched_streaming_share(const sched_params *p);

/* Counts of what a list moves, in units of "one unit's tensor": loads of
 * compute weights, activation saves and loads, gradient saves and loads. */
typedef struct sched_counts {
    int weight_loads, act_saves, act_loads, grad_saves, grad_loads, optimize_tasks;
    int forward_tasks, backward_tasks;
    int gathers, reduces;   /* GATHER_WEIGHTS, REDUCE_GRADS */
} sched_counts;
void sched_count(const sched_list *l, sched_counts *out);

/* ---- what consumers of a list need to know about it ------------------------------------ */

/* Kinds of load: one read ahead of each kind may be in flight. */
enum { SCHED_LOAD_WEIGHTS, SCHED_LOAD_ACTS, SCHED_LOAD_GRADS, SCHED_LOAD_KINDS };
/* The kind of a load task, or -1. */
int sched_load_kind(task_op op);
/* Head, block backward and embedding backward add into a unit's gradients. */
int sched_is_grad_task(task_op op);
/* The unit whose gradient buffer a task uses (gradient tasks, gradient
 * saves and loads, optimizer steps), or -1. */
int sched_grad_unit(const sched_task *t);

/* Computed once per list, read alike by the executor and the simulator,
 * so that both follow the same policy. Arrays are indexed by task. */
typedef struct sched_analysis {
    int n, n_units;
    int *next_compute;    /* [n + 1] the first compute task at or after i (n: none) */
    int *next_network;    /* [n + 1] the first collective at or after i (n: none): collectives start in
                             list order on every rank (they are matched by that order), so one is
                             started ahead of its place only when it is the next */
    int *next_load;       /* [n] after a load: the next load of the same kind, or -1 */
    int *next_grad_load;  /* [n] the next LOAD_GRAD after task i, or -1 */
    char *first_grad;     /* [n] the unit's first gradient task of the list, or after its REDUCE_GRADS
                             (a fresh buffer): its gradients are zeroed before (or, several ranks,
                             made from the accumulator a LOAD_GRAD brought) */
    int *next_first_grad; /* [n + 1] the first task after i that is a unit's first gradient task (n: none) */
    char *last_grad;      /* [n] its last: their sum of squares (for the norm) is taken after */
    char *grad_leave;     /* [n] a gradient task after which the next gradient task is another unit's */
    char *grad_release;   /* [n] with gradients on the SSD, the compute thread is done with the unit's
                             buffer after task i: after a save of it, after its step unless a save of
                             the rest follows, before a load of it, and after its last use */
    int *last_grad_task;  /* [n_units] the unit's last gradient task, or -1 */
} sched_analysis;
st_status sched_analyze(const sched_list *l, int n_units, sched_analysis *out, st_error *err);
void sched_analysis_free(sched_analysis *a);

/* 1 when every dependency of task j is at or before task i: its inputs are
 * final once the tasks up to i have run. */
int sched_inputs_final(const sched_list *l, int j, int i);
/* The load to read ahead once task i has run (the executor's policy, which
 * the simulator replays): after a load of weights or checkpoints, the next
 * load of that kind; after any task, the next gradient load, unless a
 * unit's first gradient task comes before it (that unit needs a gradient
 * buffer first, and the embedding unit and a head of its own share one);
 * only when its inputs are final then; -1 for none. Whether a buffer is free for it, and
 * for weights whether the unit's optimizer steps are done, is the caller's
 * to check. */
int sched_read_ahead(const sched_analysis *a, const sched_list *l, int i, int kind);

#ifdef __cplusplus
}
#endif
#endif
