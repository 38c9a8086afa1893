/*
 * strata/io.h - the asynchronous I/O engine: moves large aligned buffers to
 * and from files on one or more storage paths (one directory per drive).
 *
 * An engine owns one background thread (io_uring) or a pool of threads
 * (psync, the fallback) that keep up to `queue_depth` transfers in flight
 * per path. Callers hand it requests in batches; each batch completes a
 * caller-owned ticket, which can be polled or waited on. Large requests are
 * cut into chunks (1 MiB by default); short transfers are continued and
 * EINTR/EAGAIN retried inside the engine, so a caller sees either all its
 * bytes moved or an error that names the file and offset.
 *
 *     io_engine *eng;
 *     io_engine_config cfg = io_engine_default_config();   // io_uring if it works
 *     int path;
 *     io_file *f;
 *     if (io_engine_create(&cfg, &eng, &err) ||
 *         io_engine_add_path(eng, "/nvme0/strata", NULL, &path, &err) ||
 *         io_file_open(eng, path, "weights.bin", IO_FILE_CREATE, &f, &err)) return fail(&err);
 *     void *buf = st_alloc_io(64 << 20);
 *     io_ticket t;
 *     io_ticket_init(&t);
 *     io_request rq = {.op = IO_OP_WRITE, .file = f, .buf = buf, .len = 64 << 20, .offset = 0};
 *     if (io_submit(eng, &rq, 1, &t, &err)) return fail(&err);
 *     ... compute while the bytes move ...
 *     if (io_ticket_wait(&t, &err)) return fail(&err);   // "write /nvme0/strata/weights.bin at offset ..."
 *
 * Direct I/O. Files are opened with O_DIRECT unless their path was added as
 * buffered, so buffers, offsets and lengths must be multiples of the path's
 * alignment (io_path_alignment, 4096 on common file systems); io_submit
 * rejects misaligned requests up front with a message saying which value is
 * off. st_alloc_aligned(4096, n) buffers are fine; st_alloc_io(n) ones move
 * faster (fewer, larger requests: strata/base.h says why).
 *
 * Ordering. Requests on one path start in the order submitted (FIFO) and run
 * concurrently up to the queue depth; nothing orders two writes to the same
 * bytes, so do not submit overlapping writes at once. An IO_OP_SYNC request
 * (fdatasync of its file) is a barrier on its path: it starts after every
 * request submitted before it on that path has finished, and requests
 * submitted after it wait for it.
 *
 * Threads. All functions are safe to call from any thread, except that an
 * io_file must not be closed, nor the engine destroyed, while requests on
 * them are still running (wait for their tickets first). on_done and
 * on_complete callbacks run on an engine thread: keep them short, and do
 * not submit or wait from them.
 *
 * Faults. io_engine_set_fault makes the engine fail or shorten chosen
 * operations, to test what callers do with errors; see io_fault.
 *
 * Measuring. io_bench times sequential writes, reads and both at once on
 * a set of directories (strata iobench, strata probe).
 */
#ifndef STRATA_IO_H
#define STRATA_IO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct io_engine io_engine;
typedef struct io_file io_file;

typedef enum io_engine_kind {
    IO_ENGINE_AUTO = 0,   /* io_uring when the kernel allows it, else psync */
    IO_ENGINE_URING,      /* io_uring or fail */
    IO_ENGINE_PSYNC,      /* a thread pool calling pread/pwrite */
} io_engine_kind;

typedef struct io_engine_config {
    io_engine_kind kind;
    uint64_t chunk_bytes;   /* largest single transfer; default 1 MiB, a multiple of 4096 */
    int queue_depth;        /* transfers in flight per path (default 8, at most 256) */
    int register_buffers;   /* io_uring: use fixed buffers for memory given to
                               io_engine_register_buffer (default 1) */
} io_engine_config;

io_engine_config io_engine_default_config(void);
const char *io_engine_kind_name(io_engine_kind k);
/* Parses "auto", "uring" or "psync". */
st_status io_engine_kind_parse(const char *s, io_engine_kind *out, st_error *err);

/* Starts the engine's threads. With IO_ENGINE_AUTO a failure to set up
 * io_uring (old kernel, seccomp, io_uring_disabled) silently selects psync;
 * io_engine_describe says which and why. */
st_status io_engine_create(const io_engine_config *cfg, io_engine **out, st_error *err);
/* Fails requests that have not started (ST_EINTR), waits for running ones,
 * stops the threads and frees the engine. Closes no files. NULL is a no-op. */
void io_engine_destroy(io_engine *e);

typedef struct io_engine_info {
    io_engine_kind kind;           /* URING or PSYNC: what actually runs */
    int registered_buffers;        /* fixed buffers are in use */
    uint64_t chunk_bytes;
    int queue_depth;
    char fallback_reason[160];     /* why AUTO chose psync, else "" */
} io_engine_info;
void io_engine_describe(const io_engine *e, io_engine_info *out);

/* ---- paths ---------------------------------------------------------------
 * A path is a directory, normally one per drive; each has its own queue, so
 * several drives are kept busy at once. */
typedef struct io_path_options {
    int queue_depth;   /* 0: the engine's */
    int buffered;      /* 1: open files without O_DIRECT (for file systems such
                          as tmpfs that lack it; slower and uses page cache) */
} io_path_options;

/* Registers dir (which must exist) and returns its index in *path_id (0, 1, ...).
 * Adding a directory already added with the same options returns its
 * existing index: one queue per directory, however many users it has. */
st_status io_engine_add_path(io_engine *e, const char *dir, const io_path_options *opt, int *path_id,
                             st_error *err);
int io_engine_path_count(const io_engine *e);
const char *io_path_dir(const io_engine *e, int path_id);
/* Required alignment of buffers, offsets and lengths on this path (1 when buffered). */
uint32_t io_path_alignment(const io_engine *e, int path_id);

/* ---- files ---------------------------------------------------------------- */
enum {
    IO_FILE_CREATE = 1,     /* create when missing */
    IO_FILE_EXCL = 2,       /* with CREATE: fail with ST_EEXIST when it exists */
    IO_FILE_TRUNCATE = 4,
    IO_FILE_READ_ONLY = 8,
};
/* Opens name (relative to the path's directory, or absolute) for I/O on path_id. */
st_status io_file_open(io_engine *e, int path_id, const char *name, unsigned flags, io_file **out, st_error *err);
void io_file_close(io_file *f);   /* NULL is a no-op */
const char *io_file_name(const io_file *f);   /* full path, for messages */
int io_file_path_id(const io_file *f);
int io_file_fd(const io_file *f);
st_status io_file_size(const io_file *f, uint64_t *out, st_error *err);
/* Reserves disk blocks for [0, bytes) (fallocate), so that running out of
 * space shows up here as ST_ENOSPC rather than in the middle of a write.
 * Never shrinks the file. */
st_status io_file_reserve(io_file *f, uint64_t bytes, st_error *err);

/* ---- requests and tickets ------------------------------------------------- */
typedef enum io_op { IO_OP_READ, IO_OP_WRITE, IO_OP_SYNC } io_op;

typedef struct io_request {
    io_op op;
    io_file *file;
    void *buf;          /* READ/WRITE; aligned like offset and len */
    uint64_t len;
    uint64_t offset;
    /* Optional: called on an engine thread once all of this request's bytes
     * have moved, before its ticket completes (the tensor store checks
     * checksums here). A non-OK return fails the ticket with that error. */
    st_status (*on_done)(void *ctx, uint64_t tag, st_error *err);
    void *ctx;
    uint64_t tag;
} io_request;

/* A ticket tracks one io_submit batch. The caller owns it, initializes it
 * with io_ticket_init, and keeps it alive until it is done. After it is done
 * it may be initialized again for another batch. */
typedef struct io_ticket {
    /* Optional, set after io_ticket_init: called once on an engine thread when
     * the last request finishes, before waiters wake. */
    void (*on_complete)(struct io_ticket *t, void *arg);
    void *on_complete_arg;
    /* Owned by the engine. */
    io_engine *engine;
    long unfinished;          /* requests not finished, under the engine lock */
    atomic_int complete;
    st_status status;         /* first failure, ST_OK if none */
    st_error error;
} io_ticket;

void io_ticket_init(io_ticket *t);
/* 1 when every request of the batch has finished (successfully or not). */
int io_ticket_done(io_ticket *t);
/* Blocks until done; returns the first failure (copied to err) or ST_OK. */
st_status io_ticket_wait(io_ticket *t, st_error *err);

/* Queues n requests as one batch completing t (n may be 0). Validates every
 * request first (alignment, file, op) and queues none if any is bad. A
 * failed request stops issuing its remaining chunks; the other requests of
 * the batch still run. */
st_status io_submit(io_engine *e, const io_request *reqs, size_t n, io_ticket *t, st_error *err);

/* Convenience: submit one request and wait for it. */
st_status io_run(io_engine *e, const io_request *req, st_error *err);

/* ---- registered buffers --------------------------------------------------
 * Memory registered here is pinned once, instead of on every transfer, and
 * transfers into it use io_uring's fixed-buffer operations. A no-op (ST_OK)
 * on psync or when register_buffers is off or the kernel refuses. Unregister
 * only when no request uses the memory. */
st_status io_engine_register_buffer(io_engine *e, void *base, size_t len, st_error *err);
void io_engine_unregister_buffer(io_engine *e, void *base);

/* ---- counters ------------------------------------------------------------- */
typedef struct io_path_counters {
    uint64_t bytes_read, bytes_written;
    uint64_t reads, writes, syncs;    /* operations that completed */
    uint64_t errors;                  /* failed operations */
    uint64_t short_transfers;         /* continued after moving part of their bytes */
    uint64_t retries;                 /* EINTR/EAGAIN resubmissions */
    /* Seconds with at least one read (write) transfer in flight, and with both
     * at once: bytes over them are the rates the path moved at while busy. */
    double read_busy_s, write_busy_s, both_busy_s;
} io_path_counters;
/* Copies path_id's counters (zeros for a bad id). */
void io_engine_path_counters(const io_engine *e, int path_id, io_path_counters *out);
/* *sum += now - then, field by field: what a path did between two copies. */
void io_path_counters_add_delta(io_path_counters *sum, const io_path_counters *now, const io_path_counters *then);

/* ---- fault injection ------------------------------------------------------
 * Counting starts at io_engine_set_fault. Each chunk transfer or sync whose
 * kind is in `ops` counts as one operation; the fail_at-th such operation
 * and the (fail_count - 1) after it complete with fail_errno without
 * touching the disk (fail_count 0: every one from fail_at on, a dead disk).
 * Every short_every-th counted transfer is issued for only part of its bytes,
 * so that the engine's continuation of short transfers runs for real. */
enum { IO_FAULT_READ = 1, IO_FAULT_WRITE = 2, IO_FAULT_SYNC = 4 };
typedef struct io_fault {
    unsigned ops;
    uint64_t fail_at;        /* 1-based; 0: no failures */
    uint64_t fail_count;
    int fail_errno;          /* EIO when 0 */
    uint64_t short_every;    /* 0: none */
} io_fault;
/* Arms f (copied) or, with NULL, disarms. */
void io_engine_set_fault(io_engine *e, const io_fault *f);
/* How many failures and short transfers have been injected since arming. */
void io_engine_fault_stats(const io_engine *e, uint64_t *failed, uint64_t *shortened);

/* ---- preflight -------------------------------------------------------------
 * Checks, before a long job starts, that each directory exists, is writable,
 * supports O_DIRECT, and has the free space the job needs. Directories on the
 * same file system share its free space, so their needs are added up. */
typedef struct io_preflight_path {
    const char *dir;
    uint64_t need_bytes;       /* free space the job will use there */
    /* Filled in: */
    int direct_ok;             /* O_DIRECT works */
    uint32_t alignment;        /* O_DIRECT alignment (4096 when unknown) */
    uint64_t free_bytes;       /* available to this user */
} io_preflight_path;

/* Returns ST_OK when every path passes. When a path lacks O_DIRECT and
 * allow_buffered is 0 it fails (ST_EUNSUPPORTED, naming the path and the
 * remedy); with allow_buffered it passes and writes a warning into warning
 * (may be NULL). A missing directory is ST_ENOENT, an unwritable one ST_EIO,
 * too little space ST_ENOSPC with the shortfall in the message. */
st_status io_preflight(io_preflight_path *paths, int n, int allow_buffered, char *warning, size_t warning_cap,
                       st_error *err);

/* ---- bandwidth measurement -------------------------------------------------
 * Sequential transfers of a test file in each directory, every directory at
 * once, the way fio measures a drive: what `strata iobench` prints and what
 * `strata probe` records for the simulator. Passes, in this order: write the
 * whole file (then fdatasync, not timed); read it back; cycle: the file in
 * phases, each read then overwritten in place (what the optimizer's phased
 * streams do); mixed: read its first half while writing its second half,
 * requests alternating so that both directions are in flight together
 * (what an optimizer streaming its state interleaved sees). Preflight
 * first; the file is removed afterwards unless keep.
 *
 *     io_bench_config c = io_bench_default_config();
 *     c.dirs = dirs; c.n_dirs = 2; c.size = 256 << 20;
 *     io_bench_result r;
 *     if (io_bench(&c, &r, &err)) ...
 *     double read_gbps = c.size / r.read_s[0] / 1e9;
 */
#define IO_BENCH_MAX_PATHS 16
typedef struct io_bench_config {
    const char *const *dirs;   /* one per drive */
    int n_dirs;
    const char *file_name;     /* test file in each directory (a plain name) */
    uint64_t size;             /* bytes per directory, a multiple of 4096 */
    uint64_t block;            /* transfer size, a multiple of 4096 */
    int queue_depth;           /* transfers in flight per directory */
    io_engine_kind kind;
    int register_buffers;
    int allow_buffered;        /* a directory without O_DIRECT: buffered, with a warning (else an error) */
    int write, read, mixed;    /* which passes run; read alone needs the file from an earlier run */
    int keep;                  /* leave the test files behind */
    int steady;                /* as the store's steady state sees the drive: an untimed write pass first, so
                                  that the timed one overwrites written blocks, and no sync before the read
                                  pass (the executor rewrites its state in place and reads it back with no
                                  sync between commits); 0: fio's way, a fresh file made durable first */
    uint64_t cycle_phase;      /* > 0: the cycle pass, after the read pass: the file in phases of this many
                                  bytes (a multiple of block), each read and then overwritten, as the
                                  optimizer streams its state through the store; needs write (the file) */
    int cycle_warm;            /* untimed cycles before the timed one (1: the timed cycle reads what the
                                  cycle before wrote, as every step after the first does) */
    long cycle_idle_us;        /* the drive left idle before each phase, 0 to 10 s (not timed): on a
                                  virtual disk, phases after idle time move faster than back to back */
} io_bench_config;

/* file "strata-iobench.dat", 1 GiB, 1 MiB blocks, queue depth 8, io_uring
 * when available, registered buffers, write and read passes. */
io_bench_config io_bench_default_config(void);

typedef struct io_bench_result {
    double write_s[IO_BENCH_MAX_PATHS];        /* per directory: its share of the pass */
    double read_s[IO_BENCH_MAX_PATHS];
    double mixed_read_s[IO_BENCH_MAX_PATHS];   /* until the mixed pass's last read / write finished */
    double mixed_write_s[IO_BENCH_MAX_PATHS];
    uint64_t mixed_read_bytes, mixed_write_bytes;   /* per directory */
    double cycle_read_s[IO_BENCH_MAX_PATHS];   /* the timed cycle: the sum of its read phases / write phases */
    double cycle_write_s[IO_BENCH_MAX_PATHS];
    double cycle_read_total_s, cycle_write_total_s;   /* every directory together */
    double cycle_cpu_s;        /* the process's CPU time (user and system) during the timed cycle: the engine's
                                  threads and the kernel's work done in them */
    double cycle_machine_cpu_s;   /* every processor's busy time during a cycle (/proc/stat; -1: unknown), the
                                     mean over the cycles, warm ones included: also the kernel's work
                                     outside the process, and whatever else ran */
    double write_total_s, read_total_s, mixed_total_s;   /* every directory together */
    io_engine_info engine;
    char warning[512];         /* from the preflight (buffered paths), or "" */
} io_bench_result;

/* A missing test file in a read-only run is ST_ENOENT, a short one ST_EINVAL. */
st_status io_bench(const io_bench_config *cfg, io_bench_result *out, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
