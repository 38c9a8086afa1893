/*
 * strata/layout.h - one picture of a run: how a model's training state is
 * cut up, which buffers hold it, and what an iteration moves through the
 * store. The executor (strata/offload.h) allocates and moves exactly this;
 * the simulator and the planner (strata/sim.h, strata/planner.h) read the
 * same numbers instead of re-deriving them, so the two cannot drift apart.
 *
 * From a model, a micro-batch shape, a schedule's parameters and a
 * placement (layout_params), layout_build computes once:
 *
 *   - each unit's two parts: elements [0, split) are stepped during
 *     backward, [split, n) are deferred into the next forward (the share
 *     alpha, or all of it with clipping in the vertical schedule; a unit
 *     whose step is all in memory steps both at once, sched_deferred_share,
 *     but is cut at the same split, so that the store's keys are the same
 *     in every placement). The split
 *     is a multiple of LAYOUT_SPLIT_ALIGN elements, so that the second part
 *     starts 4096-byte aligned in one buffer in bf16 and f32 alike;
 *   - each part's segments of at most `segment` elements: the grain in which
 *     the store keeps compute weights, master weights and Adam moments, and
 *     in which the optimizer streams them;
 *   - the buffer plan: every buffer the executor allocates, with its count,
 *     size, tier (the device's working set or the host) and what it holds.
 *     `memory` is its sum by use: what the budgets are checked against
 *     before anything is allocated (measure, then allocate);
 *   - the bytes a task of a list moves through the store (layout_task_traffic),
 *     padded as the drive sees them, and so a steady iteration's traffic.
 *
 *     layout_params p = offload_layout_params(&cfg);    // or sim_layout_params
 *     run_layout l;
 *     if (layout_build(&p, &l, &err) != ST_OK) ...
 *     printf("%llu bytes of host memory\n", (unsigned long long)l.memory.host);
 *     layout_traffic tr;
 *     layout_traffic_per_step(&l, &tr);
 *     layout_free(&l);
 *
 * The executor's buffers are counted here; its bookkeeping arrays (a few
 * ints per unit, micro-batch or task) are not.
 */
#ifndef STRATA_LAYOUT_H
#define STRATA_LAYOUT_H

#include "strata/model.h"
#include "strata/schedule.h"
#include "strata/store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LAYOUT_SPLIT_ALIGN 2048                /* elements: part 1 of a unit starts on this boundary */
#define LAYOUT_SEGMENT_DEFAULT ((size_t)1 << 19) /* elements per segment: 2 MiB of f32. The optimizer's
                                                  reads arrive faster into a small set of buffers: a
                                                  phase of 3 x 3 such segments (18 MiB) read at
                                                  1.13-1.21x the rate of one of 8 MiB segments (72 MiB)
                                                  on this machine (docs/BENCHMARKS.md, "The store's
                                                  reads"; bench/store_phases.c) */
#define LAYOUT_SEGMENT_STRIDE 65536            /* store index of segment j of part p: p * stride + j */
#define LAYOUT_ACT_BUFFERS 6                   /* checkpoint buffers when checkpoints live on the SSD: a vertical
                                                  forward holds a block's input and output, one kept at a snake
                                                  turn, a read ahead, and saves still being written behind */
#define LAYOUT_GRAD_BUFFERS 8                  /* gradient buffers when gradients live on the SSD, at most: the
                                                  embedding unit's (it collects terms from the head at the start of
                                                  backward to the embedding at its end), and grad_buffers shared by
                                                  blocks (layout_params) */
#define LAYOUT_GRAD_BLOCK_BUFFERS 3            /* the blocks' by default: the one being accumulated, one read
                                                  ahead, one a queued step reads; with several ranks, for every
                                                  unit: the one being accumulated and LAYOUT_REDUCE_SLOTS being
                                                  summed. More let the backward run further ahead of the
                                                  optimizer's steps (each step holds its unit's buffer) for the
                                                  memory of a block's gradients each; the planner tries
                                                  LAYOUT_GRAD_BLOCK_BUFFERS_MORE too */
#define LAYOUT_GRAD_BLOCK_BUFFERS_MORE 6
#define LAYOUT_REDUCE_SLOTS 2                  /* several ranks: gradients being summed over the ranks at once, each
                                                  with a buffer for the other ranks' pieces of this rank's shard */
#define LAYOUT_OPT_SLOTS 3                     /* optimizer segment slots: a phase of three segments, or
                                                  interleaved one read ahead, one stepped, one written behind */
/* The optimizer's lanes, a thread each, running their jobs in list order
 * beside each other: the steps of units that stream state through the SSD,
 * and the steps of units whose state is all in host memory (AdamW alone),
 * so that the SSD does not wait while AdamW runs on memory. */
enum { LAYOUT_LANE_SSD, LAYOUT_LANE_HOST, LAYOUT_LANES };

/* How an optimizer job orders its reads and writes of state on the SSD.
 * Disks like this machine's serve reads and writes at once slower than
 * either alone, and the engine queues an op's chunks first in, first out,
 * so a read queued behind writes waits for them (docs/BENCHMARKS.md,
 * "Optimizer I/O order", has the measurements that chose the default). */
typedef enum opt_io_order {
    OPT_IO_PHASED,        /* the default: read LAYOUT_OPT_SLOTS segments, step each as it arrives, write
                             them all back, wait: the job's reads and writes are never queued together */
    OPT_IO_INTERLEAVED,   /* segment j+1 read ahead while j is stepped and j-1 written behind */
    OPT_IO_ALTERNATING,   /* phased on even Adam steps, interleaved on odd: the two side by side in one
                             run, to measure them on a disk whose rates drift (executor only) */
    OPT_IO_ORDERS
} opt_io_order;

const char *opt_io_order_name(opt_io_order o);
/* "phased", "interleaved" or "alternating"; ST_EINVAL otherwise. */
st_status opt_io_order_parse(const char *s, opt_io_order *out, st_error *err);

typedef struct layout_params {
    gpt_config model;
    gpt_precision precision;   /* mixed: bf16 compute weights (2 bytes), else f32 (4) */
    int B, T;                  /* micro-batch: sequences, tokens per sequence */
    int micro_batches;         /* M */
    sched_kind schedule;
    double alpha;              /* share of each streaming unit's optimizer step deferred to the next forward
                                  (sched_deferred_share) */
    int clipping;              /* global-norm clipping (vertical then defers every step) */
    placement place;
    size_t segment_elems;      /* 0: LAYOUT_SEGMENT_DEFAULT; else a multiple of LAYOUT_SPLIT_ALIGN */
    opt_io_order opt_io;       /* how an optimizer job orders its SSD reads and writes */
    int grad_buffers;          /* block gradient buffers when gradients live on the SSD, from
                                  LAYOUT_GRAD_BLOCK_BUFFERS to LAYOUT_GRAD_BUFFERS - 1 (0: the default,
                                  LAYOUT_GRAD_BLOCK_BUFFERS) */
    int has_store;             /* the run has store directories: commits stage through a segment buffer */
    int resuming;              /* the state is read back from a commit at start */
    int defer_in_memory;       /* alpha defers the steps all in memory too (sched_params'); a separate
                                  device implies it */
    int separate_device;       /* the compute backend's memory is not host memory (strata/backend.h's
                                  unified = 0): what kernels read from or write to a host buffer goes
                                  through a device copy, and the I/O buffers are host memory. 0 on the
                                  CPU backend, where the device is host memory and copies are free */
    int ranks, rank;           /* data parallel (strata/comm.h): this layout is rank `rank` of `ranks`
                                  (0 or 1: one process). micro_batches is then this rank's share of
                                  the global batch's, and the rank keeps its shard of every unit
                                  (comm_shard_range over the unit's elements) of the master weights,
                                  moments and compute weights, in memory or in its own store */
} layout_params;

/* The block gradient buffers a layout_params.grad_buffers of n means (0: the default). */
static inline int layout_grad_buffers(int n) { return n ? n : LAYOUT_GRAD_BLOCK_BUFFERS; }

/* The sched_params of a layout's lists (deferred work coming in or not is
 * sched_build's argument). */
sched_params layout_sched_params(const layout_params *p);

typedef enum layout_tier { LAYOUT_DEVICE, LAYOUT_HOST } layout_tier;

/* What a buffer is counted as (the lines of layout_memory). */
typedef enum layout_use {
    USE_UNIT_WEIGHTS,      /* device: the loaded unit's weights */
    USE_ACTIVATIONS,       /* device: activations, scratch, gradients flowing down, tokens, I/O buffers (the
                              unit's gradients, with a separate device) */
    USE_OPTIMIZER_STATE,   /* host: master weights and Adam moments, or their streaming buffers */
    USE_COMPUTE_WEIGHTS,   /* host: the compute copy when it stays in memory */
    USE_CHECKPOINTS,       /* host: every activation checkpoint when they stay in memory */
    USE_GRADIENTS,         /* host: all gradients, or a few units' buffers when they live on the SSD */
    USE_STAGING,           /* host: I/O staging and initialization */
} layout_use;

/* Every buffer the executor allocates. */
typedef enum layout_buffer_id {
    BUF_WEIGHTS_IO,        /* 2: a unit's compute weights read back from the SSD; the other reads ahead */
    BUF_UNIT_F32,          /* the loaded unit's weights widened to f32 (mixed precision) */
    BUF_BLOCK_ACTS,        /* one block's activations */
    BUF_SCRATCH,           /* block backward and head scratch */
    BUF_DACT,              /* the gradient flowing down, for every micro-batch */
    BUF_EVAL,              /* two activations for forward-only evaluation */
    BUF_TOKENS,            /* inputs and targets of every micro-batch */
    BUF_ACT_IO,            /* LAYOUT_ACT_BUFFERS checkpoint buffers (checkpoints on the SSD) */
    BUF_MASTER,            /* master weights, Adam m and v in memory */
    BUF_ADAM_M,
    BUF_ADAM_V,
    BUF_OPT_STATE_IO,      /* 3 x LAYOUT_OPT_SLOTS segment buffers the optimizer streams through (state on the SSD) */
    BUF_OPT_WEIGHTS_IO,    /* LAYOUT_OPT_SLOTS: the new compute weights of a stepped segment (weights on the SSD) */
    BUF_WEIGHTS_HOST,      /* compute weights in memory: bf16, or an f32 copy when the master is on the SSD */
    BUF_CHECKPOINTS,       /* every checkpoint of every block and micro-batch (checkpoints in memory) */
    BUF_GRADS,             /* the gradients memory keeps (several ranks: the shards of their sums) */
    BUF_GRAD_IO_EMBED,     /* the end units' gradient buffer (gradients on the SSD, or several ranks) */
    BUF_GRAD_IO_BLOCK,     /* grad_buffers buffers shared by the blocks */
    BUF_SEGMENT_IO,        /* one segment of f32: set-up, reading weights back, commits */
    BUF_INIT_UNIT,         /* one unit of f32 to initialize from (freed after creation;
                            * none where the widening buffer is host memory) */
    BUF_RESUME_IO,         /* 3 segments: reading a commit back (freed after creation) */
    BUF_COMM_SCRATCH,      /* several ranks, LAYOUT_REDUCE_SLOTS: the other ranks' pieces of a unit's gradient
                              for this rank's shard */
    /* with a separate device only: */
    BUF_UNIT_DEVICE,       /* the loaded unit's compute weights copied to the device */
    BUF_ACT_DEVICE,        /* 2: a block's input checkpoint and its output, on the device */
    BUF_GRAD_DEVICE,       /* the gradients of the unit being computed, on the device */
    BUF_TOKENS_HOST,       /* 2: input and target tokens as the host writes them, before their copy in */
    LAYOUT_BUFFER_COUNT
} layout_buffer_id;

typedef struct layout_buffer {
    const char *what;
    layout_tier tier;
    layout_use use;
    int count;          /* how many; 0 when this configuration has none */
    uint64_t bytes;     /* each, as allocated (I/O buffers: padded to 4096 plus alignment slack) */
    int io;             /* 1: used for O_DIRECT transfers (4096-aligned, padded) */
} layout_buffer;

/* What a configuration allocates, by tier and use: the sum of its buffers. */
typedef struct layout_memory {
    uint64_t device;             /* unit_weights + activations */
    uint64_t unit_weights;
    uint64_t activations;
    uint64_t host;               /* the sum below */
    uint64_t optimizer_state;
    uint64_t compute_weights;
    uint64_t checkpoints;
    uint64_t gradients;
    uint64_t staging;
} layout_memory;

typedef struct layout_unit {
    size_t n;           /* elements */
    size_t offset;      /* of its first element in the parameter vector */
    size_t lo, hi;      /* the shard of its elements this rank keeps state of: [0, n) on one rank */
    size_t local;       /* where element lo sits in the rank's state arrays (the units' shards in order) */
    size_t split;       /* part 0 is [lo, split), part 1 [split, hi) */
    size_t segs[2];     /* segments of each part */
} layout_unit;

typedef struct run_layout {
    layout_params p;
    sched_params sched;
    int n_units;        /* L + 1, or L + 2 with a head unit of its own (gpt_num_units) */
    size_t n_params;
    size_t n_local;     /* elements of every unit's shard: n_params on one rank */
    int ranks, rank;    /* 1 and 0 on one process */
    size_t max_shard;   /* elements of the largest shard of a unit, over every rank */
    size_t act_elems;   /* floats of one activation [B, T, C] */
    size_t weight_size; /* bytes per compute weight: 2 (bf16) or 4 */
    size_t segment;     /* elements per segment (at most the largest unit, rounded up) */
    size_t max_unit;    /* elements of the largest unit */
    int max_segs;       /* segments of the largest unit, both parts */
    int grad_buffers;   /* block gradient buffers (p.grad_buffers, 0 made the default) */
    layout_unit *units; /* [n_units] */
    layout_buffer buf[LAYOUT_BUFFER_COUNT];
    layout_memory memory;
} run_layout;

/* ST_EINVAL for a segment size that is not a multiple of 2048 or cuts a
 * unit into too many segments, or block gradient buffers out of range;
 * ST_ENOMEM. */
st_status layout_build(const layout_params *p, run_layout *out, st_error *err);
void layout_free(run_layout *l);

/* Bytes an I/O buffer of `bytes` payload takes as allocated: padded for
 * O_DIRECT, plus room to align it. */
uint64_t layout_io_bytes(uint64_t bytes);

/* Each kind's number of parts for a model (sched_parts): what a
 * placement's shares are of. */
void layout_parts(const gpt_config *c, int parts[PLACE_KINDS]);
/* 1 when part i of kind k is on the SSD in this layout's placement (unit i;
 * for acts, checkpoint index i): placement_on_ssd with the layout's units. */
int layout_on_ssd(const run_layout *l, place_kind k, int i);
/* The optimizer lane of unit u's steps: LAYOUT_LANE_SSD when its master
 * weights and moments or its compute weights are on the SSD (the step
 * streams them), else LAYOUT_LANE_HOST. Several ranks: always
 * LAYOUT_LANE_SSD (the worker finishes the unit's collectives, and they
 * must run in list order on every rank). */
int layout_opt_lane(const run_layout *l, int u);
/* weights, optim, grads: elements of the parameter vector memory keeps of
 * kind k, from element 0 (placement_memory_units' units): of the rank's
 * shards (the whole units on one rank), indexed by layout_host_index.
 * Host arrays of a kind are this long. (With several ranks compute adds a
 * unit's gradient into a whole-unit buffer, and memory keeps the rank's
 * shard of its sum over the ranks.) */
size_t layout_memory_elems(const run_layout *l, place_kind k);
/* Where element e (lo <= e < hi) of unit u sits in the rank's state arrays
 * (master, moments, compute weights kept in memory): offset + e on one rank. */
size_t layout_host_index(const run_layout *l, int u, size_t e);
/* Several ranks: the elements at the start of each whole-unit gradient
 * buffer (BUF_GRAD_IO_*) that receive the rank's shard of a sum over the
 * ranks, 4096-byte aligned for the store; the unit's terms follow them.
 * 0 on one rank, where the shard is the unit. */
size_t layout_grad_shard_area(const run_layout *l);

/* Elements [lo, hi) of part `part` of unit u, and of its segment j: of the
 * rank's shard (the whole unit on one rank). */
void layout_part_range(const run_layout *l, int u, int part, size_t *lo, size_t *hi);
void layout_segment_range(const run_layout *l, int u, int part, size_t j, size_t *lo, size_t *hi);
/* The store key of segment j of part `part` of unit u, for a kind of state. */
store_key layout_segment_key(store_kind kind, int u, int part, size_t j);
/* The element boundary of a share boundary x of unit u: the shard's start
 * (0 on one rank), the split, or the shard's end (n). */
size_t layout_bound(const run_layout *l, int u, double x);
/* Bytes the segments within elements [a, b) of unit u take on the SSD,
 * `elem` bytes per element, each segment padded. */
uint64_t layout_segment_bytes(const run_layout *l, int u, size_t a, size_t b, size_t elem);
/* Bytes the gradient parts within a share [lo, hi) of unit u take on the SSD. */
uint64_t layout_grad_share_bytes(const run_layout *l, int u, double lo, double hi);
/* Elements of its unit a task's share [lo, hi) covers; a task that names no
 * share (hi <= lo, as hand-made lists may) covers the whole unit. */
size_t layout_share_elements(const run_layout *l, const sched_task *t);
/* Bytes of one activation checkpoint on the SSD. */
uint64_t layout_act_bytes(const run_layout *l);

/* SSD bytes a task moves, by kind of tensor (0 for state kept in memory),
 * as the executor moves them: weights and optimizer state per segment,
 * gradients per part, checkpoints whole, each padded. */
void layout_task_traffic(const run_layout *l, const sched_task *t, uint64_t read[STORE_KIND_COUNT],
                         uint64_t written[STORE_KIND_COUNT]);

/* SSD bytes one steady iteration moves (the deferred work arriving from
 * the previous iteration counted, the set-up not): the least a schedule and
 * placement must move, the I/O side of the roofline bound. */
typedef struct layout_traffic {
    uint64_t read[STORE_KIND_COUNT], written[STORE_KIND_COUNT];
    uint64_t total_read, total_written;
} layout_traffic;
st_status layout_traffic_per_step(const run_layout *l, layout_traffic *out, st_error *err);

/* --offload auto: of the placements (the whole ones among the first
 * n_candidates of placement_at's order: 1 for a machine without an SSD,
 * else PLACEMENT_COUNT, each with memory then filled with its kinds' parts
 * in every order: placement_fills), the one whose layout `fits` accepts with
 * the least SSD traffic per steady iteration; ties go to less state on the
 * SSD. base gives everything but the placement. ST_ENOENT when none fits.
 * The executor (budgets against the buffer plan) and the simulator (a
 * described machine's memory) choose with this one rule. */
typedef int (*layout_fit_fn)(const run_layout *l, void *ctx);
st_status layout_least_traffic_placement(const layout_params *base, int n_candidates, layout_fit_fn fits, void *ctx,
                                         placement *out, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
