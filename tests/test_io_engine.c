/* test_io_engine.c - the async I/O engine on io_uring and psync: round trips,
 * batches and tickets, short transfers, injected faults, sync barriers,
 * registered buffers, several paths, shutdown with queued work, busy times. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/io.h"

typedef struct fixture {
    io_engine_kind kind;
    char dir[512];
    char dir2[600];
    io_engine *eng;
    int path, path2;
} fixture;

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void make_dirs(fixture *f) {
    snprintf(f->dir, sizeof f->dir, "%s/tmp-io-engine-XXXXXX", STRATA_BINARY_DIR);
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->dir2, sizeof f->dir2, "%s/second", f->dir);
    assert_int_equal(mkdir(f->dir2, 0755), 0);
}

static int setup_kind(void **state, io_engine_kind kind, int register_buffers) {
    fixture *f = calloc(1, sizeof *f);
    f->kind = kind;
    make_dirs(f);
    io_engine_config cfg = io_engine_default_config();
    cfg.kind = kind;
    cfg.chunk_bytes = 256 * 1024;   /* small chunks: every request spans several */
    cfg.queue_depth = 4;
    cfg.register_buffers = register_buffers;
    st_error err = {0};
    if (io_engine_create(&cfg, &f->eng, &err) != ST_OK) {
        print_error("engine: %s\n", err.msg);
        return -1;
    }
    if (io_engine_add_path(f->eng, f->dir, NULL, &f->path, &err) != ST_OK) return -1;
    if (io_engine_add_path(f->eng, f->dir2, NULL, &f->path2, &err) != ST_OK) return -1;
    *state = f;
    return 0;
}
static int setup_uring(void **state) { return setup_kind(state, IO_ENGINE_URING, 1); }
static int setup_psync(void **state) { return setup_kind(state, IO_ENGINE_PSYNC, 0); }

static int teardown(void **state) {
    fixture *f = *state;
    io_engine_destroy(f->eng);
    nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

static void fill(unsigned char *p, size_t n, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = st_rng_next(&r);
        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

static io_file *open_file(fixture *f, int path, const char *name) {
    io_file *file = NULL;
    st_error err = {0};
    st_status s = io_file_open(f->eng, path, name, IO_FILE_CREATE, &file, &err);
    if (s != ST_OK) print_error("%s\n", err.msg);
    assert_int_equal(s, ST_OK);
    return file;
}

static void write_then_read(fixture *f, io_file *file, size_t n, uint64_t offset) {
    unsigned char *src = st_alloc_aligned(4096, n), *dst = st_alloc_aligned(4096, n);
    assert_non_null(src);
    assert_non_null(dst);
    fill(src, n, n + offset);
    memset(dst, 0xee, n);
    st_error err = {0};
    io_request w = {.op = IO_OP_WRITE, .file = file, .buf = src, .len = n, .offset = offset};
    assert_int_equal(io_run(f->eng, &w, &err), ST_OK);
    io_request r = {.op = IO_OP_READ, .file = file, .buf = dst, .len = n, .offset = offset};
    assert_int_equal(io_run(f->eng, &r, &err), ST_OK);
    assert_memory_equal(src, dst, n);
    st_free_aligned(src);
    st_free_aligned(dst);
}

static void test_round_trips(void **state) {
    fixture *f = *state;
    io_file *file = open_file(f, f->path, "rt.bin");
    static const size_t sizes[] = {4096, 3 * 4096, 256 * 1024, 256 * 1024 + 4096, 5 * 256 * 1024 - 4096,
                                   (32u << 20) + 4096};
    uint64_t off = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        write_then_read(f, file, sizes[i], off);
        off += sizes[i] + 8192;
    }
    io_path_counters c;
    io_engine_path_counters(f->eng, f->path, &c);
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) total += sizes[i];
    assert_int_equal(c.bytes_written, total);
    assert_int_equal(c.bytes_read, total);
    assert_true(c.writes >= total / (256 * 1024));
    assert_int_equal(c.errors, 0);
    io_file_close(file);
}

/* Busy times: a write alone counts write time only, within its wall time;
 * a read and a write in one batch count time with both in flight, never
 * more than either alone; nothing counts once the path is idle, and the
 * other path stays at zero. */
static void test_busy_times(void **state) {
    fixture *f = *state;
    io_file *file = open_file(f, f->path, "busy.bin");
    const size_t n = 8u << 20;
    unsigned char *a = st_alloc_aligned(4096, n), *b = st_alloc_aligned(4096, n);
    assert_non_null(a);
    assert_non_null(b);
    fill(a, n, 1);
    fill(b, n, 2);
    st_error err = {0};
    io_path_counters c, c2;
    double t0 = st_now();
    io_request w = {.op = IO_OP_WRITE, .file = file, .buf = a, .len = n, .offset = 0};
    assert_int_equal(io_run(f->eng, &w, &err), ST_OK);
    const double wall_w = st_now() - t0;
    io_engine_path_counters(f->eng, f->path, &c);
    assert_true(c.write_busy_s > 0 && c.write_busy_s <= wall_w);
    assert_true(c.read_busy_s == 0 && c.both_busy_s == 0);

    t0 = st_now();
    io_request rw[2] = {{.op = IO_OP_READ, .file = file, .buf = b, .len = n, .offset = 0},
                        {.op = IO_OP_WRITE, .file = file, .buf = a, .len = n, .offset = n}};
    io_ticket t;
    io_ticket_init(&t);
    assert_int_equal(io_submit(f->eng, rw, 2, &t, &err), ST_OK);
    assert_int_equal(io_ticket_wait(&t, &err), ST_OK);
    const double wall_rw = st_now() - t0;
    assert_memory_equal(a, b, n);
    io_engine_path_counters(f->eng, f->path, &c2);
    assert_true(c2.read_busy_s > 0 && c2.read_busy_s <= wall_rw);
    assert_true(c2.write_busy_s > c.write_busy_s && c2.write_busy_s - c.write_busy_s <= wall_rw);
    assert_true(c2.both_busy_s >= 0 && c2.both_busy_s <= c2.read_busy_s && c2.both_busy_s <= c2.write_busy_s - c.write_busy_s);

    usleep(20000);   /* idle: nothing more is counted */
    io_engine_path_counters(f->eng, f->path, &c);
    assert_true(c.read_busy_s == c2.read_busy_s && c.write_busy_s == c2.write_busy_s && c.both_busy_s == c2.both_busy_s);
    io_engine_path_counters(f->eng, f->path2, &c);
    assert_true(c.read_busy_s == 0 && c.write_busy_s == 0 && c.both_busy_s == 0);
    st_free_aligned(a);
    st_free_aligned(b);
    io_file_close(file);
}

typedef struct callback_log {
    int calls[8];
    int completes;
} callback_log;

static st_status count_done(void *ctx, uint64_t tag, st_error *err) {
    callback_log *log = ctx;
    log->calls[tag]++;
    (void)err;
    return ST_OK;
}

static void count_complete(io_ticket *t, void *arg) {
    (void)t;
    ((callback_log *)arg)->completes++;
}

/* Eight requests on two paths in one batch: every on_done runs exactly once,
 * on_complete once, and the ticket polls as done after the wait. */
static void test_batch_over_two_paths(void **state) {
    fixture *f = *state;
    int again = -1;
    st_error aerr = {0};
    assert_int_equal(io_engine_add_path(f->eng, f->dir, NULL, &again, &aerr), ST_OK);
    assert_int_equal(again, f->path);   /* one queue per directory */
    assert_int_equal(io_engine_path_count(f->eng), 2);
    io_file *a = open_file(f, f->path, "a.bin"), *b = open_file(f, f->path2, "b.bin");
    size_t n = 1 << 20;
    unsigned char *buf = st_alloc_aligned(4096, 8 * n);
    fill(buf, 8 * n, 3);
    io_request reqs[8];
    callback_log log = {0};
    for (int i = 0; i < 8; i++)
        reqs[i] = (io_request){.op = IO_OP_WRITE, .file = i % 2 ? b : a, .buf = buf + (size_t)i * n, .len = n,
                               .offset = (uint64_t)(i / 2) * n, .on_done = count_done, .ctx = &log, .tag = (uint64_t)i};
    io_ticket t;
    io_ticket_init(&t);
    t.on_complete = count_complete;
    t.on_complete_arg = &log;
    st_error err = {0};
    assert_int_equal(io_submit(f->eng, reqs, 8, &t, &err), ST_OK);
    /* A ticket serves one batch. */
    assert_int_equal(io_submit(f->eng, reqs, 1, &t, &err), ST_EINVAL);
    assert_int_equal(io_ticket_wait(&t, &err), ST_OK);
    assert_true(io_ticket_done(&t));
    for (int i = 0; i < 8; i++) assert_int_equal(log.calls[i], 1);
    assert_int_equal(log.completes, 1);
    io_path_counters ca, cb;
    io_engine_path_counters(f->eng, f->path, &ca);
    io_engine_path_counters(f->eng, f->path2, &cb);
    assert_int_equal(ca.bytes_written, 4 * n);
    assert_int_equal(cb.bytes_written, 4 * n);

    /* Read back crosswise into one buffer and compare. */
    unsigned char *back = st_alloc_aligned(4096, 8 * n);
    for (int i = 0; i < 8; i++) {
        reqs[i].op = IO_OP_READ;
        reqs[i].buf = back + (size_t)i * n;
        reqs[i].on_done = NULL;
    }
    io_ticket_init(&t);
    assert_int_equal(io_submit(f->eng, reqs, 8, &t, &err), ST_OK);
    assert_int_equal(io_ticket_wait(&t, &err), ST_OK);
    assert_memory_equal(buf, back, 8 * n);
    /* An empty batch completes at once. */
    io_ticket_init(&t);
    assert_int_equal(io_submit(f->eng, NULL, 0, &t, &err), ST_OK);
    assert_true(io_ticket_done(&t));
    st_free_aligned(buf);
    st_free_aligned(back);
    io_file_close(a);
    io_file_close(b);
}

static void test_short_transfers_are_continued(void **state) {
    fixture *f = *state;
    io_file *file = open_file(f, f->path, "short.bin");
    io_fault fault = {.ops = IO_FAULT_READ | IO_FAULT_WRITE, .short_every = 1};
    io_engine_set_fault(f->eng, &fault);
    write_then_read(f, file, 4u << 20, 0);
    uint64_t failed, shortened;
    io_engine_fault_stats(f->eng, &failed, &shortened);
    io_engine_set_fault(f->eng, NULL);
    assert_int_equal(failed, 0);
    assert_true(shortened >= 2 * 16);   /* every 256 KiB chunk, both ways */
    io_path_counters c;
    io_engine_path_counters(f->eng, f->path, &c);
    assert_true(c.short_transfers >= shortened);
    io_file_close(file);
}

static void test_injected_errors_name_file_and_offset(void **state) {
    fixture *f = *state;
    io_file *file = open_file(f, f->path, "fault.bin");
    size_t n = 2u << 20;
    unsigned char *buf = st_alloc_aligned(4096, n);
    fill(buf, n, 9);
    st_error err = {0};

    /* The third write chunk fails with EIO: the caller gets ST_EIO naming
     * the file and the chunk's offset (2 x 256 KiB). */
    io_fault fault = {.ops = IO_FAULT_WRITE, .fail_at = 3, .fail_count = 1, .fail_errno = EIO};
    io_engine_set_fault(f->eng, &fault);
    io_request w = {.op = IO_OP_WRITE, .file = file, .buf = buf, .len = n, .offset = 0};
    assert_int_equal(io_run(f->eng, &w, &err), ST_EIO);
    assert_non_null(strstr(err.msg, "fault.bin"));
    assert_non_null(strstr(err.msg, "at offset 524288"));
    assert_non_null(strstr(err.msg, "injected"));
    uint64_t failed;
    io_engine_fault_stats(f->eng, &failed, NULL);
    assert_int_equal(failed, 1);

    /* ENOSPC comes back as ST_ENOSPC. */
    fault = (io_fault){.ops = IO_FAULT_WRITE, .fail_at = 1, .fail_count = 0, .fail_errno = ENOSPC};
    io_engine_set_fault(f->eng, &fault);
    memset(&err, 0, sizeof err);
    assert_int_equal(io_run(f->eng, &w, &err), ST_ENOSPC);
    assert_int_equal(err.sys_errno, ENOSPC);

    /* Reads are not in the mask: they still work while writes fail. */
    io_request r = {.op = IO_OP_READ, .file = file, .buf = buf, .len = 4096, .offset = 0};
    assert_int_equal(io_run(f->eng, &r, &err), ST_OK);

    /* A failing sync. */
    fault = (io_fault){.ops = IO_FAULT_SYNC, .fail_at = 1, .fail_count = 1, .fail_errno = EIO};
    io_engine_set_fault(f->eng, &fault);
    io_request sy = {.op = IO_OP_SYNC, .file = file};
    assert_int_equal(io_run(f->eng, &sy, &err), ST_EIO);
    assert_non_null(strstr(err.msg, "sync"));
    assert_int_equal(io_run(f->eng, &sy, &err), ST_OK);   /* one-shot */
    io_engine_set_fault(f->eng, NULL);

    /* After disarming, the full write works and reads back. */
    write_then_read(f, file, n, 0);
    io_path_counters c;
    io_engine_path_counters(f->eng, f->path, &c);
    assert_true(c.errors >= 3);
    st_free_aligned(buf);
    io_file_close(file);
}

/* A failure in one request of a batch does not stop the others. */
static void test_failure_is_per_request(void **state) {
    fixture *f = *state;
    io_file *a = open_file(f, f->path, "pa.bin");
    size_t n = 256 * 1024;
    unsigned char *buf = st_alloc_aligned(4096, 4 * n);
    fill(buf, 4 * n, 5);
    callback_log log = {0};
    io_request reqs[4];
    for (int i = 0; i < 4; i++)
        reqs[i] = (io_request){.op = IO_OP_WRITE, .file = a, .buf = buf + (size_t)i * n, .len = n,
                               .offset = (uint64_t)i * n, .on_done = count_done, .ctx = &log, .tag = (uint64_t)i};
    io_fault fault = {.ops = IO_FAULT_WRITE, .fail_at = 2, .fail_count = 1};
    io_engine_set_fault(f->eng, &fault);
    io_ticket t;
    io_ticket_init(&t);
    st_error err = {0};
    assert_int_equal(io_submit(f->eng, reqs, 4, &t, &err), ST_OK);
    assert_int_equal(io_ticket_wait(&t, &err), ST_EIO);
    io_engine_set_fault(f->eng, NULL);
    int ok = 0;
    for (int i = 0; i < 4; i++) ok += log.calls[i];
    assert_int_equal(ok, 3);   /* on_done runs only for requests that succeeded */
    st_free_aligned(buf);
    io_file_close(a);
}

static st_status reject_tag_1(void *ctx, uint64_t tag, st_error *err) {
    (void)ctx;
    if (tag == 1) return st_fail(err, ST_ECORRUPT, "checksum mismatch in request %llu", (unsigned long long)tag);
    return ST_OK;
}

static void test_on_done_failure_fails_ticket(void **state) {
    fixture *f = *state;
    io_file *a = open_file(f, f->path, "cb.bin");
    unsigned char *buf = st_alloc_aligned(4096, 8192);
    memset(buf, 1, 8192);
    io_request reqs[2] = {
        {.op = IO_OP_WRITE, .file = a, .buf = buf, .len = 4096, .offset = 0, .on_done = reject_tag_1, .tag = 0},
        {.op = IO_OP_WRITE, .file = a, .buf = buf + 4096, .len = 4096, .offset = 4096, .on_done = reject_tag_1, .tag = 1},
    };
    io_ticket t;
    io_ticket_init(&t);
    st_error err = {0};
    assert_int_equal(io_submit(f->eng, reqs, 2, &t, &err), ST_OK);
    assert_int_equal(io_ticket_wait(&t, &err), ST_ECORRUPT);
    assert_string_equal(err.msg, "checksum mismatch in request 1");
    st_free_aligned(buf);
    io_file_close(a);
}

static void test_bad_requests_rejected_up_front(void **state) {
    fixture *f = *state;
    io_file *a = open_file(f, f->path, "bad.bin");
    unsigned char *buf = st_alloc_aligned(4096, 16384);
    st_error err = {0};
    io_request r = {.op = IO_OP_WRITE, .file = a, .buf = buf, .len = 4096, .offset = 100};
    assert_int_equal(io_run(f->eng, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "offset 0x64 is not a multiple of the 4096-byte O_DIRECT alignment"));
    r.offset = 0;
    r.len = 4095;
    assert_int_equal(io_run(f->eng, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "length"));
    r.len = 4096;
    r.buf = buf + 1;
    assert_int_equal(io_run(f->eng, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "buffer address"));
    /* Nothing of a batch is queued when one request is bad. */
    io_request two[2] = {{.op = IO_OP_WRITE, .file = a, .buf = buf, .len = 4096, .offset = 0},
                         {.op = IO_OP_WRITE, .file = a, .buf = buf, .len = 4096, .offset = 3}};
    io_ticket t;
    io_ticket_init(&t);
    assert_int_equal(io_submit(f->eng, two, 2, &t, &err), ST_EINVAL);
    assert_null(t.engine);
    io_path_counters c;
    io_engine_path_counters(f->eng, f->path, &c);
    assert_int_equal(c.writes, 0);
    /* Reading past the end of the file is an error, not zeros. */
    r = (io_request){.op = IO_OP_READ, .file = a, .buf = buf, .len = 4096, .offset = 1 << 20};
    assert_int_equal(io_run(f->eng, &r, &err), ST_EIO);
    assert_non_null(strstr(err.msg, "read"));
    st_free_aligned(buf);
    io_file_close(a);
}

/* A sync submitted behind writes in the same batch waits for them; one that
 * runs concurrently with many queued writes does not corrupt their data. */
static void test_sync_is_a_barrier(void **state) {
    fixture *f = *state;
    io_file *a = open_file(f, f->path, "barrier.bin");
    size_t n = 4u << 20;
    unsigned char *buf = st_alloc_aligned(4096, n);
    fill(buf, n, 21);
    io_request reqs[3] = {
        {.op = IO_OP_WRITE, .file = a, .buf = buf, .len = n / 2, .offset = 0},
        {.op = IO_OP_SYNC, .file = a},
        {.op = IO_OP_WRITE, .file = a, .buf = buf + n / 2, .len = n / 2, .offset = n / 2},
    };
    io_ticket t;
    io_ticket_init(&t);
    st_error err = {0};
    assert_int_equal(io_submit(f->eng, reqs, 3, &t, &err), ST_OK);
    assert_int_equal(io_ticket_wait(&t, &err), ST_OK);
    io_path_counters c;
    io_engine_path_counters(f->eng, f->path, &c);
    assert_int_equal(c.syncs, 1);
    unsigned char *back = st_alloc_aligned(4096, n);
    io_request r = {.op = IO_OP_READ, .file = a, .buf = back, .len = n, .offset = 0};
    assert_int_equal(io_run(f->eng, &r, &err), ST_OK);
    assert_memory_equal(buf, back, n);
    st_free_aligned(buf);
    st_free_aligned(back);
    io_file_close(a);
}

static void test_registered_buffers(void **state) {
    fixture *f = *state;
    size_t n = 8u << 20;
    unsigned char *pool = st_alloc_aligned(4096, n);
    st_error err = {0};
    assert_int_equal(io_engine_register_buffer(f->eng, pool, n, &err), ST_OK);
    io_engine_info info;
    io_engine_describe(f->eng, &info);
    if (f->kind == IO_ENGINE_URING) assert_int_equal(info.registered_buffers, 1);
    else assert_int_equal(info.registered_buffers, 0);
    io_file *a = open_file(f, f->path, "fixed.bin");
    fill(pool, n / 2, 77);
    io_request w = {.op = IO_OP_WRITE, .file = a, .buf = pool, .len = n / 2, .offset = 0};
    assert_int_equal(io_run(f->eng, &w, &err), ST_OK);
    io_request r = {.op = IO_OP_READ, .file = a, .buf = pool + n / 2, .len = n / 2, .offset = 0};
    assert_int_equal(io_run(f->eng, &r, &err), ST_OK);
    assert_memory_equal(pool, pool + n / 2, n / 2);
    io_engine_unregister_buffer(f->eng, pool);
    io_engine_describe(f->eng, &info);
    assert_int_equal(info.registered_buffers, 0);
    io_file_close(a);
    st_free_aligned(pool);
}

/* Destroying the engine with work queued completes every ticket: finished
 * requests with OK, the rest with ST_EINTR; nothing hangs or leaks. */
static void test_shutdown_with_queued_work(void **state) {
    fixture *f = *state;
    io_engine_config cfg = io_engine_default_config();
    cfg.kind = f->kind;
    cfg.queue_depth = 1;
    io_engine *eng;
    st_error err = {0};
    assert_int_equal(io_engine_create(&cfg, &eng, &err), ST_OK);
    int path;
    assert_int_equal(io_engine_add_path(eng, f->dir, NULL, &path, &err), ST_OK);
    io_file *a;
    assert_int_equal(io_file_open(eng, path, "shutdown.bin", IO_FILE_CREATE, &a, &err), ST_OK);
    size_t n = 1 << 20;
    unsigned char *buf = st_alloc_aligned(4096, n);
    memset(buf, 3, n);
    enum { T = 32 };
    io_ticket t[T];
    for (int i = 0; i < T; i++) {
        io_ticket_init(&t[i]);
        io_request w = {.op = IO_OP_WRITE, .file = a, .buf = buf, .len = n, .offset = (uint64_t)i * n};
        assert_int_equal(io_submit(eng, &w, 1, &t[i], &err), ST_OK);
    }
    io_engine_destroy(eng);
    int ok = 0, stopped = 0;
    for (int i = 0; i < T; i++) {
        assert_true(io_ticket_done(&t[i]));
        if (t[i].status == ST_OK) ok++;
        else if (t[i].status == ST_EINTR) stopped++;
    }
    assert_int_equal(ok + stopped, T);
    io_file_close(a);
    st_free_aligned(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define BOTH(fn) cmocka_unit_test_setup_teardown(fn, setup_uring, teardown), \
                 cmocka_unit_test_setup_teardown(fn, setup_psync, teardown)
        BOTH(test_round_trips),
        BOTH(test_busy_times),
        BOTH(test_batch_over_two_paths),
        BOTH(test_short_transfers_are_continued),
        BOTH(test_injected_errors_name_file_and_offset),
        BOTH(test_failure_is_per_request),
        BOTH(test_on_done_failure_fails_ticket),
        BOTH(test_bad_requests_rejected_up_front),
        BOTH(test_sync_is_a_barrier),
        BOTH(test_registered_buffers),
        BOTH(test_shutdown_with_queued_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
