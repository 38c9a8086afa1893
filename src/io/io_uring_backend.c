/* io_uring_backend.c - one thread drives an io_uring: it keeps every path
 * at its queue depth, reaps completions, continues short transfers, and
 * sleeps in the kernel when there is nothing to do. Submitters wake it by
 * writing an eventfd whose read is always pending in the ring. */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "io/io_internal.h"

#define RING_ENTRIES 512
#define WAKE_TAG ((uint64_t)1)   /* user_data of the eventfd read; chunks are pointers */

typedef struct uring_state {
    struct io_uring ring;
    pthread_t thread;
    int thread_started;
    int wake_fd;
    uint64_t wake_value;
    int buffers_sparse;          /* a sparse fixed-buffer table is registered */
    long inflight;               /* SQEs whose completions are outstanding (worker only) */
} uring_state;

static struct io_uring_sqe *get_sqe(uring_state *u) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
    while (!sqe) {
        /* The submission queue is full: hand it to the kernel and retry. */
        int rc = io_uring_submit(&u->ring);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) return NULL;
        sqe = io_uring_get_sqe(&u->ring);
    }
    return sqe;
}

static void arm_wake(uring_state *u) {
    struct io_uring_sqe *sqe = get_sqe(u);
    if (!sqe) return;
    io_uring_prep_read(sqe, u->wake_fd, &u->wake_value, sizeof u->wake_value, 0);
    io_uring_sqe_set_data64(sqe, WAKE_TAG);
    u->inflight++;
}

/* Queues the next attempt of c; 0, or an errno when no SQE could be had. */
static int issue(uring_state *u, io_chunk *c) {
    struct io_uring_sqe *sqe = get_sqe(u);
    if (!sqe) return EIO;
    const io_request *r = &c->req->r;
    int fd = io_file_fd(r->file);
    unsigned want = (unsigned)chunk_want(c);
    switch (r->op) {
    case IO_OP_READ:
        if (c->fixed_index >= 0) io_uring_prep_read_fixed(sqe, fd, chunk_buf(c), want, chunk_file_offset(c), c->fixed_index);
        else io_uring_prep_read(sqe, fd, chunk_buf(c), want, chunk_file_offset(c));
        break;
    case IO_OP_WRITE:
        if (c->fixed_index >= 0) io_uring_prep_write_fixed(sqe, fd, chunk_buf(c), want, chunk_file_offset(c), c->fixed_index);
        else io_uring_prep_write(sqe, fd, chunk_buf(c), want, chunk_file_offset(c));
        break;
    case IO_OP_SYNC:
        io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
        break;
    }
    io_uring_sqe_set_data(sqe, c);
    u->inflight++;
    return 0;
}

static void *uring_worker(void *arg) {
    io_engine *e = arg;
    uring_state *u = e->backend_state;
    arm_wake(u);
    /* Requests whose last transfer completed, their callbacks not yet run:
     * they run after the transfers that the completions made room for are
     * handed to the kernel, so that a callback's work (the store's checksum
     * of a chunk read) never leaves the drive short of requests. */
    io_req *completed = NULL;
    for (;;) {
        io_req *finished = NULL;
        io_chunk *failed = NULL;   /* chunks that complete without a transfer */
        int issued = 0;

        pthread_mutex_lock(&e->mu);
        for (int p = 0; p < e->n_paths; p++) {
            io_chunk *c;
            /* At most RING_ENTRIES - 1 transfers in flight (one slot is the
             * wake read): the completion queue (twice as large) never overflows. */
            while (u->inflight < RING_ENTRIES && (c = engine_next_chunk(e, p, &finished)) != NULL) {
                if (c->inject_errno || issue(u, c) != 0) {
                    if (!c->inject_errno) c->inject_errno = EIO;
                    c->next = failed;
                    failed = c;
                } else {
                    issued++;
                }
            }
        }
        for (io_chunk *c = failed, *nx; c; c = nx) {
            nx = c->next;
            engine_chunk_finished(e, c, c->inject_errno, &finished);
        }
        int stop = e->stopping && engine_idle(e);
        pthread_mutex_unlock(&e->mu);
        if (completed) {
            if (issued) (void)io_uring_submit(&u->ring);   /* an error here is met again below */
            engine_finish_requests(e, completed);
            completed = NULL;
            engine_finish_requests(e, finished);
            continue;   /* the callbacks may have queued more, or finished the last request */
        }
        engine_finish_requests(e, finished);
        if (failed) continue;   /* their slots are free again: issue more first */
        if (stop) break;

        int rc = io_uring_submit_and_wait(&u->ring, 1);
        if (rc < 0 && rc != -EINTR) {
            /* Out of kernel resources for the moment: back off, then retry
             * (the completions already queued are reaped below). */
            usleep(1000);
        }

        /* Reap everything that is ready; bookkeeping under one lock. */
        io_chunk *done = NULL;
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&u->ring, head, cqe) {
            seen++;
            u->inflight--;
            if (cqe->user_data == WAKE_TAG) {
                arm_wake(u);
                continue;
            }
            io_chunk *c = io_uring_cqe_get_data(cqe);
            int err = 0;
            switch (chunk_after_transfer(c, c->req->r.op, cqe->res, &err)) {
            case CHUNK_AGAIN:
                if (issue(u, c) == 0) continue;
                err = EIO;
                /* fallthrough */
            case CHUNK_FAILED:
                c->result_errno = err;
                c->next = done;
                done = c;
                continue;
            case CHUNK_DONE:
                c->result_errno = 0;
                c->next = done;
                done = c;
                continue;
            }
        }
        io_uring_cq_advance(&u->ring, seen);
        if (!done) continue;
        pthread_mutex_lock(&e->mu);
        for (io_chunk *c = done, *nx; c; c = nx) {
            nx = c->next;
            engine_chunk_finished(e, c, c->result_errno, &completed);
        }
        pthread_mutex_unlock(&e->mu);
    }
    return NULL;
}

static st_status uring_start(io_engine *e, st_error *err) {
    uring_state *u = calloc(1, sizeof *u);
    if (!u) return st_fail(err, ST_ENOMEM, "allocating the io_uring state");
    int rc = io_uring_queue_init(RING_ENTRIES, &u->ring, 0);
    if (rc < 0) {
        free(u);
        return st_fail_errno(err, -rc, "io_uring unavailable (io_uring_queue_init)");
    }
    u->wake_fd = eventfd(0, EFD_CLOEXEC);
    if (u->wake_fd < 0) {
        int en = errno;
        io_uring_queue_exit(&u->ring);
        free(u);
        return st_fail_errno(err, en, "io_uring engine: eventfd");
    }
    if (e->cfg.register_buffers) u->buffers_sparse = io_uring_register_buffers_sparse(&u->ring, IO_MAX_REGISTERED) == 0;
    e->backend_state = u;
    rc = pthread_create(&u->thread, NULL, uring_worker, e);
    if (rc != 0) {
        close(u->wake_fd);
        io_uring_queue_exit(&u->ring);
        free(u);
        e->backend_state = NULL;
        return st_fail_errno(err, rc, "io_uring engine: starting its thread");
    }
    u->thread_started = 1;
    return ST_OK;
}

static void uring_wake(io_engine *e) {
    uring_state *u = e->backend_state;
    uint64_t one = 1;
    ssize_t n;
    do n = write(u->wake_fd, &one, sizeof one);
    while (n < 0 && errno == EINTR);
}

static void uring_stop(io_engine *e) {
    uring_state *u = e->backend_state;
    if (!u) return;
    uring_wake(e);
    if (u->thread_started) pthread_join(u->thread, NULL);
    /* The pending eventfd read is cancelled when the ring goes away. */
    io_uring_queue_exit(&u->ring);
    close(u->wake_fd);
    free(u);
    e->backend_state = NULL;
}

static int uring_register_buffer(io_engine *e, void *base, size_t len, int slot) {
    uring_state *u = e->backend_state;
    if (!u->buffers_sparse) return -EOPNOTSUPP;
    struct iovec iov = {.iov_base = base, .iov_len = len};
    int rc = io_uring_register_buffers_update_tag(&u->ring, (unsigned)slot, &iov, NULL, 1);
    return rc == 1 ? 0 : rc < 0 ? rc : -EIO;
}

static void uring_unregister_buffer(io_engine *e, int slot) {
    uring_state *u = e->backend_state;
    struct iovec iov = {.iov_base = NULL, .iov_len = 0};
    (void)io_uring_register_buffers_update_tag(&u->ring, (unsigned)slot, &iov, NULL, 1);
}

const io_backend io_uring_backend = {
    .name = "io_uring",
    .start = uring_start,
    .wake = uring_wake,
    .path_added = NULL,
    .stop = uring_stop,
    .register_buffer = uring_register_buffer,
    .unregister_buffer = uring_unregister_buffer,
};
