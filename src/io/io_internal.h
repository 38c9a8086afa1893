/*
 * io_internal.h - what the engine core (io_engine.c) shares with its two
 * backends (io_uring_backend.c, io_psync_backend.c).
 *
 * The core owns the queues: one FIFO of requests per path, cut into chunks
 * by engine_next_chunk under the engine lock, at most queue_depth chunks in
 * flight per path. A backend only moves chunks: it takes one from
 * engine_next_chunk, transfers it (continuing short transfers, retrying
 * EINTR), and hands it back to engine_chunk_finished. The core then does the
 * bookkeeping: counters, first error into the ticket, request completion.
 */
#ifndef STRATA_IO_INTERNAL_H
#define STRATA_IO_INTERNAL_H

#include <limits.h>
#include <pthread.h>

#include "strata/io.h"

#define IO_MAX_PATHS 64
#define IO_MAX_REGISTERED 64
#define IO_MAX_QUEUE_DEPTH 256
#define IO_DIRECT_ALIGN 4096u
#define IO_MAX_RETRIES 1000

typedef struct io_req {
    io_request r;
    io_ticket *ticket;
    uint64_t issued;          /* bytes handed out as chunks */
    int inflight;             /* chunks in flight */
    int failed;
    int queued;               /* still in its path's queue */
    struct io_req *next;      /* in its path's queue, or in a finished list */
} io_req;

typedef struct io_chunk {
    io_req *req;
    int path;
    uint64_t off;             /* within the request */
    uint64_t len;             /* bytes this chunk must move (0 for a sync) */
    uint64_t done;            /* bytes moved so far */
    uint64_t first_len;       /* bytes to ask for in the first attempt (< len when shortened) */
    int inject_errno;         /* fail without touching the disk */
    int result_errno;         /* outcome, carried from a backend's reaping to its bookkeeping */
    int fixed_index;          /* io_uring registered buffer, or -1 */
    uint32_t retries, shorts;
    struct io_chunk *next;
} io_chunk;

typedef struct io_path {
    char dir[PATH_MAX];
    int queue_depth;
    int buffered;
    io_req *head, *tail;
    int inflight;
    int sync_inflight;        /* a sync is running: nothing else may start */
    int dir_inflight[2];      /* read, write transfers in flight (busy times in counters) */
    double dir_since[2], both_since;
    io_path_counters counters;   /* under the engine lock */
} io_path;

typedef struct io_registered {
    char *owner;              /* the base passed to io_engine_register_buffer */
    char *base;
    size_t len;
    int index;
} io_registered;

struct io_engine;
typedef struct io_backend {
    const char *name;
    /* Called with no lock held. */
    st_status (*start)(struct io_engine *e, st_error *err);
    void (*wake)(struct io_engine *e);                 /* work was queued */
    st_status (*path_added)(struct io_engine *e, int path, st_error *err);
    void (*stop)(struct io_engine *e);                 /* e->stopping is set: drain, join */
    int (*register_buffer)(struct io_engine *e, void *base, size_t len, int slot);   /* 0 or -errno */
    void (*unregister_buffer)(struct io_engine *e, int slot);
} io_backend;

struct io_engine {
    io_engine_config cfg;
    io_engine_kind kind;
    char fallback_reason[160];
    const io_backend *backend;
    void *backend_state;

    pthread_mutex_t mu;
    pthread_cond_t done_cond;   /* a ticket completed */
    pthread_cond_t work_cond;   /* psync: chunks may be available */
    io_path *paths[IO_MAX_PATHS];
    int n_paths;
    int stopping;
    long queued_requests;       /* requests not yet finished */
    io_chunk *free_chunks;

    io_fault fault;
    int fault_armed;
    uint64_t fault_seen, fault_failed, fault_shortened;

    io_registered regs[IO_MAX_REGISTERED];
    int n_regs;
    int registered_active;
};

extern const io_backend io_uring_backend;
extern const io_backend io_psync_backend;

/* Under e->mu. Returns the next chunk to move on path p, or NULL when the
 * path is at its queue depth, blocked behind a sync, or idle. Requests that
 * failed before all their chunks were issued are dropped here; those that
 * thereby finish are pushed onto *finished for engine_finish_requests. */
io_chunk *engine_next_chunk(struct io_engine *e, int p, io_req **finished);
/* Under e->mu. Records the outcome of a chunk (err = 0 or an errno) and
 * frees it; pushes its request onto *finished when that was its last chunk. */
void engine_chunk_finished(struct io_engine *e, io_chunk *c, int err, io_req **finished);
/* Without the lock: runs on_done callbacks, completes tickets, frees requests. */
void engine_finish_requests(struct io_engine *e, io_req *finished);
/* 1 when nothing is queued or in flight on any path (under e->mu). */
int engine_idle(const struct io_engine *e);

/* The next step for a chunk after a transfer returned res (bytes or -errno):
 * done, retry (EINTR/EAGAIN, or continue a short transfer from c->done),
 * or failed with *err set. Pure bookkeeping on the chunk. */
typedef enum { CHUNK_DONE, CHUNK_AGAIN, CHUNK_FAILED } chunk_step;
chunk_step chunk_after_transfer(io_chunk *c, io_op op, long res, int *err);

static inline char *chunk_buf(const io_chunk *c) { return (char *)c->req->r.buf + c->off + c->done; }
static inline uint64_t chunk_file_offset(const io_chunk *c) { return c->req->r.offset + c->off + c->done; }
/* Bytes to ask for in the next attempt. */
static inline uint64_t chunk_want(const io_chunk *c) {
    return c->done == 0 ? c->first_len : c->len - c->done;
}

#endif
