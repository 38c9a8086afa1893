/* io_engine.c - the engine core: paths, files, request queues, tickets,
 * fault injection and counters. The backends only move chunks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

struct io_file {
    io_engine *engine;
    int fd;
    int path;
    int direct;
    int read_only;
    char name[PATH_MAX];
};

static const char *op_name(io_op op);
static void record_failure(io_req *r, st_status s, const st_error *why);

io_engine_config io_engine_default_config(void) {
    return (io_engine_config){.kind = IO_ENGINE_AUTO, .chunk_bytes = 1u << 20, .queue_depth = 8, .register_buffers = 1};
}

const char *io_engine_kind_name(io_engine_kind k) {
    switch (k) {
    case IO_ENGINE_AUTO: return "auto";
    case IO_ENGINE_URING: return "io_uring";
    case IO_ENGINE_PSYNC: return "psync";
    }
    return "?";
}

st_status io_engine_kind_parse(const char *s, io_engine_kind *out, st_error *err) {
    if (!strcmp(s, "auto")) *out = IO_ENGINE_AUTO;
    else if (!strcmp(s, "uring") || !strcmp(s, "io_uring")) *out = IO_ENGINE_URING;
    else if (!strcmp(s, "psync")) *out = IO_ENGINE_PSYNC;
    else return st_fail(err, ST_EINVAL, "unknown I/O engine '%s' (expected auto, uring or psync)", s);
    return ST_OK;
}

st_status io_engine_create(const io_engine_config *cfg_in, io_engine **out, st_error *err) {
    io_engine_config cfg = cfg_in ? *cfg_in : io_engine_default_config();
    if (cfg.chunk_bytes == 0) cfg.chunk_bytes = 1u << 20;
    if (cfg.queue_depth == 0) cfg.queue_depth = 8;
    if (cfg.chunk_bytes % IO_DIRECT_ALIGN || cfg.chunk_bytes > (1ull << 30))
        return st_fail(err, ST_EINVAL, "I/O chunk size %llu must be a multiple of %u and at most 1 GiB",
                       (unsigned long long)cfg.chunk_bytes, IO_DIRECT_ALIGN);
    if (cfg.queue_depth < 1 || cfg.queue_depth > IO_MAX_QUEUE_DEPTH)
        return st_fail(err, ST_EINVAL, "I/O queue depth %d is out of range [1, %d]", cfg.queue_depth,
                       IO_MAX_QUEUE_DEPTH);
    io_engine *e = calloc(1, sizeof *e);
    if (!e) return st_fail(err, ST_ENOMEM, "allocating the I/O engine");
    e->cfg = cfg;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->done_cond, NULL);
    pthread_cond_init(&e->work_cond, NULL);

    st_status s = ST_OK;
    if (cfg.kind == IO_ENGINE_URING || cfg.kind == IO_ENGINE_AUTO) {
        e->kind = IO_ENGINE_URING;
        e->backend = &io_uring_backend;
        st_error uerr = {0};
        s = e->backend->start(e, &uerr);
        if (s != ST_OK && cfg.kind == IO_ENGINE_AUTO) {
            memcpy(e->fallback_reason, uerr.msg, sizeof e->fallback_reason - 1);
            e->fallback_reason[sizeof e->fallback_reason - 1] = '\0';
            s = ST_OK;
            e->kind = IO_ENGINE_PSYNC;
        } else if (s != ST_OK && err) {
            *err = uerr;
        }
    } else {
        e->kind = IO_ENGINE_PSYNC;
    }
    if (s == ST_OK && e->kind == IO_ENGINE_PSYNC) {
        e->backend = &io_psync_backend;
        s = e->backend->start(e, err);
    }
    if (s != ST_OK) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->done_cond);
        pthread_cond_destroy(&e->work_cond);
        free(e);
        return s;
    }
    *out = e;
    return ST_OK;
}

void io_engine_destroy(io_engine *e) {
    if (!e) return;
    io_req *finished = NULL;
    pthread_mutex_lock(&e->mu);
    e->stopping = 1;
    /* Queued work that has not started will not: fail it. Chunks already in
     * flight finish normally while the backend drains. */
    for (int p = 0; p < e->n_paths; p++) {
        for (io_req *r = e->paths[p]->head; r; r = r->next) {
            if (r->failed) continue;
            st_error why = {0};
            st_fail(&why, ST_EINTR, "%s %s at offset %llu: the I/O engine was shut down", op_name(r->r.op),
                    r->r.file->name, (unsigned long long)(r->r.offset + r->issued));
            record_failure(r, ST_EINTR, &why);
        }
        (void)engine_next_chunk(e, p, &finished);   /* drops the failed requests; yields no chunk */
    }
    pthread_mutex_unlock(&e->mu);
    engine_finish_requests(e, finished);
    e->backend->wake(e);
    e->backend->stop(e);
    for (int p = 0; p < e->n_paths; p++) free(e->paths[p]);
    while (e->free_chunks) {
        io_chunk *c = e->free_chunks;
        e->free_chunks = c->next;
        free(c);
    }
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->done_cond);
    pthread_cond_destroy(&e->work_cond);
    free(e);
}

void io_engine_describe(const io_engine *e, io_engine_info *out) {
    memset(out, 0, sizeof *out);
    out->kind = e->kind;
    out->registered_buffers = e->registered_active;
    out->chunk_bytes = e->cfg.chunk_bytes;
    out->queue_depth = e->cfg.queue_depth;
    snprintf(out->fallback_reason, sizeof out->fallback_reason, "%s", e->fallback_reason);
}

/* ---- paths ---------------------------------------------------------------- */

st_status io_engine_add_path(io_engine *e, const char *dir, const io_path_options *opt, int *path_id,
                             st_error *err) {
    struct stat st;
    if (stat(dir, &st) != 0) return st_fail_errno(err, errno, "storage path %s", dir);
    if (!S_ISDIR(st.st_mode)) return st_fail(err, ST_EINVAL, "storage path %s is not a directory", dir);
    if (strlen(dir) >= PATH_MAX - 64) return st_fail(err, ST_EINVAL, "storage path %s is too long", dir);
    int qd = opt && opt->queue_depth ? opt->queue_depth : e->cfg.queue_depth;
    if (qd < 1 || qd > IO_MAX_QUEUE_DEPTH)
        return st_fail(err, ST_EINVAL, "queue depth %d for %s is out of range [1, %d]", qd, dir, IO_MAX_QUEUE_DEPTH);
    io_path *p = calloc(1, sizeof *p);
    if (!p) return st_fail(err, ST_ENOMEM, "allocating path %s", dir);
    snprintf(p->dir, sizeof p->dir, "%s", dir);
    p->queue_depth = qd;
    p->buffered = opt ? opt->buffered : 0;
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n_paths; i++) {
        /* The same directory again (a store reopened on a shared engine):
         * one queue per directory, not one per caller. */
        if (!strcmp(e->paths[i]->dir, p->dir) && e->paths[i]->buffered == p->buffered &&
            e->paths[i]->queue_depth == p->queue_depth) {
            pthread_mutex_unlock(&e->mu);
            free(p);
            *path_id = i;
            return ST_OK;
        }
    }
    if (e->n_paths == IO_MAX_PATHS) {
        pthread_mutex_unlock(&e->mu);
        free(p);
        return st_fail(err, ST_EINVAL, "too many storage paths (at most %d)", IO_MAX_PATHS);
    }
    int id = e->n_paths;
    e->paths[id] = p;
    e->n_paths++;
    pthread_mutex_unlock(&e->mu);
    st_status s = e->backend->path_added ? e->backend->path_added(e, id, err) : ST_OK;
    if (s != ST_OK) return s;   /* the path stays registered but idle; harmless */
    *path_id = id;
    return ST_OK;
}

int io_engine_path_count(const io_engine *e) { return e->n_paths; }

const char *io_path_dir(const io_engine *e, int path_id) {
    return path_id >= 0 && path_id < e->n_paths ? e->paths[path_id]->dir : "?";
}

uint32_t io_path_alignment(const io_engine *e, int path_id) {
    if (path_id < 0 || path_id >= e->n_paths) return IO_DIRECT_ALIGN;
    return e->paths[path_id]->buffered ? 1 : IO_DIRECT_ALIGN;
}

/* ---- files ---------------------------------------------------------------- */

st_status io_file_open(io_engine *e, int path_id, const char *name, unsigned flags, io_file **out, st_error *err) {
    if (path_id < 0 || path_id >= e->n_paths) return st_fail(err, ST_EINVAL, "opening %s: no storage path %d", name, path_id);
    io_path *p = e->paths[path_id];
    io_file *f = calloc(1, sizeof *f);
    if (!f) return st_fail(err, ST_ENOMEM, "allocating a file handle for %s", name);
    int len = name[0] == '/' ? snprintf(f->name, sizeof f->name, "%s", name)
                             : snprintf(f->name, sizeof f->name, "%.*s/%s", PATH_MAX - 64, p->dir, name);
    if (len < 0 || (size_t)len >= sizeof f->name) {
        free(f);
        return st_fail(err, ST_EINVAL, "file name %s in %s is too long", name, p->dir);
    }
    int oflags = O_CLOEXEC | ((flags & IO_FILE_READ_ONLY) ? O_RDONLY : O_RDWR);
    if (flags & IO_FILE_CREATE) oflags |= O_CREAT;
    if ((flags & IO_FILE_CREATE) && (flags & IO_FILE_EXCL)) oflags |= O_EXCL;
    if (flags & IO_FILE_TRUNCATE) oflags |= O_TRUNC;
    if (!p->buffered) oflags |= O_DIRECT;
    int fd;
    do fd = open(f->name, oflags, 0644);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int en = errno;
        st_status s;
        if (en == EINVAL && !p->buffered)
            s = st_fail(err, ST_EUNSUPPORTED,
                        "open %s with O_DIRECT: the file system under %s does not support direct I/O "
                        "(tmpfs does not); use a directory on a disk, or allow buffered I/O",
                        f->name, p->dir);
        else
            s = st_fail_errno(err, en, "open %s", f->name);
        free(f);
        return s;
    }
    f->engine = e;
    f->fd = fd;
    f->path = path_id;
    f->direct = !p->buffered;
    f->read_only = (flags & IO_FILE_READ_ONLY) != 0;
    *out = f;
    return ST_OK;
}

void io_file_close(io_file *f) {
    if (!f) return;
    close(f->fd);
    free(f);
}

const char *io_file_name(const io_file *f) { return f->name; }
int io_file_path_id(const io_file *f) { return f->path; }
int io_file_fd(const io_file *f) { return f->fd; }

st_status io_file_size(const io_file *f, uint64_t *out, st_error *err) {
    struct stat st;
    if (fstat(f->fd, &st) != 0) return st_fail_errno(err, errno, "stat %s", f->name);
    *out = (uint64_t)st.st_size;
    return ST_OK;
}

st_status io_file_reserve(io_file *f, uint64_t bytes, st_error *err) {
    uint64_t size = 0;
    st_status s = io_file_size(f, &size, err);
    if (s != ST_OK) return s;
    if (bytes <= size) return ST_OK;
    int rc;
    do rc = fallocate(f->fd, 0, 0, (off_t)bytes);
    while (rc != 0 && errno == EINTR);
    if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
        /* No fallocate (some network file systems): extend sparsely. */
        rc = ftruncate(f->fd, (off_t)bytes);
    }
    if (rc != 0) {
        char need[32];
        return st_fail_errno(err, errno, "reserving %s for %s", st_format_bytes((double)bytes, need, sizeof need),
                             f->name);
    }
    return ST_OK;
}

/* ---- tickets --------------------------------------------------------------- */

void io_ticket_init(io_ticket *t) {
    memset(t, 0, sizeof *t);
    atomic_init(&t->complete, 0);
}

int io_ticket_done(io_ticket *t) { return atomic_load_explicit(&t->complete, memory_order_acquire); }

st_status io_ticket_wait(io_ticket *t, st_error *err) {
    if (!t->engine && !atomic_load_explicit(&t->complete, memory_order_acquire))
        return st_fail(err, ST_EINVAL, "waiting on an I/O ticket that was never submitted");
    if (!atomic_load_explicit(&t->complete, memory_order_acquire)) {
        io_engine *e = t->engine;
        pthread_mutex_lock(&e->mu);
        while (!atomic_load_explicit(&t->complete, memory_order_acquire)) pthread_cond_wait(&e->done_cond, &e->mu);
        pthread_mutex_unlock(&e->mu);
    }
    if (t->status != ST_OK && err) *err = t->error;
    return t->status;
}

static const char *op_name(io_op op) {
    return op == IO_OP_READ ? "read" : op == IO_OP_WRITE ? "write" : "sync";
}

static st_status validate(const io_engine *e, const io_request *r, st_error *err) {
    if (r->op != IO_OP_READ && r->op != IO_OP_WRITE && r->op != IO_OP_SYNC)
        return st_fail(err, ST_EINVAL, "I/O request with unknown operation %d", (int)r->op);
    if (!r->file || r->file->engine != e)
        return st_fail(err, ST_EINVAL, "%s request without a file opened on this engine", op_name(r->op));
    const io_file *f = r->file;
    if (r->op == IO_OP_SYNC) return ST_OK;
    if (r->len == 0 || !r->buf)
        return st_fail(err, ST_EINVAL, "%s %s at offset %llu: empty request", op_name(r->op), f->name,
                       (unsigned long long)r->offset);
    if (r->op == IO_OP_WRITE && f->read_only)
        return st_fail(err, ST_EINVAL, "write %s: the file was opened read-only", f->name);
    if (f->direct) {
        const char *what = NULL;
        unsigned long long v = 0;
        if ((uintptr_t)r->buf % IO_DIRECT_ALIGN) what = "buffer address", v = (uintptr_t)r->buf;
        else if (r->offset % IO_DIRECT_ALIGN) what = "offset", v = r->offset;
        else if (r->len % IO_DIRECT_ALIGN) what = "length", v = r->len;
        if (what)
            return st_fail(err, ST_EINVAL, "%s %s at offset %llu: %s %#llx is not a multiple of the %u-byte O_DIRECT alignment",
                           op_name(r->op), f->name, (unsigned long long)r->offset, what, v, IO_DIRECT_ALIGN);
    }
    return ST_OK;
}

st_status io_submit(io_engine *e, const io_request *reqs, size_t n, io_ticket *t, st_error *err) {
    if (t->engine) return st_fail(err, ST_EINVAL, "io_submit: the ticket is already in use (initialize it again)");
    for (size_t i = 0; i < n; i++) {
        st_status s = validate(e, &reqs[i], err);
        if (s != ST_OK) return s;
    }
    io_req *batch = NULL, **tail = &batch;
    for (size_t i = 0; i < n; i++) {
        io_req *r = calloc(1, sizeof *r);
        if (!r) {
            while (batch) {
                io_req *nx = batch->next;
                free(batch);
                batch = nx;
            }
            return st_fail(err, ST_ENOMEM, "allocating %zu I/O requests", n);
        }
        r->r = reqs[i];
        r->ticket = t;
        r->queued = 1;
        *tail = r;
        tail = &r->next;
    }
    t->engine = e;
    pthread_mutex_lock(&e->mu);
    if (e->stopping) {
        pthread_mutex_unlock(&e->mu);
        while (batch) {
            io_req *nx = batch->next;
            free(batch);
            batch = nx;
        }
        t->engine = NULL;
        return st_fail(err, ST_EINTR, "io_submit: the I/O engine is shutting down");
    }
    t->unfinished = (long)n;
    if (n == 0) atomic_store_explicit(&t->complete, 1, memory_order_release);
    while (batch) {
        io_req *r = batch;
        batch = r->next;
        r->next = NULL;
        io_path *p = e->paths[r->r.file->path];
        if (p->tail) p->tail->next = r;
        else p->head = r;
        p->tail = r;
        e->queued_requests++;
    }
    pthread_mutex_unlock(&e->mu);
    if (n) e->backend->wake(e);
    return ST_OK;
}

st_status io_run(io_engine *e, const io_request *req, st_error *err) {
    io_ticket t;
    io_ticket_init(&t);
    st_status s = io_submit(e, req, 1, &t, err);
    if (s != ST_OK) return s;
    return io_ticket_wait(&t, err);
}

/* ---- the scheduler --------------------------------------------------------- */

int engine_idle(const io_engine *e) { return e->queued_requests == 0; }

static void record_failure(io_req *r, st_status s, const st_error *why) {
    r->failed = 1;
    if (r->ticket->status == ST_OK) {
        r->ticket->status = s;
        r->ticket->error = *why;
    }
}

/* Applies the armed fault (if any) to a chunk about to be issued. */
static void apply_fault(io_engine *e, io_chunk *c) {
    if (!e->fault_armed) return;
    io_op op = c->req->r.op;
    unsigned bit = op == IO_OP_READ ? IO_FAULT_READ : op == IO_OP_WRITE ? IO_FAULT_WRITE : IO_FAULT_SYNC;
    if (!(e->fault.ops & bit)) return;
    uint64_t n = ++e->fault_seen;
    const io_fault *f = &e->fault;
    if (f->fail_at && n >= f->fail_at && (f->fail_count == 0 || n < f->fail_at + f->fail_count)) {
        c->inject_errno = f->fail_errno ? f->fail_errno : EIO;
        e->fault_failed++;
        return;
    }
    if (f->short_every && n % f->short_every == 0 && op != IO_OP_SYNC) {
        uint32_t align = io_path_alignment(e, c->path);
        uint64_t half = c->len / 2 / align * align;
        if (half > 0 && half < c->len) {
            c->first_len = half;
            e->fault_shortened++;
        }
    }
}

static io_chunk *alloc_chunk(io_engine *e) {
    io_chunk *c = e->free_chunks;
    if (c) e->free_chunks = c->next;
    else c = malloc(sizeof *c);
    if (c) memset(c, 0, sizeof *c);
    return c;
}

static int find_registered(const io_engine *e, const char *buf, uint64_t len) {
    for (int i = 0; i < e->n_regs; i++)
        if (buf >= e->regs[i].base && buf + len <= e->regs[i].base + e->regs[i].len) return e->regs[i].index;
    return -1;
}

static void pop_head(io_path *p) {
    io_req *r = p->head;
    p->head = r->next;
    if (!p->head) p->tail = NULL;
    r->next = NULL;
    r->queued = 0;
}

/* A read (dir 0) or write (1) transfer starts (+1) or ends (-1) on p: the
 * path's busy times, under the engine lock. */
static void path_busy(io_path *p, int dir, int delta) {
    const double now = st_now();
    const int before = p->dir_inflight[0] > 0 && p->dir_inflight[1] > 0;
    int *n = &p->dir_inflight[dir];
    if (delta > 0 && (*n)++ == 0) p->dir_since[dir] = now;
    if (delta < 0 && --(*n) == 0) *(dir ? &p->counters.write_busy_s : &p->counters.read_busy_s) += now - p->dir_since[dir];
    const int after = p->dir_inflight[0] > 0 && p->dir_inflight[1] > 0;
    if (!before && after) p->both_since = now;
    if (before && !after) p->counters.both_busy_s += now - p->both_since;
}

io_chunk *engine_next_chunk(io_engine *e, int pi, io_req **finished) {
    io_path *p = e->paths[pi];
    for (;;) {
        io_req *r = p->head;
        if (!r) return NULL;
        if (r->failed) {
            /* Its remaining chunks are not worth moving. */
            pop_head(p);
            if (r->inflight == 0) {
                r->next = *finished;
                *finished = r;
            }
            continue;
        }
        if (p->sync_inflight || p->inflight >= p->queue_depth) return NULL;
        if (r->r.op == IO_OP_SYNC && p->inflight > 0) return NULL;   /* barrier */
        io_chunk *c = alloc_chunk(e);
        if (!c) return NULL;   /* out of memory: retried when a chunk frees up */
        c->req = r;
        c->path = pi;
        c->off = r->issued;
        c->len = r->r.op == IO_OP_SYNC ? 0 : r->r.len - r->issued;
        if (c->len > e->cfg.chunk_bytes) c->len = e->cfg.chunk_bytes;
        c->first_len = c->len;
        c->fixed_index = -1;
        if (r->r.op != IO_OP_SYNC && e->registered_active)
            c->fixed_index = find_registered(e, (const char *)r->r.buf + c->off, c->len);
        r->issued += c->len;
        r->inflight++;
        p->inflight++;
        if (r->r.op != IO_OP_SYNC) path_busy(p, r->r.op == IO_OP_WRITE, +1);
        if (r->r.op == IO_OP_SYNC) p->sync_inflight = 1;
        if (r->r.op == IO_OP_SYNC || r->issued == r->r.len) pop_head(p);
        apply_fault(e, c);
        return c;
    }
}

void engine_chunk_finished(io_engine *e, io_chunk *c, int err, io_req **finished) {
    io_req *r = c->req;
    io_path *p = e->paths[c->path];
    io_path_counters *k = &p->counters;
    k->retries += c->retries;
    k->short_transfers += c->shorts;
    io_op op = r->r.op;
    if (err) {
        k->errors++;
        st_error why = {0};
        st_status s = st_fail_errno(&why, err, "%s %s at offset %llu (%llu bytes)%s", op_name(op), r->r.file->name,
                                    (unsigned long long)(r->r.offset + c->off + c->done),
                                    (unsigned long long)(c->len - c->done), c->inject_errno ? " [injected fault]" : "");
        record_failure(r, s, &why);
    } else if (op == IO_OP_READ) {
        k->reads++;
        k->bytes_read += c->len;
    } else if (op == IO_OP_WRITE) {
        k->writes++;
        k->bytes_written += c->len;
    } else {
        k->syncs++;
    }
    p->inflight--;
    if (op == IO_OP_SYNC) p->sync_inflight = 0;
    else path_busy(p, op == IO_OP_WRITE, -1);
    r->inflight--;
    /* A request still queued finishes later: when its last chunk is issued
     * and done, or when engine_next_chunk drops it after a failure. */
    if (r->inflight == 0 && !r->queued) {
        r->next = *finished;
        *finished = r;
    }
    c->next = e->free_chunks;
    e->free_chunks = c;
}

void engine_finish_requests(io_engine *e, io_req *finished) {
    while (finished) {
        io_req *r = finished;
        finished = r->next;
        io_ticket *t = r->ticket;
        st_error why = {0};
        st_status s = ST_OK;
        if (!r->failed && r->r.on_done) s = r->r.on_done(r->r.ctx, r->r.tag, &why);
        pthread_mutex_lock(&e->mu);
        if (s != ST_OK) record_failure(r, s, &why);
        e->queued_requests--;
        int last = --t->unfinished == 0;
        pthread_mutex_unlock(&e->mu);
        free(r);
        if (!last) continue;
        if (t->on_complete) t->on_complete(t, t->on_complete_arg);
        pthread_mutex_lock(&e->mu);
        atomic_store_explicit(&t->complete, 1, memory_order_release);
        pthread_cond_broadcast(&e->done_cond);
        pthread_mutex_unlock(&e->mu);
    }
}

chunk_step chunk_after_transfer(io_chunk *c, io_op op, long res, int *err) {
    if (res == -EINTR || res == -EAGAIN) {
        if (++c->retries > IO_MAX_RETRIES) {
            *err = (int)-res;
            return CHUNK_FAILED;
        }
        return CHUNK_AGAIN;
    }
    if (res < 0) {
        *err = (int)-res;
        return CHUNK_FAILED;
    }
    if (op == IO_OP_SYNC) return CHUNK_DONE;
    if (res == 0) {
        /* Reading past the end of the file, or a write that cannot progress. */
        *err = op == IO_OP_READ ? ENODATA : EIO;
        return CHUNK_FAILED;
    }
    uint64_t want = chunk_want(c);
    c->done += (uint64_t)res > want ? want : (uint64_t)res;
    if (c->done < c->len) {
        c->shorts++;
        return CHUNK_AGAIN;
    }
    return CHUNK_DONE;
}

/* ---- registered buffers ------------------------------------------------------ */

st_status io_engine_register_buffer(io_engine *e, void *base, size_t len, st_error *err) {
    if (!e->cfg.register_buffers || !e->backend->register_buffer) return ST_OK;
    /* The kernel caps one registered buffer at 1 GiB: register big regions piecewise. */
    const size_t piece = 1ull << 30;
    /* Under the lock, so that two callers cannot pick the same slot. The
     * register call does not wait for transfers in flight. */
    pthread_mutex_lock(&e->mu);
    for (size_t off = 0; off < len; off += piece) {
        size_t n = len - off < piece ? len - off : piece;
        int slot = -1;
        for (int s = 0; s < IO_MAX_REGISTERED && slot < 0; s++) {
            int used = 0;
            for (int i = 0; i < e->n_regs; i++) used |= e->regs[i].index == s;
            if (!used) slot = s;
        }
        /* Table full, or the kernel refused (memlock limit): the memory still
         * works for I/O, only without the fixed-buffer fast path. */
        if (slot < 0 || e->backend->register_buffer(e, (char *)base + off, n, slot) != 0) break;
        e->regs[e->n_regs++] = (io_registered){(char *)base, (char *)base + off, n, slot};
        e->registered_active = 1;
    }
    pthread_mutex_unlock(&e->mu);
    (void)err;
    return ST_OK;
}

void io_engine_unregister_buffer(io_engine *e, void *base) {
    if (!base) return;
    for (;;) {
        int slot = -1;
        pthread_mutex_lock(&e->mu);
        for (int i = 0; i < e->n_regs && slot < 0; i++) {
            if (e->regs[i].owner == (char *)base) {
                slot = e->regs[i].index;
                e->regs[i] = e->regs[--e->n_regs];
            }
        }
        if (e->n_regs == 0) e->registered_active = 0;
        /* Still under the lock: once the lock is dropped, a concurrent
         * io_engine_register_buffer may reuse the slot, and clearing it
         * afterwards would unregister that caller's buffer. */
        if (slot >= 0) e->backend->unregister_buffer(e, slot);
        pthread_mutex_unlock(&e->mu);
        if (slot < 0) return;
    }
}

/* ---- counters and faults ------------------------------------------------------ */

void io_engine_path_counters(const io_engine *e, int path_id, io_path_counters *out) {
    memset(out, 0, sizeof *out);
    io_engine *m = (io_engine *)e;   /* the lock, not the counters, is mutated */
    pthread_mutex_lock(&m->mu);
    if (path_id >= 0 && path_id < e->n_paths) {
        const io_path *p = e->paths[path_id];
        *out = p->counters;
        const double now = st_now();   /* the busy spells still open count up to now */
        if (p->dir_inflight[0] > 0) out->read_busy_s += now - p->dir_since[0];
        if (p->dir_inflight[1] > 0) out->write_busy_s += now - p->dir_since[1];
        if (p->dir_inflight[0] > 0 && p->dir_inflight[1] > 0) out->both_busy_s += now - p->both_since;
    }
    pthread_mutex_unlock(&m->mu);
}

void io_path_counters_add_delta(io_path_counters *sum, const io_path_counters *now, const io_path_counters *then) {
    sum->bytes_read += now->bytes_read - then->bytes_read;
    sum->bytes_written += now->bytes_written - then->bytes_written;
    sum->reads += now->reads - then->reads;
    sum->writes += now->writes - then->writes;
    sum->syncs += now->syncs - then->syncs;
    sum->errors += now->errors - then->errors;
    sum->short_transfers += now->short_transfers - then->short_transfers;
    sum->retries += now->retries - then->retries;
    sum->read_busy_s += now->read_busy_s - then->read_busy_s;
    sum->write_busy_s += now->write_busy_s - then->write_busy_s;
    sum->both_busy_s += now->both_busy_s - then->both_busy_s;
}

void io_engine_set_fault(io_engine *e, const io_fault *f) {
    pthread_mutex_lock(&e->mu);
    e->fault_armed = f != NULL;
    if (f) e->fault = *f;
    else memset(&e->fault, 0, sizeof e->fault);
    e->fault_seen = e->fault_failed = e->fault_shortened = 0;
    pthread_mutex_unlock(&e->mu);
}

void io_engine_fault_stats(const io_engine *e, uint64_t *failed, uint64_t *shortened) {
    io_engine *m = (io_engine *)e;
    pthread_mutex_lock(&m->mu);
    if (failed) *failed = e->fault_failed;
    if (shortened) *shortened = e->fault_shortened;
    pthread_mutex_unlock(&m->mu);
}
