/* io_psync_backend.c - the fallback: a pool of threads, each moving one
 * chunk at a time with pread/pwrite/fdatasync. Each path brings queue_depth
 * threads, so a path keeps as many transfers in flight as with io_uring. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "io/io_internal.h"

#define PSYNC_MAX_THREADS 256

typedef struct psync_state {
    pthread_t threads[PSYNC_MAX_THREADS];
    int n_threads;             /* under e->mu */
} psync_state;

typedef struct psync_worker_arg {
    io_engine *e;
    int index;
} psync_worker_arg;

/* Moves all of c's bytes; 0 or an errno. */
static int transfer(io_chunk *c) {
    const io_request *r = &c->req->r;
    int fd = io_file_fd(r->file);
    for (;;) {
        long res;
        if (r->op == IO_OP_SYNC) res = fdatasync(fd);
        else if (r->op == IO_OP_READ) res = pread(fd, chunk_buf(c), chunk_want(c), (off_t)chunk_file_offset(c));
        else res = pwrite(fd, chunk_buf(c), chunk_want(c), (off_t)chunk_file_offset(c));
        if (res < 0) res = -errno;
        int err = 0;
        switch (chunk_after_transfer(c, r->op, res, &err)) {
        case CHUNK_DONE: return 0;
        case CHUNK_FAILED: return err;
        case CHUNK_AGAIN: continue;
        }
    }
}

static void *psync_worker(void *arg) {
    psync_worker_arg a = *(psync_worker_arg *)arg;
    free(arg);
    io_engine *e = a.e;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        io_req *finished = NULL;
        io_chunk *c = NULL;
        int n = e->n_paths;
        for (int k = 0; k < n && !c; k++) c = engine_next_chunk(e, (a.index + k) % n, &finished);
        if (finished) {
            pthread_mutex_unlock(&e->mu);
            engine_finish_requests(e, finished);
            pthread_mutex_lock(&e->mu);
            pthread_cond_broadcast(&e->work_cond);
            finished = NULL;
        }
        if (!c) {
            if (e->stopping && engine_idle(e)) break;
            pthread_cond_wait(&e->work_cond, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        int err = c->inject_errno ? c->inject_errno : transfer(c);
        pthread_mutex_lock(&e->mu);
        engine_chunk_finished(e, c, err, &finished);
        /* A queue slot (or a sync barrier) was released. */
        pthread_cond_broadcast(&e->work_cond);
        if (finished) {
            pthread_mutex_unlock(&e->mu);
            engine_finish_requests(e, finished);
            pthread_mutex_lock(&e->mu);
            pthread_cond_broadcast(&e->work_cond);
        }
    }
    pthread_cond_broadcast(&e->work_cond);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static st_status psync_start(io_engine *e, st_error *err) {
    psync_state *ps = calloc(1, sizeof *ps);
    if (!ps) return st_fail(err, ST_ENOMEM, "allocating the psync engine");
    e->backend_state = ps;
    return ST_OK;
}

static st_status psync_path_added(io_engine *e, int path, st_error *err) {
    psync_state *ps = e->backend_state;
    pthread_mutex_lock(&e->mu);
    int want = e->paths[path]->queue_depth;
    st_status s = ST_OK;
    for (int i = 0; i < want && ps->n_threads < PSYNC_MAX_THREADS; i++) {
        psync_worker_arg *a = malloc(sizeof *a);
        if (!a) {
            s = st_fail(err, ST_ENOMEM, "psync engine: allocating a thread argument");
            break;
        }
        a->e = e;
        a->index = ps->n_threads;
        int rc = pthread_create(&ps->threads[ps->n_threads], NULL, psync_worker, a);
        if (rc != 0) {
            free(a);
            s = st_fail_errno(err, rc, "psync engine: starting a thread for %s", e->paths[path]->dir);
            break;
        }
        ps->n_threads++;
    }
    pthread_mutex_unlock(&e->mu);
    return s;
}

static void psync_wake(io_engine *e) {
    pthread_mutex_lock(&e->mu);
    pthread_cond_broadcast(&e->work_cond);
    pthread_mutex_unlock(&e->mu);
}

static void psync_stop(io_engine *e) {
    psync_state *ps = e->backend_state;
    if (!ps) return;
    psync_wake(e);
    for (int i = 0; i < ps->n_threads; i++) pthread_join(ps->threads[i], NULL);
    free(ps);
    e->backend_state = NULL;
}

const io_backend io_psync_backend = {
    .name = "psync",
    .start = psync_start,
    .wake = psync_wake,
    .path_added = psync_path_added,
    .stop = psync_stop,
    .register_buffer = NULL,
    .unregister_buffer = NULL,
};
