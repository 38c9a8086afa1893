/*
 * strata/offload.h - the schedule executor: trains by running the task
 * lists of strata/schedule.h, one iteration per call, with the optimizer
 * step split per unit and partly deferred into the next iteration's forward.
 *
 * This is the engine of SSD-offloaded training (issue 5). It runs both
 * schedules (vertical snake, horizontal), any alpha, clipping on or off, fp32
 * or mixed precision, with each kind of state in host memory or in the SSD
 * store (strata/store.h): compute weights, master weights with Adam moments,
 * activation checkpoints, and gradient accumulators. Its results match the
 * in-memory trainer (strata/train.h): bit for bit for the horizontal
 * schedule, up to the rounding of a different gradient summation order for
 * the vertical one, wherever the state lives.
 *
 * Three threads of work go on at once. The compute thread runs the list's
 * tasks in order. Optimizer steps (TASK_OPTIMIZE) run on a worker thread, in
 * list order: each streams its share of a unit through three slots of
 * segment buffers (phased by default: three segments read, stepped and
 * written back at a time; or interleaved: read ahead, step, write behind;
 * offload_config.opt_io) and writes the new compute weights in the same
 * pass; a unit's weights are loaded only after
 * its pending steps finish. So the deferred share (alpha) of each unit
 * whose step streams (sched_deferred_share) overlaps the next forward, and with alpha < 1 and no clipping the rest
 * overlaps backward. The I/O engine moves bytes beside both: after each
 * load of weights, checkpoints or gradients, the next load of that kind is
 * started when its inputs are final, and saves of checkpoints and gradients
 * are written behind compute.
 *
 * Gradients on the SSD (place.grads; for a share, of the units there)
 * means memory holds gradient buffers for a few units, not for them all: the embedding unit's, and three
 * shared by the blocks (the one being accumulated, one read ahead, one that
 * a queued optimizer step still reads). A gradient that must outlive its
 * buffer (horizontal's accumulators between micro-batches, the deferred
 * share) is parked in the store.
 *
 * Memory: the run's layout (strata/layout.h) plans every buffer; budgets
 * given in the config are checked against the plan first (a configuration
 * that does not fit is refused with ST_ENOMEM saying how much it needs and
 * for what), then exactly the plan's buffers are allocated, once, and
 * written, so that they are resident from the start.
 *
 * On the SSD each unit u is stored as the layout's two parts: elements
 * [0, s_u) stepped during backward and [s_u, n_u) deferred (alpha); weights
 * and optimizer state are stored per segment of a part (segment_elems).
 * Tensors: weights[u, p*65536+j] (bf16, or f32 in fp32 mode), master,
 * adam_m, adam_v [u, p*65536+j] (f32), grads[u, p] (f32, volatile),
 * activations[u, m] (f32, volatile).
 *
 *     offload_config oc = {.train = tc, .schedule = SCHED_VERTICAL, .alpha = 0.25};
 *     offload_trainer *t;
 *     if (offload_trainer_create(&t, &oc, NULL, &err) != ST_OK) ...
 *     for (...) offload_trainer_step(t, tokens, &stats, &err);   // tokens: [micro_batches][B][T+1]
 *     offload_trainer_flush(t, &err);        // deferred optimizer work, before saving weights
 *     const float *w = offload_trainer_params(t);
 */
#ifndef STRATA_OFFLOAD_H
#define STRATA_OFFLOAD_H

#include "strata/layout.h"
#include "strata/schedule.h"
#include "strata/store.h"
#include "strata/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct offload_config {
    train_config train;    /* model, precision, B, T, micro_batches (M), lr, AdamW, clip, seed;
                              backend: NULL or the CPU backend (the executor's buffers are host memory) */
    sched_kind schedule;
    double alpha;          /* share of each streaming unit's optimizer step deferred to the next forward
                              (sched_deferred_share) */
    placement place;       /* each kind of state in the SSD store or in host memory; gradients on the SSD
                              means a few units' buffers in memory, parked in the store */
    const char *const *store_paths;                  /* store directories (one per drive): needed when anything is on the
                                                        SSD; with everything in memory, where commits go (none: no commits) */
    int n_store_paths;
    /* Resuming (strata train --resume): start from the last commit of the
     * store in these directories, not from init. The same directories as
     * store_paths: that store is reopened and used in place (its state
     * tensors must have this run's layout: the same schedule, alpha,
     * clipping and segment size); others: its state is copied into a new
     * store at store_paths (the caller removes the old one once the new one
     * holds a commit). Any placement resumes from any other. */
    const char *const *resume_paths;
    int n_resume_paths;
    long resume_steps;        /* steps the committed state has done */
    int resume_ranks;         /* how many ranks made the commit (0 or 1: one process). The same as this
                                 run's: resume_paths are this rank's own store (in place or moved, as
                                 above). Another number: resume_paths are the run's directories before
                                 any rank's spelling (store_dirs_of_rank gives each committing rank's),
                                 every such store is opened read only and this rank's shards are read
                                 from them resharded, into a new store at store_paths (which must not be
                                 any of theirs) */
    io_engine *engine;        /* the store's I/O engine (it must outlive the trainer; fault injection goes
                                 through it), or NULL: the store makes its own */
    uint64_t mem_device;   /* budget for the compute working set (0: none) */
    uint64_t mem_host;     /* budget for state kept in host memory and I/O staging (0: none) */
    const char *trace_path;   /* write a Chrome trace here (lanes: compute, optimizer, each SSD path), or NULL */
    size_t segment_elems;     /* elements per store segment of weights and optimizer state, a multiple of
                                 2048 (0: LAYOUT_SEGMENT_DEFAULT); the optimizer streams one segment at a time */
    opt_io_order opt_io;      /* how an optimizer job orders its SSD reads and writes (default phased) */
    int grad_buffers;         /* block gradient buffers when gradients live on the SSD (layout_params; 0: 3) */
    /* The starting weights read unit by unit (a checkpoint larger than
     * memory streams into the store), when offload_trainer_create gets no
     * init array; NULL: drawn from train.seed. Ignored when resuming. */
    gpt_unit_reader init_read;
    void *init_ctx;
    /* Data parallel (strata/comm.h): the job's ranks, or NULL (one process).
     * With N > 1 ranks every rank creates a trainer with the same config
     * but its own store_paths; train.micro_batches is the global batch's
     * count M, which N must divide, and offload_trainer_step takes this
     * rank's M / N micro-batches (the global batch's micro-batches rank *
     * M / N onward). Each rank keeps its shard of every unit's master
     * weights, moments and compute weights (strata/layout.h's layout_unit
     * lo, hi); a unit's weights are gathered from the shards when it is
     * loaded and its gradient is reduce-scattered (summed over the ranks,
     * in rank order) once it is complete (horizontal: each micro-batch's),
     * each rank keeping its shard of the sums, then each rank steps its
     * shard.
     * Losses and the gradient norm are sums over the ranks. Every call
     * below that steps, evaluates, flushes, commits or reads weights back
     * is then collective: every rank makes it, in the same order. Resuming
     * reads each rank's shards from its own store (the same number of
     * ranks). Not yet with several ranks: a separate device
     * (ST_EUNSUPPORTED). */
    struct comm *comm;
} offload_config;

/* The layout of this configuration (strata/layout.h): its parts, segments,
 * buffer plan and traffic. What offload_trainer_create allocates is exactly
 * the plan's buffers; the simulator reads the same layout. */
layout_params offload_layout_params(const offload_config *cfg);
st_status offload_layout(const offload_config *cfg, run_layout *out, st_error *err);

/* What offload_trainer_create allocates, by budget (the layout's memory;
 * zero for a configuration the layout refuses). */
void offload_memory_need(const offload_config *cfg, layout_memory *out);

/* SSD bytes one steady-state iteration moves (padding included: what the
 * drive sees), by kind of tensor (strata/store.h's store_kind): the layout's
 * layout_traffic_per_step. How --offload auto ranks placements. */
st_status offload_traffic_per_step(const offload_config *cfg, layout_traffic *out, st_error *err);

typedef struct offload_trainer offload_trainer;

/* init: gpt_num_params floats to start from (copied), or NULL for a fresh
 * initialization from train.seed (the same as trainer_create's). */
st_status offload_trainer_create(offload_trainer **out, const offload_config *cfg, const float *init, st_error *err);
void offload_trainer_free(offload_trainer *t);
/* One iteration on tokens[micro_batches][B][T+1]; stats as trainer_step's. */
st_status offload_trainer_step(offload_trainer *t, const int32_t *tokens, train_step_stats *stats, st_error *err);
/* Runs the optimizer work still deferred, so that the weights are those of
 * the last completed step. Steps may continue afterwards. */
st_status offload_trainer_flush(offload_trainer *t, st_error *err);
/* Copies the fp32 master weights (gpt_num_params floats; those of the last
 * completed step after a flush) into out, reading them from the SSD when
 * they live there. */
st_status offload_trainer_read_params(offload_trainer *t, float *out, st_error *err);
/* The same for one unit (gpt_unit_numel floats into out): what saving a
 * model larger than memory reads, one unit at a time. */
st_status offload_trainer_read_unit(offload_trainer *t, int unit, float *out, st_error *err);
/* Mean loss on tokens[B][T+1] (B, T at most the training micro-batch's) with
 * the weights of the last completed step: flushes deferred work and waits
 * for the saves still being written first, then runs a forward pass unit by
 * unit, loading weights as training does. */
st_status offload_trainer_eval(offload_trainer *t, const int32_t *tokens, int B, int T, float *loss, st_error *err);
long offload_trainer_steps_done(const offload_trainer *t);
/* Elements per store segment of its state (segment_elems, or the default). */
size_t offload_trainer_segment(const offload_trainer *t);
/* Where the training steps' time went and what they moved (docs/ARCHITECTURE.md,
 * "What a run prints", says how `strata train` prints each figure).
 *
 * step_s is the wall time inside offload_trainer_step, summed over the
 * steps. The compute thread's three figures are disjoint parts of it,
 * measured inside steps only (work between steps, evaluations, flushes,
 * commits, reading the weights back, is left out): so compute_s +
 * compute_io_s + optimizer_wait_s <= step_s, and the rest of step_s is the
 * compute thread's own work between tasks (staging tokens, zeroing
 * gradients, starting transfers and checksumming what they write).
 *
 * The optimizer worker runs beside the compute thread, in two lanes beside
 * each other (steps that stream state through the SSD, steps of state all
 * in memory): its time is not a part of step_s, and counts every job, the
 * deferred ones a flush runs outside a step included.
 *
 * Bytes are training's: the steps' and the deferred work flushed after
 * them; not the set-up, evaluations, commits or reading the weights back.
 * So over whole iterations (every deferred share flushed) they are steps
 * times offload_traffic_per_step, exactly. */
typedef struct offload_stats {
    long steps;
    double step_s;             /* wall time inside offload_trainer_step */
    double compute_s;          /* compute thread: running compute tasks (waits inside them not counted) */
    double compute_io_s;       /* compute thread: blocked on the SSD (a load not read ahead in time, a buffer
                                  whose save is still being written) */
    double optimizer_wait_s;   /* compute thread: waiting for the optimizer (a unit's steps before its weights
                                  load, a gradient buffer a queued step still reads) */
    double comm_s;             /* compute thread: in collectives with the other ranks (0 on one) */
    double optimizer_s;        /* worker's SSD lane: busy with jobs (AdamW and its SSD transfers) */
    double worker_io_s;        /* worker's SSD lane: of optimizer_s, waiting for its SSD reads and writes */
    double optimizer_host_s;   /* worker's host lane, beside the SSD lane: busy with AdamW on state in memory */
    uint64_t bytes_read[STORE_KIND_COUNT];      /* by store kind: weights, master, adam_m, adam_v, grads, activations, ... */
    uint64_t bytes_written[STORE_KIND_COUNT];
} offload_stats;
void offload_trainer_stats(const offload_trainer *t, offload_stats *out);
/* Each SSD path's I/O engine counters within the steps after this trainer's
 * first (strata/io.h): the bytes it moved and the seconds reads, writes, and
 * both, were in flight; *seconds: those steps' wall time, which the busy
 * seconds are a part of. Bytes over busy seconds are the rates the drive
 * served training at, what a hardware description's read_gbps and
 * write_gbps stand for. What runs between steps (evaluations, commits,
 * saves: long bulk transfers at other rates) is left out, and so is the
 * first step, which writes each tensor's two slots for the first time.
 * Returns the number of paths (0 without a store); the counters are zero
 * until a second step ends. */
int offload_trainer_path_io(const offload_trainer *t, io_path_counters out[STORE_MAX_PATHS], double *seconds);
/* Waits for the optimizer's queued steps and for every save still being
 * written behind: afterwards nothing is in flight. */
st_status offload_trainer_sync(offload_trainer *t, st_error *err);
/* Makes the store's state that of the last completed step, durable: runs
 * the deferred optimizer work, waits for every write, writes the master
 * weights and moments it keeps in host memory into the store's state
 * tensors (strata/checkpoint.h), records meta (at most 1 MiB: the caller's
 * description of the step) beside it, and commits. A reopened store shows
 * this state, and resume_paths continues from it. Its time and bytes are
 * not counted in the stats. */
st_status offload_trainer_commit(offload_trainer *t, const void *meta, size_t n, st_error *err);
/* Syncs and finishes the trace file (also done by free). */
st_status offload_trainer_close_trace(offload_trainer *t, st_error *err);

/* The memory its layout planned, and the bytes of the plan's buffers it
 * allocated (creation's transient buffers included): never more than the
 * plan, and equal to it for a fresh run initialized from its seed (given
 * weights need no initialization buffer; a resumed run's commit reader
 * sizes its own staging by the commit it reads). */
void offload_trainer_memory(const offload_trainer *t, layout_memory *planned, uint64_t *allocated);

/* Bytes moved to and from the SSD store so far (0 without a store). */
void offload_trainer_io_bytes(const offload_trainer *t, uint64_t *read, uint64_t *written);

#ifdef __cplusplus
}
#endif
#endif
