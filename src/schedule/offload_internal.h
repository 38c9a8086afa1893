/*
 * offload_internal.h - the parts of the schedule executor (strata/offload.h),
 * each a small struct with its own file. The executor's public functions
 * (offload.c) own one of each and wire them together; run_list
 * (offload_run.c) dispatches a list's tasks to them.
 *
 *   exec_env       offload_env.c      what every part shares: the layout, the store, the trace,
 *                                     and the time and bytes accounting
 *   opt_worker     offload_worker.c   the optimizer's threads (lanes: steps streaming the SSD, steps on
 *                                     memory alone), each with its queue of jobs in list order
 *   weight_loader  offload_weights.c  a unit's compute weights for compute, one read ahead
 *   act_pool       offload_acts.c     where each activation checkpoint is now; saves written
 *                                     behind compute, one load read ahead
 *   grad_pool      offload_grads.c    gradient accumulators: in memory, or (units on the SSD) a few buffers whose
 *                                     contents are parked in the store between uses
 *   opt_stream     offload_optim.c    one optimizer job: its share of a unit streamed through
 *                                     segment slots (phased or interleaved: opt_io_order)
 *   host_state     offload_state.c    master weights, moments and compute weights kept in memory;
 *                                     the starting state (init, given weights or a commit), commits,
 *                                     and reading the weights back
 *
 * Threads: the compute thread runs the list and calls every part; the
 * worker's lane threads run opt_stream jobs. What both touch is named at each
 * field (grad_pool's reference counts, opt_worker's queue, the stats).
 */
#ifndef STRATA_OFFLOAD_INTERNAL_H
#define STRATA_OFFLOAD_INTERNAL_H

#include <pthread.h>

#include "strata/comm.h"
#include "strata/layout.h"
#include "strata/offload.h"
#include "strata/store.h"
#include "strata/trace.h"

/* Waits that must all run even after one fails report the first failure:
 *     s = first_error(s, wait(..., s == ST_OK ? err : NULL));   // err keeps the first message */
static inline st_status first_error(st_status s, st_status next) { return s != ST_OK ? s : next; }

/* ---- exec_env: shared by every part ------------------------------------------------ */

typedef struct exec_env {
    const compute_backend *be;  /* what computes: kernels read and write its device memory only */
    const run_layout *lay;
    const gpt_config *model;
    store *st;                 /* the SSD tier, NULL when nothing lives in a store */
    trace *tr;                 /* NULL without a trace */
    int lane_compute, lane_optimizer[LAYOUT_LANES], lane_ssd0, n_paths, lane_comm;
    comm *comm;                /* the job's ranks (the compute thread's collectives), NULL on one process */
    /* Running totals since creation, steps or not (offload_trainer_step
     * keeps its own steps' share in the trainer's stats). The compute
     * thread's: */
    double compute_s;          /* compute tasks, the waits inside them excluded */
    double io_wait_s;          /* blocked on the SSD */
    double optimizer_wait_s;   /* waiting for the optimizer */
    double comm_s;             /* in collectives with the other ranks */
} exec_env;

/* The compute thread's waits so far: what a compute task that waited
 * inside (for a buffer) takes off its own time. */
static inline double env_waited(const exec_env *e) { return e->io_wait_s + e->optimizer_wait_s; }

/* Traces a store transfer on every path's lane (a tensor is striped over all). */
void env_trace_ssd(exec_env *e, const char *what, store_key k, double t0, double t1);
/* A blocking store read or write of the compute thread's, timed (compute
 * blocked on the SSD) and traced. */
st_status env_store_io(exec_env *e, int write, store_key k, void *buf, uint64_t bytes, st_error *err);
/* Waits for an asynchronous transfer the compute thread started: the time it
 * still had to wait counts as compute blocked on the SSD. */
st_status env_compute_wait(exec_env *e, store_op *op, const char *what, st_error *err);
/* Waits for n transfers (the compute thread's), returning the first error;
 * *n becomes 0. */
st_status env_compute_wait_all(exec_env *e, store_op *ops, int *n, const char *what, st_error *err);
/* A collective the compute thread ran from t0 until now (several ranks):
 * its time with the other ranks, traced on the comm lane as `what` of unit u. */
void env_comm_done(exec_env *e, const char *what, int u, double t0);
/* Waits for n transfers whatever they end with (nothing is freed under I/O); *n becomes 0. */
void env_drain(store_op *ops, int *n);

/* The transfers in flight from or into one buffer of a pool (the compute
 * thread's), started together and waited for together. */
typedef struct exec_transfers {
    store_op op[2];
    int n;
    int unit, mb;              /* what a save moves: a later read of that tensor waits for it */
} exec_transfers;
/* Waits for the transfers of each of n buffers (every one, reporting the first error). */
st_status env_wait_each(exec_env *e, exec_transfers *x, int n, const char *what, st_error *err);
void env_drain_each(exec_transfers *x, int n);
/* Store traffic per kind so far: [0] read, [1] written. */
void env_traffic(const exec_env *e, uint64_t out[2][STORE_KIND_COUNT]);
/* Each store path's I/O engine counters now (strata/io.h); the number of paths. */
int env_path_io(const exec_env *e, io_path_counters out[STORE_MAX_PATHS]);

/* ---- opt_worker: the optimizer thread ----------------------------------------------- */

/* A TASK_OPTIMIZE with the values of the step it belongs to. */
typedef struct opt_job {
    sched_task task;
    float lr, scale;
    long step_t;
    int grad_buf;              /* the grad_pool buffer it reads, or -1 (the unit's gradients stay in memory) */
} opt_job;

/* Runs one job on a lane's thread; adds its time waiting on the SSD to *io_s. */
typedef st_status (*opt_job_fn)(void *ctx, const opt_job *job, double *io_s, st_error *err);

/* One lane (layout.h's LAYOUT_LANE_*): a thread and its queue. */
typedef struct opt_lane {
    pthread_t thread;
    int started;
    pthread_cond_t job_ready;
    opt_job *jobs;             /* a ring of the worker's cap jobs (under the worker's lock) */
    int head, count;
    double busy_s, io_s;       /* its jobs' time, and of it their SSD waits (under the worker's lock) */
} opt_lane;

typedef struct opt_worker {
    exec_env *env;
    opt_job_fn run;
    void *ctx;
    int started, stop;
    pthread_mutex_t lock;
    pthread_cond_t job_done;
    opt_lane lane[LAYOUT_LANES];
    int cap;
    int *unit_pending;         /* [n_units]: jobs queued or running per unit (under lock) */
    int n_units;
    st_status status;          /* the first error a job met (under lock) */
    st_error error;
} opt_worker;

/* Starts the lanes' threads; each runs its jobs in the order they are queued. */
st_status opt_worker_start(opt_worker *w, exec_env *env, int n_units, opt_job_fn run, void *ctx, st_error *err);
/* Finishes the queued jobs and joins the threads (a no-op when not started). */
void opt_worker_stop(opt_worker *w);
/* Queues a job on its unit's lane (layout_opt_lane), waiting for room when
 * that queue is full. A unit's jobs all go to one lane, so they run in
 * list order. */
void opt_worker_enqueue(opt_worker *w, const opt_job *job);
/* Waits for the jobs of unit u (u < 0: all); returns the first error any
 * job met. The time waited counts as compute waiting for the optimizer. */
st_status opt_worker_wait(opt_worker *w, int u, st_error *err);
/* Jobs of unit u queued or running. */
int opt_worker_pending(opt_worker *w, int u);
/* Lane `lane`'s jobs' time so far, and of it their SSD waits (io_s may be NULL). */
void opt_worker_times(opt_worker *w, int lane, double *busy_s, double *io_s);

/* ---- host_state: the training state kept in memory ---------------------------------- */

typedef struct host_state {
    float *master, *m, *v;     /* optimizer state, unit layout; NULL when it lives on the SSD */
    st_bf16 *w16;              /* compute weights in memory, mixed precision */
    float *w32;                /* compute weights in memory, fp32 (== master when that is in memory too) */
} host_state;

/* The master weights (k = 0) or a moment (1, 2). */
float *host_state_of(const host_state *h, int k);

/* ---- weight_loader: a unit's compute weights ----------------------------------------- */

typedef struct weight_loader {
    exec_env *env;
    const host_state *hs;
    unsigned char *buf[2];     /* a unit's compute weights read from the SSD; the other reads ahead */
    int unit[2];               /* unit whose read is in flight into buf[b], or -1 */
    store_op *op[2];           /* those reads, one per segment */
    int n_op[2];
    int cur;                   /* the buffer compute reads now */
    void *dev;                 /* a separate device: the unit copied there (bf16 or f32) */
    float *unit32;             /* mixed precision: the loaded unit widened to f32 (device) */
    /* Several ranks: a unit's weights are gathered from every rank's shard.
     * Each buffer is free, being read into (unit[b]: this rank's shard,
     * from the SSD), staged (the shard moved to its place in the unit,
     * ready to gather), being gathered, or gathered and read by compute
     * (in_use, until the next unit's load). */
    int staged[2];             /* the unit staged in buf[b], or -1 */
    comm_request *gather[2];   /* a gather in flight into buf[b] ... */
    int gather_unit[2];        /* ... of this unit, or -1 */
    int in_use;                /* the buffer compute reads, or -1 */
} weight_loader;

/* Unit u's f32 compute weights on the device: read ahead already, or read
 * now (weights on the SSD), or from memory; copied to a separate device,
 * widened when mixed. The caller has waited for the unit's optimizer steps. */
st_status weights_load(weight_loader *wl, int u, const float **out, st_error *err);
/* Starts reading unit u ahead into the free buffer, if it is free. */
st_status weights_read_ahead(weight_loader *wl, int u, st_error *err);
/* Several ranks. TASK_LOAD_WEIGHTS: this rank's shard of unit u's weights
 * staged in a buffer (read from the SSD, ahead or now, or copied from
 * memory; the caller has waited for the unit's optimizer steps); nothing
 * when its gather has started already. */
st_status weights_stage(weight_loader *wl, int u, st_error *err);
/* TASK_GATHER_WEIGHTS: the whole unit from every rank's shard (the gather
 * started ahead, or run now), then as weights_load gives it. */
st_status weights_gather(weight_loader *wl, int u, const float **out, st_error *err);
/* Starts unit u's gather ahead of its task when its shard is at hand
 * without waiting: in memory once its steps are done (steps_done), or read
 * ahead from the SSD completely. The caller makes sure it is the next
 * collective of the list, so that every rank starts its collectives in
 * one order. */
st_status weights_gather_ahead(weight_loader *wl, int u, int steps_done, st_error *err);
/* The request of a gather in flight, or NULL: to drive transfers with. */
comm_request *weights_gather_pending(const weight_loader *wl);
/* Waits for every read and gather in flight (nothing is freed under I/O). */
void weights_drain(weight_loader *wl);

/* ---- grad_reducer: gradients summed over the ranks ------------------------------------
 * Several ranks: TASK_REDUCE_GRADS starts a unit's reduce-scatter, and
 * whoever reads the unit's shard of the sum first finishes it: the
 * optimizer worker before the unit's step, or the compute thread (the
 * norm, the step's end, a scratch slot or a gradient buffer wanted for
 * another unit, the unit's next sum, a save or release of its buffer). The
 * lock makes one thread at a time wait for a request. */

typedef struct grad_pool grad_pool;

typedef struct grad_reducer {
    exec_env *env;
    grad_pool *gp;               /* the buffers it sums from and the accumulators it adds into */
    pthread_mutex_t lock;
    comm_request **req;          /* [n_units] the unit's reduce-scatter in flight, or NULL (under lock) */
    int *slot_of;                /* [n_units] its scratch slot */
    float *scratch[LAYOUT_REDUCE_SLOTS];
    int slot_unit[LAYOUT_REDUCE_SLOTS];   /* the unit using a slot, or -1 (under lock) */
    long slot_seq[LAYOUT_REDUCE_SLOTS];   /* when it started: the oldest is finished first for room */
    long seq;
    int *buf_of;                 /* [n_units] the grad_pool buffer it sums (under lock) */
    double *sumsq;               /* [n_units] the accumulator's sum of squares, once finished (under lock) */
} grad_reducer;

/* Starts summing unit u's gradient, in the buffer compute added it into,
 * over the ranks into the buffer's shard area (the compute thread:
 * collectives start in list order); the buffer is the reducer's until the
 * sum is added into the unit's accumulator in memory (gradients on the
 * SSD: the unit keeps it, and its save finishes the sum first). */
st_status reduce_start(grad_reducer *r, int u, st_error *err);
/* Finishes unit u's reduce-scatter if one is in flight: adds the rank's
 * shard of the sum into the unit's accumulator in memory (the iteration's
 * first sum replaces what it held) and gives the buffer back, takes the
 * accumulator's sum of squares into sumsq[u]; on_worker: called by the
 * optimizer worker (its wait is not the compute thread's). */
st_status reduce_finish(grad_reducer *r, int u, int on_worker, st_error *err);
/* Finishes the oldest reduce-scatter in flight; *done 0 when none was. */
st_status reduce_finish_oldest(grad_reducer *r, int *done, st_error *err);
/* Finishes every unit's (nothing in flight afterwards; the first error). */
st_status reduce_finish_all(grad_reducer *r, st_error *err);

/* ---- act_pool: activation checkpoints ------------------------------------------------ */

typedef struct act_pool {
    exec_env *env;
    int M;
    float *host;               /* the checkpoints memory keeps (the last blocks', placement_on_ssd) */
    float **slot;              /* [(L+1) * M]: where act[u][m] is now, NULL if only on the SSD */
    float *buf[LAYOUT_ACT_BUFFERS];
    int free_list[LAYOUT_ACT_BUFFERS], n_free;
    exec_transfers rd[LAYOUT_ACT_BUFFERS];  /* a read ahead into buf[i] */
    exec_transfers wr[LAYOUT_ACT_BUFFERS];  /* a save from buf[i], written behind */
} act_pool;

/* Where act[u][m] is now (NULL: only on the SSD). */
float *acts_at(const act_pool *ap, int u, int m);
/* A buffer for a new version of act[u][m]. */
st_status acts_make(act_pool *ap, int u, int m, float **out, st_error *err);
/* TASK_SAVE_ACT: starts writing act[u][m] behind compute. */
st_status acts_save(act_pool *ap, int u, int m, st_error *err);
/* act[u][m] is on the SSD (or going there) and not needed in memory until loaded again. */
void acts_drop(act_pool *ap, int u, int m);
/* TASK_LOAD_ACT: act[u][m] in memory, read ahead already or read now. */
st_status acts_load(act_pool *ap, int u, int m, st_error *err);
/* Starts reading act[u][m] ahead, when a buffer is free. */
st_status acts_read_ahead(act_pool *ap, int u, int m, st_error *err);

/* ---- grad_pool: gradient accumulators ------------------------------------------------ */

typedef struct grad_buf {
    float *data;               /* the rank's shard: element e of the unit at data[e - lo] (one rank: the
                                  unit); several ranks: its terms after it, at data[unit_at + e] */
    int held;                  /* the compute thread still uses it (under lock) */
    int jobs;                  /* queued optimizer jobs that read it (under lock) */
} grad_buf;

struct grad_pool {
    exec_env *env;
    grad_reducer *reducer;     /* several ranks: it sums the buffers into the accumulators */
    int n_units;
    int sharded;               /* several ranks: compute adds into buffers, and `all` holds the rank's
                                  shards of the sums over the ranks (accumulated there by the reducer) */
    size_t unit_at;            /* layout_grad_shard_area: where a buffer's whole unit starts (0: one rank) */
    float *all;                /* the accumulators memory keeps (units from 0), by layout_host_index; else NULL */
    grad_buf buf[LAYOUT_GRAD_BUFFERS];   /* whole units being added into (a unit on the SSD, or several ranks):
                                            the end units' (embedding, a head of its own), then the blocks' */
    exec_transfers rd[LAYOUT_GRAD_BUFFERS];   /* a read ahead into buf[i] (its parts) */
    exec_transfers wr[LAYOUT_GRAD_BUFFERS];   /* saves from buf[i] (its parts), of unit wr[i].unit */
    int *of;                   /* [n_units]: the buffer holding the unit's gradients, or -1 (on the SSD;
                                  several ranks: none taken, or given to the reducer) */
    char *fresh;               /* [n_units]: zeroed in this iteration yet (several ranks: its accumulator
                                  holds a sum of this iteration; the reducer's, under its lock) */
    size_t *loaded_lo, *loaded_hi;   /* several ranks, [n_units]: the elements a load put in the unit's
                                        shard, until its terms are made from them (hi 0: none) */
    pthread_mutex_t lock;      /* guards held and jobs: the worker gives buffers back */
    pthread_cond_t freed;
};

/* Unit u's gradients in memory as compute adds into them (the whole unit),
 * or NULL. */
float *grads_of(const grad_pool *gp, int u);
/* Several ranks: the rank's shard of unit u's accumulated sum, in memory. */
float *grads_accumulator(const grad_pool *gp, int u);
/* Several ranks: 1 when unit u's sums are added into its accumulator in
 * memory; 0 when its gradients are on the SSD, where the accumulator is the
 * rank's shard of the unit's buffer (loaded into it before the terms, so
 * that the sum adds them; saved from it after). */
int grads_sum_in_memory(const grad_pool *gp, int u);
/* Several ranks: the reducer takes unit u's buffer (its index), or gives
 * buffer b back once summed. */
int grads_hand_over(grad_pool *gp, int u);
void grads_give_back(grad_pool *gp, int b);
/* A new iteration: every unit's gradients start from zero at its first term. */
void grads_new_iteration(grad_pool *gp);
/* Unit u's gradients are about to receive a term: zeroed (in a buffer taken
 * for them) at the iteration's first. */
st_status grads_touch(grad_pool *gp, int u, st_error *err);
/* The compute thread is done with unit u's buffer; queued optimizer jobs
 * may still read it, and it is free once they are done (several ranks: a
 * sum still moving into it is finished first). */
st_status grads_release(grad_pool *gp, int u, st_error *err);
/* TASK_SAVE_GRAD: writes the share behind compute (several ranks: once its
 * sum over the ranks is finished). */
st_status grads_save(grad_pool *gp, const sched_task *k, st_error *err);
/* TASK_LOAD_GRAD: read ahead already, or read now. */
st_status grads_load(grad_pool *gp, const sched_task *k, st_error *err);
/* Starts reading the share a LOAD_GRAD names ahead, when a buffer can be spared. */
st_status grads_read_ahead(grad_pool *gp, const sched_task *k, st_error *err);
/* An optimizer job of unit u will read its buffer: returns the buffer's
 * index (-1: gradients in memory); the job gives it back with grads_unref. */
int grads_ref(grad_pool *gp, int u);
void grads_unref(grad_pool *gp, int buf);
/* The gradients a job reads: its unit's, from its buffer or memory; the
 * rank's shard (element e of the unit at [e - lo]). */
const float *grads_for_job(const grad_pool *gp, const opt_job *job);

/* ---- opt_stream: one optimizer job ------------------------------------------------- */

typedef struct opt_slot {
    float *buf[3];             /* master, m, v of one segment (when on the SSD) */
    unsigned char *wout;       /* its new compute weights (when on the SSD) */
    store_op rd[3], wr[4];
    int n_rd, n_wr;
    double rd_t0, wr_t0;       /* when they were started, for the trace */
    int u, part;
    size_t seg;
} opt_slot;

typedef struct opt_stream {
    exec_env *env;
    host_state *hs;
    const adamw_hparams *adam;
    opt_slot slot[LAYOUT_OPT_SLOTS];
} opt_stream;

/* AdamW on the job's share of its unit, from gradients g (the rank's shard
 * of the unit's: element e at g[e - lo]), with
 * state on the SSD streamed segment by segment through the slots; the new
 * compute weights are written in the same pass. Runs on the worker. */
st_status opt_stream_run(opt_stream *os, const opt_job *job, const float *g, double *io_s, st_error *err);

/* ---- the executor ----------------------------------------------------------------- */

struct offload_trainer {
    offload_config cfg;
    run_layout lay;                    /* parts, segments, the buffer plan */
    sched_list first, steady, flush;   /* without and with deferred work coming in; flush only */
    sched_analysis an_first, an_steady, an_flush;
    gpt_config c;
    int L1, M, B, T;                   /* L1: units (the embedding, the blocks, a head of its own); M: this
                                          rank's micro-batches */
    int M_global;                      /* the global batch's (M times the ranks) */
    int n_acts;                        /* checkpoint indices 1..n_acts; act[n_acts] is the head's input */
    int head;                          /* the head's unit: 0 (tied) or L1 - 1 */
    size_t NC;                         /* floats of one activation [B,T,C] */
    exec_env env;
    host_state hs;
    weight_loader wl;
    act_pool acts;
    grad_pool grads;
    opt_stream opt;
    opt_worker worker;
    grad_reducer reducer;
    /* compute buffers: device memory, but for the host staging named so */
    const float *weights;              /* the loaded unit's f32 weights */
    float *block_acts, *scratch;
    float *dact;                       /* [M][B,T,C] */
    float *eval_buf;                   /* [2][B,T,C] for forward-only evaluation */
    int32_t *inputs, *targets;         /* [M][B*T] */
    /* a separate device only (on a unified one the host buffers are used in place): */
    int32_t *tokens_host[2];           /* inputs and targets as the host writes them (host memory) */
    float *act_dev[2];                 /* a block's input checkpoint and its output */
    float *grad_dev;                   /* the gradients of the unit being computed ... */
    int grad_dev_unit;                 /* ... which is this one, or -1 */
    float *sbuf;                       /* one segment of f32: set-up, reading weights back, commits */
    float *mb_loss;                    /* [M] */
    double *unit_sumsq;                /* [L1] */
    float clip_scale_now;
    const sched_analysis *an;          /* of the list being run */
    uint64_t allocated;                /* bytes of the plan's buffers allocated so far (creation included) */
    uint64_t traffic_base[2][STORE_KIND_COUNT];    /* store traffic of the set-up (read, written) */
    io_path_counters io_steps[STORE_MAX_PATHS];    /* each path's I/O within the steps after this trainer's
                                                      first (offload_trainer_path_io) */
    double io_steps_s;                             /* those steps' wall seconds */
    uint64_t traffic_aside[2][STORE_KIND_COUNT];   /* and of evaluations, commits and reading the weights back:
                                                      none is training's */
    offload_stats stats;               /* the steps' share of the compute thread's time (bytes and the
                                          worker's time are filled in by offload_trainer_stats) */
    int deferred_pending;
    float prev_lr, prev_scale;
    long prev_t;
    long step;
};

/* One buffer of the layout's plan: what the budgets were checked against is
 * what is allocated (NULL when the plan has none, or on failure). */
void *plan_alloc(offload_trainer *t, layout_buffer_id id);

/* offload_state.c: the starting state (a fresh initialization from the
 * seed, the caller's weights, or a commit in resume_paths), unit by unit,
 * into memory and the store; the store's activation tensors; the first
 * commit of a new store. */
st_status state_start(offload_trainer *t, const float *init, st_error *err);
/* The master weights and moments kept in memory into the store's state
 * tensors (the layout the SSD placement uses, so that a resume may place
 * them either way). */
st_status state_write_host(offload_trainer *t, st_error *err);

/* offload_run.c: runs a task list; lr and step_t are the step's. */
st_status run_list(offload_trainer *t, const sched_list *l, const sched_analysis *an, float lr, long step_t,
                   st_error *err);
/* Several ranks: finishes every unit's reduce-scatter and takes the shards'
 * sums of squares into unit_sumsq (this rank's part of the norm). */
st_status reduce_sums(offload_trainer *t, st_error *err);
/* Rows of T+1 tokens into the inputs and targets of compute, as the host
 * writes them (on a separate device, the list's TOKENS_TO_DEVICE copies them in). */
void run_tokens_stage(offload_trainer *t, const int32_t *rows, int n_rows, int T);
/* A forward pass over tokens[B][T+1] for its loss, unit by unit. */
st_status run_eval_forward(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err);

#endif
