/* comm.c - the job's ranks over MPI point-to-point messages, or one rank
 * without MPI (strata/comm.h has the contract).
 *
 * Every collective here is a set of non-blocking messages, rank to rank,
 * gathered in one comm_request, and the work done on arrival (the ordered
 * sums) runs when the request completes. Sending each piece straight to the
 * rank that needs it keeps the bytes per rank what the header's table says
 * and keeps every sum in rank order: no MPI reduction runs anywhere. */
#include "strata/comm.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

struct comm {
    int rank, size;
    int is_mpi;
    MPI_Comm mc;              /* a duplicate of MPI_COMM_WORLD, errors returned */
    uint64_t seq;             /* collectives started: the next one's tag */
    int tag_ub;
    size_t max_msg;
    comm_counters counters;
};

typedef enum req_kind {
    REQ_PLAIN = 0,            /* nothing to do on arrival */
    REQ_REDUCE_SCATTER,       /* ordered f32 sum into out */
    REQ_ALLREDUCE_F64,        /* ordered f64 sum back into x */
} req_kind;

struct comm_request {
    comm *c;
    const char *op;           /* "allgather_shards_f32", ... for messages */
    req_kind kind;
    int n, cap, n_done;
    size_t max_msg;           /* c->max_msg when the operation started */
    MPI_Request *reqs;
    int *peer;                /* per message: the other rank */
    char *is_send;
    int *idx;                 /* MPI_Testsome's scratch */
    MPI_Status *statuses;
    /* REQ_REDUCE_SCATTER */
    const float *x;
    float *out, *scratch;
    size_t lo, cnt;
    /* REQ_ALLREDUCE_F64 */
    double *xd, *all;
    size_t nd;
    int own_buf;              /* scratch or all allocated here */
    int stuck;                /* MPI_Testsome itself failed */
    st_error fail;            /* the first failure */
};

/* ---- the process's MPI ---------------------------------------------------- */

/* Held around every MPI call of the process, whatever the comm, and around
 * the counters: MPI_THREAD_SERIALIZED asks that no two threads call MPI at
 * once. Never held while waiting. */
static pthread_mutex_t g_mpi_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_open;            /* comms open over MPI */
static int g_we_initialized;  /* MPI_Init_thread was ours: the last close finalizes */

static int launched_by_mpirun(void) {
    const char *a = getenv("OMPI_COMM_WORLD_SIZE");
    const char *b = getenv("PMIX_RANK");
    return (a && *a) || (b && *b);
}

static const char *thread_level_name(int level) {
    switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    }
    return "an unknown thread level";
}

/* MPI's words for rc, with g_mpi_lock held. */
static void mpi_words(int rc, char *buf, size_t n) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) len = 0;
    s[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = 0;
    snprintf(buf, n, "%s (MPI error %d)", len ? s : "unknown error", rc);
}

/* With g_mpi_lock held. peer < 0: no peer to name. */
static st_status fail_mpi_locked(const comm *c, st_error *err, int rc, const char *op, const char *call,
                                 int is_send, int peer) {
    char words[MPI_MAX_ERROR_STRING + 32];
    mpi_words(rc, words, sizeof words);
    if (peer >= 0)
        return st_fail(err, ST_EIO, "comm: rank %d of %d: %s: %s %s rank %d: %s", c->rank, c->size, op, call,
                       is_send ? "to" : "from", peer, words);
    return st_fail(err, ST_EIO, "comm: rank %d of %d: %s: %s: %s", c->rank, c->size, op, call, words);
}

static st_status open_mpi(comm *c, st_error *err) {
    pthread_mutex_lock(&g_mpi_lock);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    st_status s = ST_OK;
    if (finalized) {
        s = st_fail(err, ST_EUNSUPPORTED,
                    "comm: MPI was finalized in this process (it starts once per process: keep one comm open)");
        goto out;
    }
    int provided = MPI_THREAD_SINGLE, rc;
    if (!inited) {
        rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
        if (rc != MPI_SUCCESS) {
            char words[MPI_MAX_ERROR_STRING + 32];
            mpi_words(rc, words, sizeof words);
            s = st_fail(err, ST_EIO, "comm: MPI_Init_thread: %s", words);
            goto out;
        }
        g_we_initialized = 1;
        /* Errors of calls on the world (the duplicate below) come back too. */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    } else {
        MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        s = st_fail(err, ST_EUNSUPPORTED, "comm: this MPI offers %s; strata needs MPI_THREAD_SERIALIZED",
                    thread_level_name(provided));
        if (g_we_initialized && g_open == 0) {
            MPI_Finalize();
            g_we_initialized = 0;
        }
        goto out;
    }
    rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->mc);
    if (rc != MPI_SUCCESS) {
        char words[MPI_MAX_ERROR_STRING + 32];
        mpi_words(rc, words, sizeof words);
        s = st_fail(err, ST_EIO, "comm: MPI_Comm_dup of MPI_COMM_WORLD: %s", words);
        goto out;
    }
    MPI_Comm_set_errhandler(c->mc, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->mc, &c->rank);
    MPI_Comm_size(c->mc, &c->size);
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    c->tag_ub = flag && ub && *ub > 0 ? *ub : 32767;   /* the standard's least upper bound */
    c->is_mpi = 1;
    g_open++;
out:
    pthread_mutex_unlock(&g_mpi_lock);
    return s;
}

st_status comm_open(comm **out, st_error *err) {
    if (!out) return st_fail(err, ST_EINVAL, "comm_open: out is NULL");
    *out = NULL;
    comm *c = calloc(1, sizeof *c);
    if (!c) return st_fail(err, ST_ENOMEM, "comm_open: out of memory");
    c->rank = 0;
    c->size = 1;
    c->max_msg = (size_t)1 << 30;
    c->tag_ub = 32767;
    if (launched_by_mpirun()) {
        st_status s = open_mpi(c, err);
        if (s) {
            free(c);
            return s;
        }
    }
    *out = c;
    return ST_OK;
}

void comm_close(comm *c) {
    if (!c) return;
    if (c->is_mpi) {
        pthread_mutex_lock(&g_mpi_lock);
        MPI_Comm_free(&c->mc);
        if (--g_open == 0 && g_we_initialized) {
            MPI_Finalize();
            g_we_initialized = 0;
        }
        pthread_mutex_unlock(&g_mpi_lock);
    }
    free(c);
}

int comm_rank(const comm *c) { return c ? c->rank : 0; }
int comm_size(const comm *c) { return c ? c->size : 1; }
int comm_is_mpi(const comm *c) { return c ? c->is_mpi : 0; }

_Noreturn void comm_abort(comm *c, int code) {
    if (c && c->is_mpi) {
        pthread_mutex_lock(&g_mpi_lock);
        MPI_Abort(c->mc, code);
    }
    exit(code);   /* one rank, or an MPI_Abort that returned */
}

void comm_shard_range(size_t n, int size, int rank, size_t *lo, size_t *hi) {
    size_t N = size > 0 ? (size_t)size : 1;
    size_t r = rank < 0 ? 0 : (size_t)rank < N ? (size_t)rank : N;
    size_t q = n / N, extra = n % N;
    *lo = r * q + (r < extra ? r : extra);
    *hi = r == N ? n : *lo + q + (r < extra ? 1 : 0);
}

void comm_set_max_message(comm *c, size_t bytes) {
    if (!c) return;
    if (bytes < 8) bytes = 8;
    if (bytes > (size_t)INT_MAX) bytes = (size_t)INT_MAX;
    pthread_mutex_lock(&g_mpi_lock);
    c->max_msg = bytes;
    pthread_mutex_unlock(&g_mpi_lock);
}

comm_counters comm_stats(const comm *c) {
    comm_counters k = {0};
    if (!c) return k;
    pthread_mutex_lock(&g_mpi_lock);
    k = c->counters;
    pthread_mutex_unlock(&g_mpi_lock);
    return k;
}

/* ---- requests ---------------------------------------------------------------- */

/* The largest message, read once per operation: its count of messages and
 * its posting use the same value even if comm_set_max_message runs. */
static size_t max_msg_of(comm *c) {
    pthread_mutex_lock(&g_mpi_lock);
    size_t m = c->max_msg;
    pthread_mutex_unlock(&g_mpi_lock);
    return m;
}

static size_t chunk_elems(size_t max_msg, size_t esize) {
    size_t k = max_msg / esize;
    return k ? k : 1;
}

/* Messages for one piece of `elems` elements: empty pieces send nothing. */
static size_t msgs_for(size_t max_msg, size_t elems, size_t esize) {
    size_t k = chunk_elems(max_msg, esize);
    return (elems + k - 1) / k;
}

static void req_free(comm_request *q) {
    if (!q) return;
    if (q->own_buf) {
        free(q->scratch);
        free(q->all);
    }
    free(q->reqs);
    free(q->peer);
    free(q->is_send);
    free(q->idx);
    free(q->statuses);
    free(q);
}

static st_status fail_nomem(const comm *c, const char *op, st_error *err) {
    return st_fail(err, ST_ENOMEM, "comm: rank %d of %d: %s: out of memory (or more than INT_MAX messages)",
                   c->rank, c->size, op);
}

/* A request for up to cap messages of at most max_msg bytes; NULL when out
 * of memory or cap exceeds what MPI_Testsome can count. */
static comm_request *req_new(comm *c, const char *op, size_t cap, size_t max_msg) {
    if (cap > (size_t)INT_MAX) return NULL;
    comm_request *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->c = c;
    q->op = op;
    q->cap = (int)cap;
    q->max_msg = max_msg;
    int m = cap > 0 ? (int)cap : 1;
    q->reqs = malloc((size_t)m * sizeof *q->reqs);
    q->peer = malloc((size_t)m * sizeof *q->peer);
    q->is_send = malloc((size_t)m);
    q->idx = malloc((size_t)m * sizeof *q->idx);
    q->statuses = malloc((size_t)m * sizeof *q->statuses);
    if (!q->reqs || !q->peer || !q->is_send || !q->idx || !q->statuses) {
        req_free(q);
        return NULL;
    }
    return q;
}

/* Posts one piece as messages of at most max_msg bytes, with g_mpi_lock held.
 * On an MPI error the messages already posted stay posted: the caller's
 * buffers may still be written, and the job must end (comm.h, Errors). */
static st_status post_locked(comm_request *q, int is_send, void *buf, size_t elems, MPI_Datatype dt,
                             size_t esize, int peer, int tag, st_error *err) {
    comm *c = q->c;
    size_t k = chunk_elems(q->max_msg, esize);
    for (size_t off = 0; off < elems; off += k) {
        size_t m = elems - off < k ? elems - off : k;
        char *p = (char *)buf + off * esize;
        MPI_Request r;
        int rc = is_send ? MPI_Isend(p, (int)m, dt, peer, tag, c->mc, &r)
                         : MPI_Irecv(p, (int)m, dt, peer, tag, c->mc, &r);
        if (rc != MPI_SUCCESS)
            return fail_mpi_locked(c, err, rc, q->op, is_send ? "MPI_Isend" : "MPI_Irecv", is_send, peer);
        q->reqs[q->n] = r;
        q->peer[q->n] = peer;
        q->is_send[q->n] = (char)is_send;
        q->n++;
        if (is_send) {
            c->counters.bytes_sent += m * esize;
            c->counters.messages_sent++;
        } else {
            c->counters.bytes_received += m * esize;
            c->counters.messages_received++;
        }
    }
    return ST_OK;
}

static int next_tag_locked(comm *c) {
    int t = (int)(c->seq % (uint64_t)c->tag_ub);
    c->seq++;
    return t;
}

/* Keeps the request's first failure (later ones add nothing). */
static void note_fail_locked(comm_request *q, int rc, const char *call, int is_send, int peer) {
    if (q->fail.status == ST_OK) fail_mpi_locked(q->c, &q->fail, rc, q->op, call, is_send, peer);
}

/* One poll of q's messages, with g_mpi_lock held: completed ones are
 * counted off, and a failed one is complete too (noted in q->fail), so a
 * wait for the others still ends. A failure of the poll itself leaves q
 * stuck: nothing more of it can be known. */
static void poll_locked(comm_request *q, int *progressed) {
    *progressed = 0;
    if (q->n_done >= q->n || q->stuck) return;
    int outcount = 0;
    int rc = MPI_Testsome(q->n, q->reqs, &outcount, q->idx, q->statuses);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        note_fail_locked(q, rc, "MPI_Testsome", 0, -1);
        q->stuck = 1;
        return;
    }
    if (outcount == MPI_UNDEFINED) {   /* every request already inactive */
        q->n_done = q->n;
        return;
    }
    q->n_done += outcount;
    *progressed = outcount > 0;
    if (rc == MPI_ERR_IN_STATUS) {
        for (int i = 0; i < outcount; i++) {
            int e = q->statuses[i].MPI_ERROR, j = q->idx[i];
            if (e != MPI_SUCCESS)
                note_fail_locked(q, e, q->is_send[j] ? "MPI_Isend" : "MPI_Irecv", q->is_send[j], q->peer[j]);
        }
    }
}

/* The local work once everything has arrived. */
static void finish(comm_request *q) {
    comm *c = q->c;
    int N = c->size, r = c->rank;
    if (q->kind == REQ_REDUCE_SCATTER) {
        /* acc = x_0; acc += x_1; ... per element, in blocks so that out may
         * be x + lo: a block is read whole before it is written. */
        enum { B = 1024 };
        float acc[B];
        for (size_t b = 0; b < q->cnt; b += B) {
            size_t m = q->cnt - b < B ? q->cnt - b : B;
            for (int p = 0; p < N; p++) {
                size_t slot = (size_t)(p < r ? p : p - 1);   /* the scratch holds the other ranks' */
                const float *s = p == r ? q->x + q->lo + b : q->scratch + slot * q->cnt + b;
                if (p == 0)
                    for (size_t i = 0; i < m; i++) acc[i] = s[i];
                else
                    for (size_t i = 0; i < m; i++) acc[i] += s[i];
            }
            memcpy(q->out + b, acc, m * sizeof *acc);
        }
    } else if (q->kind == REQ_ALLREDUCE_F64) {
        for (size_t i = 0; i < q->nd; i++) {
            double acc = q->all[i];
            for (int p = 1; p < N; p++) acc += q->all[(size_t)p * q->nd + i];
            q->xd[i] = acc;
        }
    }
}

st_status comm_test(comm_request *q, int *done, st_error *err) {
    if (done) *done = 1;
    if (!q) return ST_OK;
    int progressed;
    pthread_mutex_lock(&g_mpi_lock);
    poll_locked(q, &progressed);
    pthread_mutex_unlock(&g_mpi_lock);
    if (done) *done = q->n_done >= q->n || q->stuck;
    if (q->fail.status && err) *err = q->fail;
    return q->fail.status;
}

st_status comm_wait(comm_request *q, st_error *err) {
    if (!q) return ST_OK;
    /* Until every message has completed or failed, so that no transfer into
     * the caller's buffers (or ours) is left running after the return. */
    while (q->n_done < q->n && !q->stuck) {
        int progressed;
        pthread_mutex_lock(&g_mpi_lock);
        poll_locked(q, &progressed);
        pthread_mutex_unlock(&g_mpi_lock);
        if (!progressed) sched_yield();
    }
    st_status s = q->fail.status;
    if (s) {
        if (err) *err = q->fail;
    } else {
        finish(q);
    }
    if (q->stuck) q->own_buf = 0;   /* MPI may still write our scratch: leave it to MPI */
    req_free(q);
    return s;
}

/* ---- starting operations ------------------------------------------------------ */

#define CHECK_COMM(c, op) \
    do { \
        if (!(c)) return st_fail(err, ST_EINVAL, "comm: %s: comm is NULL", op); \
    } while (0)

/* Shared by the f32 and bf16 all-gathers: send my shard to every rank,
 * receive every other shard in place. */
static st_status start_allgather_shards(comm *c, void *x, size_t n, MPI_Datatype dt, size_t esize,
                                        const char *op, comm_request **out, st_error *err) {
    if (!out) return st_fail(err, ST_EINVAL, "comm: %s: req is NULL", op);
    *out = NULL;
    CHECK_COMM(c, op);
    if (!x && n) return st_fail(err, ST_EINVAL, "comm: %s: x is NULL", op);
    int N = c->size, me = c->rank;
    size_t lo, hi;
    comm_shard_range(n, N, me, &lo, &hi);
    size_t mm = max_msg_of(c), cap = 0;
    for (int p = 0; p < N; p++) {
        if (p == me) continue;
        size_t plo, phi;
        comm_shard_range(n, N, p, &plo, &phi);
        cap += msgs_for(mm, hi - lo, esize) + msgs_for(mm, phi - plo, esize);
    }
    comm_request *q = req_new(c, op, cap, mm);
    if (!q) return fail_nomem(c, op, err);
    st_status s = ST_OK;
    if (c->is_mpi) {
        pthread_mutex_lock(&g_mpi_lock);
        int tag = next_tag_locked(c);   /* every rank takes a tag, messages or not */
        for (int p = 0; p < N && n && !s; p++) {   /* (no pointer arithmetic on an empty x) */
            if (p == me) continue;
            size_t plo, phi;
            comm_shard_range(n, N, p, &plo, &phi);
            s = post_locked(q, 0, (char *)x + plo * esize, phi - plo, dt, esize, p, tag, err);
            if (!s) s = post_locked(q, 1, (char *)x + lo * esize, hi - lo, dt, esize, p, tag, err);
        }
        pthread_mutex_unlock(&g_mpi_lock);
    }
    if (s) {
        req_free(q);   /* the posted messages stay with MPI: see post_locked */
        return s;
    }
    *out = q;
    return ST_OK;
}

st_status comm_iallgather_shards_f32(comm *c, float *x, size_t n, comm_request **req, st_error *err) {
    return start_allgather_shards(c, x, n, MPI_FLOAT, sizeof(float), "allgather_shards_f32", req, err);
}

st_status comm_iallgather_shards_bf16(comm *c, st_bf16 *x, size_t n, comm_request **req, st_error *err) {
    return start_allgather_shards(c, x, n, MPI_UINT16_T, sizeof(st_bf16), "allgather_shards_bf16", req, err);
}

st_status comm_allgather_shards_f32(comm *c, float *x, size_t n, st_error *err) {
    comm_request *q;
    st_status s = comm_iallgather_shards_f32(c, x, n, &q, err);
    return s ? s : comm_wait(q, err);
}

st_status comm_allgather_shards_bf16(comm *c, st_bf16 *x, size_t n, st_error *err) {
    comm_request *q;
    st_status s = comm_iallgather_shards_bf16(c, x, n, &q, err);
    return s ? s : comm_wait(q, err);
}

size_t comm_reduce_scatter_scratch_elems(const comm *c, size_t n) {
    if (!c) return 0;
    size_t lo, hi;
    comm_shard_range(n, c->size, c->rank, &lo, &hi);
    return (size_t)(c->size - 1) * (hi - lo);
}

st_status comm_ireduce_scatter_f32(comm *c, const float *x, size_t n, float *out, float *scratch,
                                   comm_request **req, st_error *err) {
    const char *op = "reduce_scatter_f32";
    if (!req) return st_fail(err, ST_EINVAL, "comm: %s: req is NULL", op);
    *req = NULL;
    CHECK_COMM(c, op);
    int N = c->size, me = c->rank;
    size_t lo, hi;
    comm_shard_range(n, N, me, &lo, &hi);
    size_t cnt = hi - lo;
    if (!x && n) return st_fail(err, ST_EINVAL, "comm: %s: x is NULL", op);
    if (!out && cnt) return st_fail(err, ST_EINVAL, "comm: %s: out is NULL", op);
    size_t mm = max_msg_of(c), cap = 0;
    for (int p = 0; p < N; p++) {
        if (p == me) continue;
        size_t plo, phi;
        comm_shard_range(n, N, p, &plo, &phi);
        cap += msgs_for(mm, phi - plo, 4) + msgs_for(mm, cnt, 4);
    }
    comm_request *q = req_new(c, op, cap, mm);
    if (!q) return fail_nomem(c, op, err);
    q->kind = REQ_REDUCE_SCATTER;
    q->x = x;
    q->out = out;
    q->lo = lo;
    q->cnt = cnt;
    q->scratch = scratch;
    size_t se = comm_reduce_scatter_scratch_elems(c, n);
    if (!scratch && se) {
        q->scratch = malloc(se * sizeof(float));
        q->own_buf = 1;
        if (!q->scratch) {
            req_free(q);
            return st_fail(err, ST_ENOMEM, "comm: rank %d of %d: %s: no memory for %zu scratch floats", me, N,
                           op, se);
        }
    }
    st_status s = ST_OK;
    if (c->is_mpi) {
        pthread_mutex_lock(&g_mpi_lock);
        int tag = next_tag_locked(c);
        for (int p = 0; p < N && n && !s; p++) {
            if (p == me) continue;
            size_t plo, phi;
            comm_shard_range(n, N, p, &plo, &phi);
            float *slot = cnt ? q->scratch + (size_t)(p < me ? p : p - 1) * cnt : NULL;
            s = post_locked(q, 0, slot, cnt, MPI_FLOAT, 4, p, tag, err);
            if (!s) s = post_locked(q, 1, (void *)(uintptr_t)(x + plo), phi - plo, MPI_FLOAT, 4, p, tag, err);
        }
        pthread_mutex_unlock(&g_mpi_lock);
    }
    if (s) {
        if (q->own_buf && q->n) q->scratch = NULL, q->own_buf = 0;   /* MPI may still write it */
        req_free(q);
        return s;
    }
    *req = q;
    return ST_OK;
}

st_status comm_reduce_scatter_f32(comm *c, const float *x, size_t n, float *out, float *scratch,
                                  st_error *err) {
    comm_request *q;
    st_status s = comm_ireduce_scatter_f32(c, x, n, out, scratch, &q, err);
    return s ? s : comm_wait(q, err);
}

/* ---- the small collectives ----------------------------------------------------- */

/* Starts a barrier: the request in *out (NULL without MPI). */
static st_status start_barrier(comm *c, comm_request **out, st_error *err) {
    *out = NULL;
    if (!c->is_mpi) return ST_OK;
    comm_request *q = req_new(c, "barrier", 1, 0);
    if (!q) return fail_nomem(c, "barrier", err);
    pthread_mutex_lock(&g_mpi_lock);
    next_tag_locked(c);
    int rc = MPI_Ibarrier(c->mc, &q->reqs[0]);
    st_status s = rc == MPI_SUCCESS ? ST_OK : fail_mpi_locked(c, err, rc, "barrier", "MPI_Ibarrier", 0, -1);
    pthread_mutex_unlock(&g_mpi_lock);
    if (s) {
        req_free(q);
        return s;
    }
    q->n = 1;
    q->peer[0] = -1;
    q->is_send[0] = 0;
    *out = q;
    return ST_OK;
}

st_status comm_barrier(comm *c, st_error *err) {
    CHECK_COMM(c, "barrier");
    comm_request *q;
    st_status s = start_barrier(c, &q, err);
    return s ? s : comm_wait(q, err);
}

st_status comm_barrier_idle(comm *c, double poll_s, st_error *err) {
    CHECK_COMM(c, "barrier");
    comm_request *q;
    st_status s = start_barrier(c, &q, err);
    int done = !q;
    const struct timespec nap = {.tv_sec = (time_t)poll_s, .tv_nsec = (long)((poll_s - (double)(time_t)poll_s) * 1e9)};
    while (s == ST_OK && !done && (s = comm_test(q, &done, err)) == ST_OK)
        if (!done) nanosleep(&nap, NULL);
    st_status w = comm_wait(q, s ? NULL : err);
    return s ? s : w;
}

st_status comm_bcast(comm *c, void *buf, size_t bytes, int root, st_error *err) {
    const char *op = "bcast";
    CHECK_COMM(c, op);
    if (root < 0 || root >= c->size)
        return st_fail(err, ST_EINVAL, "comm: rank %d of %d: bcast: root %d is not a rank", c->rank, c->size, root);
    if (!buf && bytes) return st_fail(err, ST_EINVAL, "comm: %s: buf is NULL", op);
    int N = c->size, me = c->rank;
    size_t mm = max_msg_of(c);
    size_t cap = me == root ? (size_t)(N - 1) * msgs_for(mm, bytes, 1) : msgs_for(mm, bytes, 1);
    comm_request *q = req_new(c, op, cap, mm);
    if (!q) return fail_nomem(c, op, err);
    st_status s = ST_OK;
    if (c->is_mpi) {
        pthread_mutex_lock(&g_mpi_lock);
        int tag = next_tag_locked(c);
        if (me == root) {
            for (int p = 0; p < N && !s; p++)
                if (p != me) s = post_locked(q, 1, buf, bytes, MPI_BYTE, 1, p, tag, err);
        } else {
            s = post_locked(q, 0, buf, bytes, MPI_BYTE, 1, root, tag, err);
        }
        pthread_mutex_unlock(&g_mpi_lock);
    }
    if (s) {
        req_free(q);
        return s;
    }
    return comm_wait(q, err);
}

st_status comm_allgather(comm *c, const void *mine, size_t bytes_per_rank, void *all, st_error *err) {
    const char *op = "allgather";
    CHECK_COMM(c, op);
    if ((!mine || !all) && bytes_per_rank) return st_fail(err, ST_EINVAL, "comm: %s: a buffer is NULL", op);
    int N = c->size, me = c->rank;
    char *dst = (char *)all;
    if (bytes_per_rank && dst + (size_t)me * bytes_per_rank != (const char *)mine)
        memmove(dst + (size_t)me * bytes_per_rank, mine, bytes_per_rank);
    size_t mm = max_msg_of(c);
    comm_request *q = req_new(c, op, 2 * (size_t)(N - 1) * msgs_for(mm, bytes_per_rank, 1), mm);
    if (!q) return fail_nomem(c, op, err);
    st_status s = ST_OK;
    if (c->is_mpi) {
        pthread_mutex_lock(&g_mpi_lock);
        int tag = next_tag_locked(c);
        size_t b = bytes_per_rank;
        for (int p = 0; p < N && b && !s; p++) {
            if (p == me) continue;
            s = post_locked(q, 0, dst + (size_t)p * b, b, MPI_BYTE, 1, p, tag, err);
            if (!s) s = post_locked(q, 1, dst + (size_t)me * b, b, MPI_BYTE, 1, p, tag, err);
        }
        pthread_mutex_unlock(&g_mpi_lock);
    }
    if (s) {
        req_free(q);
        return s;
    }
    return comm_wait(q, err);
}

st_status comm_allreduce_sum_f64(comm *c, double *x, size_t n, st_error *err) {
    const char *op = "allreduce_sum_f64";
    CHECK_COMM(c, op);
    if (!x && n) return st_fail(err, ST_EINVAL, "comm: %s: x is NULL", op);
    int N = c->size, me = c->rank;
    if (N == 1 || n == 0) {
        if (c->is_mpi) {   /* still a collective: keep the tags in step */
            pthread_mutex_lock(&g_mpi_lock);
            next_tag_locked(c);
            pthread_mutex_unlock(&g_mpi_lock);
        }
        return ST_OK;
    }
    size_t mm = max_msg_of(c);
    comm_request *q = req_new(c, op, 2 * (size_t)(N - 1) * msgs_for(mm, n, 8), mm);
    if (!q) return fail_nomem(c, op, err);
    q->kind = REQ_ALLREDUCE_F64;
    q->xd = x;
    q->nd = n;
    q->all = malloc((size_t)N * n * sizeof(double));
    q->own_buf = 1;
    if (!q->all) {
        req_free(q);
        return st_fail(err, ST_ENOMEM, "comm: rank %d of %d: %s: no memory for %d x %zu doubles", me, N, op, N, n);
    }
    memcpy(q->all + (size_t)me * n, x, n * sizeof(double));
    st_status s = ST_OK;
    pthread_mutex_lock(&g_mpi_lock);
    int tag = next_tag_locked(c);
    for (int p = 0; p < N && !s; p++) {
        if (p == me) continue;
        s = post_locked(q, 0, q->all + (size_t)p * n, n, MPI_DOUBLE, 8, p, tag, err);
        if (!s) s = post_locked(q, 1, q->all + (size_t)me * n, n, MPI_DOUBLE, 8, p, tag, err);
    }
    pthread_mutex_unlock(&g_mpi_lock);
    if (s) {
        if (q->n) q->all = NULL;   /* MPI may still write it */
        req_free(q);
        return s;
    }
    return comm_wait(q, err);
}
