/*
 * strata/run.h - a training run's engine: one interface over the two
 * trainers, the in-memory trainer (strata/train.h) and the schedule
 * executor (strata/offload.h), with the run's life around them: the store
 * it commits to, resuming from the last commit (in place, or moving the
 * state to other directories), committing, stepping, evaluating and
 * reading the weights back. Every call returns a status. `strata train`
 * keeps its flags and its printing; this is the rest.
 *
 *     store_dirs dirs;
 *     store_dirs_parse("/nvme0/run,/nvme1/run", &dirs, &err);
 *     train_run_config rc = {.train = tc, .executor = 1, .schedule = SCHED_VERTICAL,
 *                            .place = {.optim = 1}, .store = &dirs};
 *     train_run *run;
 *     if (train_run_create(&run, &rc, NULL, &err) != ST_OK) ...   // NULL: init from tc.seed
 *     for (...) train_run_step(run, tokens, &stats, &err);           // tokens: [micro_batches][B][T+1]
 *     ckpt_record rec = {.step = train_run_steps_done(run), .model = tc.model, ...};
 *     train_run_commit(run, &rec, &err);                             // durable: --resume continues here
 *     train_run_free(run);
 *
 * Resuming: train_run_last_commit reads the record of the last commit,
 * train_run_check_commit holds it to the run, and a run created with
 * .resume = the directories it committed to continues from that commit
 * bit for bit. Resuming into other directories moves the state: commit it
 * there (train_run_commit), record where it is now, then store_remove the
 * old ones; train_run_prepare_move clears what an interrupted move left.
 */
#ifndef STRATA_RUN_H
#define STRATA_RUN_H

#include "strata/checkpoint.h"
#include "strata/offload.h"
#include "strata/store.h"
#include "strata/train.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct train_run_config {
    train_config train;
    int executor;                /* 0: the in-memory trainer; 1: the schedule executor, with: */
    sched_kind schedule;
    double alpha;
    placement place;
    uint64_t mem_device, mem_host;   /* budgets (0: none), checked against the executor's buffer plan */
    opt_io_order opt_io;         /* how optimizer jobs order their SSD reads and writes (strata/layout.h) */
    int grad_buffers;            /* block gradient buffers when gradients live on the SSD (strata/layout.h; 0: 3) */
    const char *trace_path;      /* a Chrome trace of the executor, or NULL */
    const store_dirs *store;     /* where the run commits (and the executor keeps what it places on the SSD) */
    const store_dirs *resume;    /* NULL: a new run; else the directories of the store whose last commit it
                                    continues: the same as store (in place), or others (the state is copied
                                    into a new store at store) */
    long resume_steps;           /* the step of that commit */
    size_t segment_elems;        /* the executor's segment (offload_config.segment_elems; 0: the default);
                                    resuming in place it must be the commit's (ckpt_record.segment) */
    int resume_ranks;            /* the ranks that made it (0 or 1: one process): another number than
                                    this run's reshards it (offload_config.resume_ranks: resume is then
                                    the run's directories before any rank's spelling) */
    io_engine *io;               /* the executor's I/O engine (must outlive the run), or NULL: its store's own */
    gpt_unit_reader init_read;   /* the starting weights read unit by unit when train_run_create gets no init */
    void *init_ctx;              /* array (a checkpoint: hf_checkpoint_read_unit); NULL: from train.seed */
    struct comm *comm;           /* data parallel over the job's ranks (offload_config.comm; the executor
                                    only), or NULL: one process. store is then this rank's own */
} train_run_config;

/* The executor's configuration of a run (the layout, memory need and
 * traffic of strata/offload.h read it). */
offload_config train_run_executor_config(const train_run_config *c);

/* --offload auto for the executor: the placement with the least SSD
 * traffic per step that fits the budgets (layout_least_traffic_placement);
 * when none does, the one that needs the least host memory, so that
 * creating the run says what it needs. */
st_status train_run_auto_placement(const train_run_config *c, placement *out, st_error *err);

typedef struct train_run train_run;

/* init: gpt_num_params floats to start from (copied), or NULL for a fresh
 * initialization from train.seed; ignored when resuming. */
st_status train_run_create(train_run **out, const train_run_config *c, const float *init, st_error *err);
void train_run_free(train_run *r);

/* One optimizer step on tokens[micro_batches][B][T+1]. */
st_status train_run_step(train_run *r, const int32_t *tokens, train_step_stats *stats, st_error *err);
/* Mean loss on tokens[B][T+1] (B, T at most the training micro-batch's)
 * with the weights of the last completed step. */
st_status train_run_eval(train_run *r, const int32_t *tokens, int B, int T, float *loss, st_error *err);
/* Runs the optimizer work still deferred: the weights are those of the last
 * completed step (before reading them back). */
st_status train_run_flush(train_run *r, st_error *err);
/* Unit u's fp32 master weights (gpt_unit_numel floats): a gpt_unit_reader
 * (strata/gpt_io.h) over a train_run, after train_run_flush. */
st_status train_run_read_unit(void *run, int unit, float *out, st_error *err);
/* Makes the state of the last completed step durable in the run's store,
 * with rec (its step, model and data position) as the commit's record; its
 * segment is the run's own, whatever rec says. */
st_status train_run_commit(train_run *r, const ckpt_record *rec, st_error *err);
long train_run_steps_done(const train_run *r);
/* The schedule executor behind the run (its stats and trace), or NULL. */
offload_trainer *train_run_executor(train_run *r);

/* Bytes of the buffers a run allocates up front: what `strata train` says
 * it needs. The executor's buffer plan (offload_memory_need: the device's
 * working set and the host's share, one RAM on the CPU backend), or the
 * in-memory trainer's state, workspace and commit staging. The process's
 * own code, libraries and thread pools come on top (its peak resident
 * memory, st_peak_rss_bytes, holds both). */
uint64_t train_run_memory_need(const train_run_config *c);
/* What the run allocated of it: all of it for a fresh run; the executor
 * allocates less with given weights, which need no initialization buffer,
 * and when resuming, whose commit reader sizes its own staging
 * (offload_trainer_memory). */
uint64_t train_run_memory_allocated(const train_run *r);

/* ---- resuming -------------------------------------------------------------------------- */

/* The record of the last commit of the store in dirs; *found = 0 (and ST_OK)
 * when the directories hold no store (store_dirs_hold_store), or a store
 * without a commit record: the run stopped before its first commit. A
 * store that is there but will not open (a file missing, say) is an error. */
st_status train_run_last_commit(const store_dirs *dirs, ckpt_record *out, int *found, st_error *err);
/* The same for the commit before the last, while the store keeps it
 * (store_commit keeps it until the store next writes): what a job of
 * several ranks goes back to (store_revert_commit) when a crash let only
 * some ranks complete their last commit. *found = 0 when none is kept. */
st_status train_run_commit_before_last(const store_dirs *dirs, ckpt_record *out, int *found, st_error *err);
/* Reads back the whole last commit in dirs and checks every chunk's
 * checksum, so that a damaged commit is found before a step is trained on
 * it (a damaged chunk read mid-step fails the step, and so every resume).
 * ST_ECORRUPT (or the failed read's status) naming the first bad chunk;
 * *checked (may be NULL) gets the counts either way. */
st_status train_run_verify_commit(const store_dirs *dirs, store_scrub_result *checked, st_error *err);
/* The commit belongs to this run: the same model, the same training data
 * (by token count), and the run is not finished (its step < steps). */
st_status train_run_check_commit(const ckpt_record *c, const gpt_config *model, uint64_t data_tokens, long steps,
                                 st_error *err);
/* Readies the directories a resume moves the state to: creates them, and
 * removes a copy an interrupted move left there (*removed = 1): a store
 * with no commit record (the copy had not committed), or one whose record
 * is this very commit's (it had, but the run's record did not name it yet).
 * Any other store there is someone's state: ST_EEXIST. */
st_status train_run_prepare_move(const store_dirs *to, const ckpt_record *ours, int *removed, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
