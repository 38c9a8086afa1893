/*
 * strata/comm.h - the ranks of a data-parallel job and what they exchange:
 * a barrier, a broadcast, a byte all-gather, a deterministic sum of doubles,
 * and ZeRO-3's two collectives on arrays split into one shard per rank
 * (all-gather of the shards, reduce-scatter of the whole), blocking or
 * started now and completed later.
 *
 * A process that mpirun started (OpenMPI sets OMPI_COMM_WORLD_SIZE, PMIx
 * sets PMIX_RANK; either one counts) gets a communicator over all of the
 * job's ranks; any other process gets a one-rank communicator on which
 * every operation is local and MPI is never called, so a plain
 * `strata train` neither needs mpirun nor touches MPI.
 *
 *     comm *c;
 *     if (comm_open(&c, &err)) return fail(&err);
 *     size_t lo, hi;                                   // this rank's shard of a unit
 *     comm_shard_range(n, comm_size(c), comm_rank(c), &lo, &hi);
 *     ... step master[lo, hi) and write its bf16 copy into w[lo, hi) ...
 *     comm_request *rq;
 *     if (comm_iallgather_shards_bf16(c, w, n, &rq, &err)) return fail(&err);
 *     ... compute something else (comm_test(rq, ...) now and then) ...
 *     if (comm_wait(rq, &err)) return fail(&err);      // w[0, n) is the whole unit on every rank
 *     ... backward: the unit's gradient g[0, n) from this rank's micro-batches ...
 *     if (comm_reduce_scatter_f32(c, g, n, g + lo, NULL, &err)) return fail(&err);
 *     ... g[lo, hi) is the sum over ranks, in rank order ...
 *     comm_close(c);
 *
 * Shards. comm_shard_range is the one split of n elements over N ranks:
 * rank r owns the contiguous range [lo_r, hi_r), the ranges follow rank
 * order and cover [0, n) once, and their sizes differ by at most one (the
 * first n % N ranks hold one more). Elements, not bytes: a unit's fp32
 * master weights, its Adam moments, its bf16 compute weights and its fp32
 * gradient split at the same element boundaries.
 *
 * Collective calls. Every rank must make the same calls, with the same
 * element counts, roots and sizes, in the same order; the non-blocking
 * calls count from when they are started, not when they are waited for.
 * A rank whose arguments differ gets an error (a truncated message), a
 * wrong result or a hang; treat any error as the end of the job.
 *
 * Determinism. No result depends on the timing of messages or on MPI's
 * own reduction algorithms: sums are computed here, in rank order, from
 * every rank's values (comm_allreduce_sum_f64, comm_reduce_scatter_f32).
 * For a given number of ranks the same inputs give the same bits on every
 * run, and comm_allreduce_sum_f64 the same bits on every rank.
 *
 * Threads. comm_open asks MPI for MPI_THREAD_SERIALIZED (and fails if the
 * library offers less): any thread may communicate, never two at once.
 * The layer serializes its MPI calls with one lock for the process (all
 * comms), so callers need not: the executor's compute thread and its
 * optimizer worker may both use one comm (a worker waiting for the
 * reduce-scatter of the shard it steps). FUNNELED would tie every call to
 * the thread that opened the comm; MULTIPLE would make OpenMPI lock inside
 * every call, for concurrency the layer never uses. Waiting does not hold
 * the lock: a wait polls MPI with the lock taken around each poll and
 * yields the processor between polls, so a wait on one thread never blocks
 * a start on another. A comm_request is used by one thread at a time.
 *
 * Progress. Debian's OpenMPI moves a large message only inside MPI calls
 * (it has no progress thread for shared memory or TCP), so a transfer
 * started before a long computation mostly happens in comm_wait unless
 * the caller calls comm_test on any outstanding request now and then
 * (between tasks); each comm_test drives every transfer of the process.
 *
 * Bytes. comm_stats counts what this rank hands to MPI: each piece for one
 * peer as messages of at most comm_set_max_message bytes (default 1 GiB;
 * MPI counts are ints), whole elements each, so ceil(p / floor(max / e))
 * messages for p elements, and none for an empty piece. For N ranks, rank r, c_r = hi_r - lo_r
 * elements of its shard of an n-element array and e bytes per element:
 *
 *     operation                      sent                 received
 *     comm_allgather_shards_*        (N-1) c_r e          (n - c_r) e
 *     comm_reduce_scatter_f32        (n - c_r) 4          (N-1) c_r 4
 *     comm_allgather (b bytes)       (N-1) b              (N-1) b
 *     comm_allreduce_sum_f64 (n)     (N-1) 8n             (N-1) 8n
 *     comm_bcast (b bytes)           root: (N-1) b        others: b
 *     comm_barrier                   0                    0
 *
 * Over the job, bytes sent equal bytes received. Each exchange is direct,
 * rank to rank (each rank sends its piece to every rank that needs it, and
 * no rank forwards another's data), so these are the payload bytes that
 * cross between ranks, MPI's headers aside. On one rank every count is 0.
 *
 * Errors. MPI errors are returned, not fatal (MPI_ERRORS_RETURN on the
 * comm's own duplicate of MPI_COMM_WORLD), as ST_EIO with a message that
 * names this rank, the operation, the MPI call, the peer and MPI's words
 * ("comm: rank 1 of 3: reduce_scatter_f32: MPI_Irecv from rank 2: ...").
 * The layer prints nothing. After an error the ranks are out of step:
 * end the job with comm_abort.
 */
#ifndef STRATA_COMM_H
#define STRATA_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct comm comm;
typedef struct comm_request comm_request;

/* Opens the job's communicator: MPI's ranks when mpirun started this
 * process (the first open calls MPI_Init_thread; later opens share it),
 * else one rank without MPI. Fails (ST_EUNSUPPORTED) when MPI offers less
 * than MPI_THREAD_SERIALIZED, or when MPI was already finalized in this
 * process (MPI starts once per process: keep one comm open for the run).
 * A process that initialized MPI itself keeps it; comm_open then uses it
 * and comm_close leaves it initialized. */
st_status comm_open(comm **out, st_error *err);
/* Frees the comm (NULL is fine); every request must have been waited for.
 * Closing the last comm opened over MPI finalizes MPI if comm_open
 * initialized it: every rank must close, like a collective. */
void comm_close(comm *c);

int comm_rank(const comm *c);     /* 0 .. size-1 */
int comm_size(const comm *c);     /* 1 without MPI */
int comm_is_mpi(const comm *c);   /* 1 when the comm runs over MPI (even with one rank) */

/* Ends every rank of the job with exit status `code` (MPI_Abort); on a
 * one-rank comm, exit(code). For a rank that failed while the others may
 * be waiting in a collective that it will never join. */
_Noreturn void comm_abort(comm *c, int code);

/* The shard of n elements that `rank` of `size` ranks owns: [*lo, *hi),
 * contiguous, in rank order, sizes n / size or n / size + 1 (the first
 * n % size ranks take the extra element). size >= 1, 0 <= rank < size. */
void comm_shard_range(size_t n, int size, int rank, size_t *lo, size_t *hi);

/* ---- blocking collectives ------------------------------------------------ */

st_status comm_barrier(comm *c, st_error *err);
/* A barrier that waits without spinning: it drives MPI every poll_s
 * seconds and sleeps between, for a rank that waits long while others use
 * the cores (comm_wait spins, and so does MPI_Finalize: strata probe's
 * ranks wait so while rank 0 measures the machine). */
st_status comm_barrier_idle(comm *c, double poll_s, st_error *err);

/* Copies root's buf[0, bytes) into every rank's buf. ST_EINVAL for a root
 * outside 0 .. size-1. */
st_status comm_bcast(comm *c, void *buf, size_t bytes, int root, st_error *err);

/* all[r * bytes_per_rank, (r + 1) * bytes_per_rank) = rank r's mine, on
 * every rank. mine may be all + rank * bytes_per_rank (in place). */
st_status comm_allgather(comm *c, const void *mine, size_t bytes_per_rank, void *all, st_error *err);

/* x[i] = the sum over ranks of their x[i], on every rank, added in rank
 * order (x_0 + x_1 + ... + x_{N-1}, left to right, in double): the same
 * bits on every rank and every run for a given N. For the global gradient
 * norm and the loss; memory: N * n doubles while it runs. */
st_status comm_allreduce_sum_f64(comm *c, double *x, size_t n, st_error *err);

/* ---- shard collectives (ZeRO-3) -------------------------------------------
 * On an array of n elements split by comm_shard_range. Blocking forms are
 * the non-blocking ones followed by comm_wait. */

/* Before: x[lo_r, hi_r) holds rank r's shard on rank r (the rest of x is
 * anything). After: x[0, n) is the whole array on every rank. */
st_status comm_allgather_shards_f32(comm *c, float *x, size_t n, st_error *err);
st_status comm_allgather_shards_bf16(comm *c, st_bf16 *x, size_t n, st_error *err);

/* x[0, n) is this rank's whole array. out[0, hi_r - lo_r) receives
 * acc[i] = x_0[lo_r + i]; acc[i] += x_1[lo_r + i]; ...; acc[i] +=
 * x_{N-1}[lo_r + i], in float, in rank order: exactly what that loop gives
 * (one rank: out = x[lo, hi)). out may be x + lo_r (in place; x's other
 * elements are not changed). scratch holds what the other ranks send:
 * comm_reduce_scatter_scratch_elems(c, n) floats from the caller (so that
 * memory is planned up front), or NULL to have the layer allocate it
 * until the operation completes. */
st_status comm_reduce_scatter_f32(comm *c, const float *x, size_t n, float *out, float *scratch,
                                  st_error *err);
/* (size - 1) * (hi_r - lo_r): the scratch elements this rank's
 * reduce-scatter of n elements needs (0 on one rank). */
size_t comm_reduce_scatter_scratch_elems(const comm *c, size_t n);

/* ---- non-blocking forms ----------------------------------------------------
 * Start the operation and return a request in *req; comm_wait completes it.
 * Until then the caller's arrays (x, out, scratch) belong to the operation:
 * do not read or write them. Several requests may be outstanding at once,
 * on any mix of operations (still started in the same order on every
 * rank). On an error nothing is returned in *req. */
st_status comm_iallgather_shards_f32(comm *c, float *x, size_t n, comm_request **req, st_error *err);
st_status comm_iallgather_shards_bf16(comm *c, st_bf16 *x, size_t n, comm_request **req, st_error *err);
/* The reduction (the ordered sum into out) runs in comm_wait, on the
 * waiting thread, once every rank's piece has arrived. */
st_status comm_ireduce_scatter_f32(comm *c, const float *x, size_t n, float *out, float *scratch,
                                   comm_request **req, st_error *err);

/* Completes the request and frees it (also on error; NULL is ST_OK). It
 * returns once every message of the request has arrived or failed, so
 * nothing writes the caller's buffers afterwards; the first failure is
 * the one reported. */
st_status comm_wait(comm_request *req, st_error *err);
/* Drives the comm's transfers without blocking; *done = 1 when req's
 * messages have all arrived (comm_wait then only reduces and frees).
 * The request stays the caller's to wait for either way. */
st_status comm_test(comm_request *req, int *done, st_error *err);

/* ---- counters -------------------------------------------------------------- */

typedef struct comm_counters {
    uint64_t bytes_sent;         /* handed to MPI_Isend, per the table above */
    uint64_t bytes_received;     /* posted with MPI_Irecv */
    uint64_t messages_sent;      /* MPI messages (none empty) */
    uint64_t messages_received;
} comm_counters;
/* This rank's counts since comm_open, operations counted when started. */
comm_counters comm_stats(const comm *c);

/* The largest message handed to MPI, in bytes (default 1 GiB; clamped to
 * 8 .. INT_MAX): a longer piece goes as several messages of whole
 * elements. Set it the same on every rank, between operations (tests use
 * a few bytes to exercise the splitting). */
void comm_set_max_message(comm *c, size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
