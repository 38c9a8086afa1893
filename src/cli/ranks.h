/*
 * ranks.h - `strata train` on several ranks (mpirun -np N): what the
 * command line adds to the executor's data parallelism (offload_config.comm).
 *
 *   - Each rank keeps its share of the state in store directories of its
 *     own, --store (or RUN_DIR/store) as store_dirs_of_rank spells them for
 *     the rank: `--store /nvme0/run` gives /nvme0/run/rank-0,
 *     /nvme0/run/rank-1, ..., `--store /nvme%r/run` /nvme0/run, /nvme1/run,
 *     and on real hosts each node's ranks keep theirs on its own drives.
 *   - Rank 0 keeps the run directory (run.json, metrics, weights) and
 *     prints; the other ranks print only their own errors.
 *   - The ranks agree before they go on: after setting up (a rank that
 *     failed stops them all, and only it says why), and at every step
 *     boundary on stopping (a signal one rank got stops all at the same
 *     step) and on committing (rank 0's commit policy decides for all).
 *   - Saving the weights is rank 0's, and every rank takes part in
 *     gathering each unit: rank 0 names the unit, the others follow.
 *
 * Without mpirun (one rank) every call here is a no-op that succeeds.
 */
#ifndef STRATA_CLI_RANKS_H
#define STRATA_CLI_RANKS_H

#include "strata/comm.h"
#include "strata/gpt_io.h"
#include "strata/store.h"

/* Every rank says how its set-up went. ST_OK when all succeeded; mine when
 * this rank failed (err is its own); else ST_EIO with *peer_failed = 1:
 * another rank failed and says why itself. Collective. */
st_status ranks_agree(comm *c, st_status mine, int *peer_failed, st_error *err);

/* At a step boundary: *stop = 1 when any rank was asked to stop, *commit
 * = rank 0's commit (every rank's argument but rank 0's is ignored). Collective. */
st_status ranks_step_flags(comm *c, int stop, int commit, int *stop_out, int *commit_out, st_error *err);

/* Rank 0's side of a save: a gpt_unit_reader over ranks_unit_source that
 * names unit u to the other ranks, then reads it (read_unit gathers the
 * shards: every rank must call it), and ranks_reads_done after the last.
 * The other ranks run ranks_follow_reads meanwhile, reading the units rank
 * 0 names into buf (one unit) until it is done. */
typedef struct ranks_unit_source {
    comm *c;
    gpt_unit_reader read_unit;
    void *ctx;
} ranks_unit_source;
st_status ranks_read_unit(void *source, int u, float *out, st_error *err);
st_status ranks_reads_done(comm *c, st_error *err);
st_status ranks_follow_reads(comm *c, gpt_unit_reader read_unit, void *ctx, float *buf, st_error *err);

#endif
