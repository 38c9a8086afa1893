/* io_bench.c - sequential bandwidth of the I/O engine on storage paths
 * (strata/io.h, io_bench): the measuring loop behind `strata iobench` and
 * `strata probe`, in one place so that both report the same thing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "strata/io.h"

typedef struct bench_path {
    io_file *file;
    char *buf;                  /* qd blocks for reads, qd for writes (the mixed pass runs both) */
    size_t buf_bytes;
    io_ticket ticket;
    double t_start, t_done, t_read_done, t_write_done;
} bench_path;

typedef struct bench {
    const io_bench_config *cfg;
    io_engine *eng;
    bench_path bp[IO_BENCH_MAX_PATHS];
    pthread_mutex_t lock;       /* completion times written from engine threads */
} bench;

io_bench_config io_bench_default_config(void) {
    return (io_bench_config){.file_name = "strata-iobench.dat", .size = 1ull << 30, .block = 1u << 20,
                             .queue_depth = 8, .kind = IO_ENGINE_AUTO, .register_buffers = 1, .write = 1, .read = 1};
}

static void mark_done(io_ticket *t, void *arg) {
    (void)t;
    ((bench_path *)arg)->t_done = st_now();
}

/* Per request of the mixed pass: the last read and the last write to finish
 * on a path end that direction's time. tag: path * 2 + (1 for a write). */
static st_status mark_request(void *ctx, uint64_t tag, st_error *err) {
    (void)err;
    bench *b = ctx;
    double now = st_now();
    bench_path *p = &b->bp[tag / 2];
    pthread_mutex_lock(&b->lock);
    double *t = tag % 2 ? &p->t_write_done : &p->t_read_done;
    if (now > *t) *t = now;
    pthread_mutex_unlock(&b->lock);
    return ST_OK;
}

typedef enum pass_kind { PASS_WRITE, PASS_READ, PASS_MIXED } pass_kind;

/* One pass over bytes [lo, hi) of every path's file, all paths at once;
 * *seconds: until the last path finished. The mixed pass reads the first
 * half of the file while writing the second, requests alternating so that
 * both are in flight (it ignores lo and hi). */
static st_status run_pass(bench *b, pass_kind kind, uint64_t lo, uint64_t hi, double *seconds, st_error *err) {
    const io_bench_config *c = b->cfg;
    const uint64_t size = c->size, block = c->block, qd = (uint64_t)c->queue_depth;
    const uint64_t half = size / 2 / 4096 * 4096;
    uint64_t nreq = (size + block - 1) / block + 2;   /* the mixed pass's halves may each end in a partial block */
    io_request *reqs = calloc(nreq, sizeof *reqs);
    if (!reqs) return st_fail(err, ST_ENOMEM, "iobench: allocating %llu requests", (unsigned long long)nreq);
    double t0 = st_now();
    st_status s = ST_OK;
    int submitted = 0;
    for (int p = 0; p < c->n_dirs && s == ST_OK; p++) {
        bench_path *bp = &b->bp[p];
        size_t n = 0;
        if (kind != PASS_MIXED) {
            for (uint64_t off = lo, i = 0; off < hi; off += block, i++)
                /* qd buffers per path, reused in turn, as fio does */
                reqs[n++] = (io_request){.op = kind == PASS_WRITE ? IO_OP_WRITE : IO_OP_READ, .file = bp->file,
                                         .buf = bp->buf + (i % qd) * block,
                                         .len = hi - off < block ? hi - off : block, .offset = off};
        } else {
            uint64_t r = 0, w = half, i = 0;
            while (r < half || w < size) {
                for (int dir = 0; dir < 2; dir++) {
                    uint64_t *off = dir ? &w : &r, end = dir ? size : half;
                    if (*off >= end) continue;
                    uint64_t len = end - *off < block ? end - *off : block;
                    reqs[n++] = (io_request){.op = dir ? IO_OP_WRITE : IO_OP_READ, .file = bp->file,
                                             .buf = bp->buf + ((uint64_t)dir * qd + i % qd) * block, .len = len,
                                             .offset = *off, .on_done = mark_request, .ctx = b,
                                             .tag = (uint64_t)p * 2 + (uint64_t)dir};
                    *off += len;
                }
                i++;
            }
        }
        io_ticket_init(&bp->ticket);
        bp->ticket.on_complete = mark_done;
        bp->ticket.on_complete_arg = bp;
        bp->t_start = st_now();
        bp->t_read_done = bp->t_write_done = bp->t_start;
        s = io_submit(b->eng, reqs, n, &bp->ticket, err);
        if (s == ST_OK) submitted++;
    }
    for (int p = 0; p < submitted; p++) {
        st_error e2 = {0};
        st_status s2 = io_ticket_wait(&b->bp[p].ticket, &e2);
        if (s2 != ST_OK && s == ST_OK) {
            s = s2;
            if (err) *err = e2;
        }
    }
    *seconds = st_now() - t0;
    free(reqs);
    return s;
}

static st_status open_files(bench *b, io_preflight_path *pre, st_error *err) {
    const io_bench_config *c = b->cfg;
    for (int p = 0; p < c->n_dirs; p++) {
        bench_path *bp = &b->bp[p];
        int id;
        io_path_options opt = {.buffered = !pre[p].direct_ok};
        st_status s = io_engine_add_path(b->eng, c->dirs[p], &opt, &id, err);
        if (s != ST_OK) return s;
        const int writes = c->write || c->mixed;
        s = io_file_open(b->eng, id, c->file_name, writes ? IO_FILE_CREATE : IO_FILE_READ_ONLY, &bp->file, err);
        if (s == ST_ENOENT && !writes) return st_fail(err, ST_ENOENT, "%s/%s does not exist", c->dirs[p], c->file_name);
        if (s != ST_OK) return s;
        uint64_t have = 0;
        if ((s = io_file_size(bp->file, &have, err)) != ST_OK) return s;
        if (!c->write && have < c->size)
            return st_fail(err, ST_EINVAL, "%s holds %llu bytes, fewer than the %llu to read", io_file_name(bp->file),
                           (unsigned long long)have, (unsigned long long)c->size);
        if (c->write && (s = io_file_reserve(bp->file, c->size, err)) != ST_OK) return s;
        bp->buf_bytes = (size_t)(c->block * (uint64_t)c->queue_depth * 2);
        if (!(bp->buf = st_alloc_io(bp->buf_bytes)))
            return st_fail(err, ST_ENOMEM, "iobench: out of memory for %d buffers of %llu bytes", 2 * c->queue_depth,
                           (unsigned long long)c->block);
        /* Incompressible bytes, in case the device compresses or deduplicates. */
        st_rng r;
        st_rng_seed(&r, 1234 + (uint64_t)p);
        uint64_t *w = (uint64_t *)bp->buf;
        for (size_t k = 0; k < bp->buf_bytes / 8; k++) w[k] = st_rng_next(&r);
        if ((s = io_engine_register_buffer(b->eng, bp->buf, bp->buf_bytes, err)) != ST_OK) return s;
    }
    return ST_OK;
}

/* CPU seconds (user and system) this process has used so far. */
static double process_cpu_s(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* CPU seconds every processor of the machine has been busy so far (user,
 * system, interrupts; not idle or waiting on I/O), from /proc/stat; -1 when
 * it cannot be read. Moving bytes costs the kernel work outside this
 * process's own time too: completions in interrupts, on whichever core. */
static double machine_cpu_s(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long user, nice, sys, idle, iowait, irq, softirq, steal = 0;
    const int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iowait, &irq,
                         &softirq, &steal);
    fclose(f);
    const long hz = sysconf(_SC_CLK_TCK);
    if (n < 7 || hz <= 0) return -1;
    return (double)(user + nice + sys + irq + softirq + steal) / (double)hz;
}

/* The cycle pass: the file in phases of cycle_phase bytes, each read and
 * then written back over itself, phase after phase, the way the optimizer
 * streams its state through the store every step (a group of segments
 * read, stepped, written back in place, waited for). The first cycle_warm
 * cycles are not timed, so that the timed one reads blocks that the cycle
 * before overwrote, as every step after the first does. cycle_idle_us
 * leaves the drive idle before each phase, as a run's compute does (not
 * timed). Each direction's
 * time is the sum of its phases: bytes over it is the rate a run of such
 * phases moves at, which is what an iteration's time depends on (a median
 * of per-phase rates is not: they spread 4x on a virtual disk, and the
 * slow phases take most of the time). */
static st_status run_cycles(bench *b, io_bench_result *out, st_error *err) {
    const io_bench_config *c = b->cfg;
    double machine_sum = 0;
    int machine_ok = 1;
    for (int k = 0; k <= c->cycle_warm; k++) {
        const int timed = k == c->cycle_warm;
        const double cpu0 = process_cpu_s(), machine0 = machine_cpu_s();
        for (uint64_t lo = 0; lo < c->size; lo += c->cycle_phase) {
            const uint64_t hi = c->size - lo < c->cycle_phase ? c->size : lo + c->cycle_phase;
            if (c->cycle_idle_us > 0) usleep((useconds_t)c->cycle_idle_us);
            for (int dir = 0; dir < 2; dir++) {
                double sec;
                st_status s = run_pass(b, dir ? PASS_WRITE : PASS_READ, lo, hi, &sec, err);
                if (s != ST_OK) return s;
                if (!timed) continue;
                for (int p = 0; p < c->n_dirs; p++) {
                    double *t = dir ? &out->cycle_write_s[p] : &out->cycle_read_s[p];
                    *t += b->bp[p].t_done - b->bp[p].t_start;
                }
                *(dir ? &out->cycle_write_total_s : &out->cycle_read_total_s) += sec;
            }
        }
        /* the machine's: the mean over the cycles, warm ones too (the same bytes), since /proc/stat counts
           in ticks and the probe's 256 MiB cycle lasts a few dozen of them */
        const double machine1 = machine_cpu_s();
        if (machine0 < 0 || machine1 < machine0) machine_ok = 0;
        else machine_sum += machine1 - machine0;
        if (timed) {
            out->cycle_cpu_s = process_cpu_s() - cpu0;
            out->cycle_machine_cpu_s = machine_ok ? machine_sum / (double)(k + 1) : -1;
        }
    }
    return ST_OK;
}

static st_status run_passes(bench *b, io_bench_result *out, st_error *err) {
    const io_bench_config *c = b->cfg;
    st_status s;
    if (c->write) {
        if (c->steady && (s = run_pass(b, PASS_WRITE, 0, c->size, &out->write_total_s, err)) != ST_OK) return s;
        if ((s = run_pass(b, PASS_WRITE, 0, c->size, &out->write_total_s, err)) != ST_OK) return s;
        for (int p = 0; p < c->n_dirs; p++) out->write_s[p] = b->bp[p].t_done - b->bp[p].t_start;
        /* Make the written data durable before timing reads (not timed, as fio). */
        for (int p = 0; p < c->n_dirs && !c->steady; p++) {
            io_request sy = {.op = IO_OP_SYNC, .file = b->bp[p].file};
            if ((s = io_run(b->eng, &sy, err)) != ST_OK) return s;
        }
    }
    if (c->read) {
        if ((s = run_pass(b, PASS_READ, 0, c->size, &out->read_total_s, err)) != ST_OK) return s;
        for (int p = 0; p < c->n_dirs; p++) out->read_s[p] = b->bp[p].t_done - b->bp[p].t_start;
    }
    if (c->cycle_phase && (s = run_cycles(b, out, err)) != ST_OK) return s;
    if (c->mixed) {
        if ((s = run_pass(b, PASS_MIXED, 0, c->size, &out->mixed_total_s, err)) != ST_OK) return s;
        for (int p = 0; p < c->n_dirs; p++) {
            out->mixed_read_s[p] = b->bp[p].t_read_done - b->bp[p].t_start;
            out->mixed_write_s[p] = b->bp[p].t_write_done - b->bp[p].t_start;
        }
        out->mixed_read_bytes = c->size / 2 / 4096 * 4096;
        out->mixed_write_bytes = c->size - out->mixed_read_bytes;
        io_request sy;
        for (int p = 0; p < c->n_dirs; p++) {
            sy = (io_request){.op = IO_OP_SYNC, .file = b->bp[p].file};
            if ((s = io_run(b->eng, &sy, err)) != ST_OK) return s;
        }
    }
    return ST_OK;
}

static st_status check_config(const io_bench_config *c, st_error *err) {
    if (c->n_dirs < 1 || c->n_dirs > IO_BENCH_MAX_PATHS)
        return st_fail(err, ST_EINVAL, "iobench: 1 to %d paths, not %d", IO_BENCH_MAX_PATHS, c->n_dirs);
    if (c->block == 0 || c->block % 4096 || c->block > (1ull << 30))
        return st_fail(err, ST_EINVAL, "iobench: the block size must be a multiple of 4096 and at most 1G");
    if (c->size == 0 || c->size % 4096) return st_fail(err, ST_EINVAL, "iobench: the size must be a positive multiple of 4096");
    if (c->queue_depth < 1 || c->queue_depth > 256)
        return st_fail(err, ST_EINVAL, "iobench: queue depth %d out of range [1, 256]", c->queue_depth);
    if (!c->file_name || !c->file_name[0] || strchr(c->file_name, '/'))
        return st_fail(err, ST_EINVAL, "iobench: the test file must be a plain name, not a path");
    if (!c->write && !c->read && !c->mixed && !c->cycle_phase)
        return st_fail(err, ST_EINVAL, "iobench: no pass to run");
    if (c->cycle_phase && (!c->write || c->cycle_phase % 4096 || c->cycle_warm < 0 || c->cycle_idle_us < 0 ||
                            c->cycle_idle_us > 10000000))
        return st_fail(err, ST_EINVAL,
                       "iobench: the cycle pass needs the write pass, phases a multiple of 4096 bytes "
                       "and at most 10 s idle between them");
    if (c->mixed && c->size < 8192) return st_fail(err, ST_EINVAL, "iobench: the mixed pass needs at least 8192 bytes");
    return ST_OK;
}

st_status io_bench(const io_bench_config *c, io_bench_result *out, st_error *err) {
    memset(out, 0, sizeof *out);
    st_status s = check_config(c, err);
    if (s != ST_OK) return s;
    bench b = {.cfg = c};
    pthread_mutex_init(&b.lock, NULL);
    io_preflight_path pre[IO_BENCH_MAX_PATHS];
    memset(pre, 0, sizeof pre);
    for (int p = 0; p < c->n_dirs; p++)
        pre[p] = (io_preflight_path){.dir = c->dirs[p], .need_bytes = c->write || c->mixed ? c->size : 0};
    s = io_preflight(pre, c->n_dirs, c->allow_buffered, out->warning, sizeof out->warning, err);
    if (s == ST_OK) {
        io_engine_config ec = io_engine_default_config();
        ec.kind = c->kind;
        ec.chunk_bytes = c->block;
        ec.queue_depth = c->queue_depth;
        ec.register_buffers = c->register_buffers;
        s = io_engine_create(&ec, &b.eng, err);
    }
    if (s == ST_OK) s = open_files(&b, pre, err);
    if (s == ST_OK) {
        io_engine_describe(b.eng, &out->engine);
        s = run_passes(&b, out, err);
    }
    for (int p = 0; p < c->n_dirs; p++) {
        bench_path *bp = &b.bp[p];
        if (bp->file) {
            char name[4096];
            snprintf(name, sizeof name, "%s", io_file_name(bp->file));
            io_file_close(bp->file);
            if (!c->keep && (c->write || c->mixed)) unlink(name);
        }
        if (b.eng && bp->buf) io_engine_unregister_buffer(b.eng, bp->buf);
    }
    io_engine_destroy(b.eng);
    for (int p = 0; p < c->n_dirs; p++) st_free_aligned(b.bp[p].buf);
    pthread_mutex_destroy(&b.lock);
    return s;
}
