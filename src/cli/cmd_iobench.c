/* cmd_iobench.c - `strata iobench`: sequential O_DIRECT write and read
 * bandwidth of the I/O engine, per storage path and combined. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "strata/io.h"

#define IOBENCH_MAX_PATHS 16

static void usage(FILE *f) {
    fprintf(f,
            "usage: strata iobench --path DIR[,DIR...] [--size BYTES] [--block BYTES] [--qd N]\n"
            "                      [--engine auto|uring|psync] [--rw write|read|both] [--keep]\n"
            "                      [--no-register] [--buffered] [--file NAME]\n"
            "\n"
            "Writes, then reads back, a file of --size bytes in each directory with\n"
            "sequential --block transfers, --qd in flight per directory, all directories\n"
            "at once, and reports GB/s (10^9 bytes/s) per directory and combined.\n"
            "\n"
            "  --path DIR[,DIR...]  directories to test, one per drive (required)\n"
            "  --size BYTES         bytes per directory (default 1G; K, M, G suffixes)\n"
            "  --block BYTES        transfer size (default 1M, a multiple of 4096)\n"
            "  --qd N               transfers in flight per directory (default 8)\n"
            "  --engine E           auto (default: io_uring if available), uring, psync\n"
            "  --rw MODE            write, read (of an existing file), or both (default)\n"
            "  --keep               keep the test files (for fio on the same files)\n"
            "  --no-register        do not register buffers with io_uring\n"
            "  --buffered           allow buffered I/O where O_DIRECT is unsupported\n"
            "  --file NAME          test file name in each directory (default strata-iobench.dat)\n");
}

typedef struct bench_path {
    const char *dir;
    io_file *file;
    char *buf;
    io_ticket ticket;
    double t_start, t_done;
} bench_path;

static void mark_done(io_ticket *t, void *arg) {
    (void)t;
    ((bench_path *)arg)->t_done = st_now();
}

/* One pass: every path's whole file, all paths at once. Returns combined seconds. */
static st_status run_pass(io_engine *eng, bench_path *bp, int n, io_op op, uint64_t size, uint64_t block, int qd,
                          double *seconds, st_error *err) {
    uint64_t nreq = (size + block - 1) / block;
    io_request *reqs = calloc(nreq, sizeof *reqs);
    if (!reqs) return st_fail(err, ST_ENOMEM, "iobench: allocating %llu requests", (unsigned long long)nreq);
    double t0 = st_now();
    st_status s = ST_OK;
    int submitted = 0;
    for (int p = 0; p < n && s == ST_OK; p++) {
        for (uint64_t i = 0; i < nreq; i++) {
            uint64_t off = i * block;
            /* qd buffers per path, reused in turn, as fio does. */
            reqs[i] = (io_request){.op = op, .file = bp[p].file, .buf = bp[p].buf + (i % (uint64_t)qd) * block,
                                   .len = size - off < block ? size - off : block, .offset = off};
        }
        io_ticket_init(&bp[p].ticket);
        bp[p].ticket.on_complete = mark_done;
        bp[p].ticket.on_complete_arg = &bp[p];
        bp[p].t_start = st_now();
        s = io_submit(eng, reqs, nreq, &bp[p].ticket, err);
        if (s == ST_OK) submitted++;
    }
    for (int p = 0; p < submitted; p++) {
        st_error e2 = {0};
        st_status s2 = io_ticket_wait(&bp[p].ticket, &e2);
        if (s2 != ST_OK && s == ST_OK) {
            s = s2;
            if (err) *err = e2;
        }
    }
    *seconds = st_now() - t0;
    free(reqs);
    return s;
}

static void print_row(const char *name, double wbytes, double wsec, double rbytes, double rsec, int w, int r) {
    char wcol[32] = "-", rcol[32] = "-";
    if (w) snprintf(wcol, sizeof wcol, "%.3f", wbytes / wsec / 1e9);
    if (r) snprintf(rcol, sizeof rcol, "%.3f", rbytes / rsec / 1e9);
    printf("%-40s %12s %12s\n", name, wcol, rcol);
}

int cmd_iobench(int argc, char **argv) {
    const char *paths_arg = NULL, *engine_arg = "auto", *rw = "both", *fname = "strata-iobench.dat";
    uint64_t size = 1ull << 30, block = 1u << 20;
    long qd = 8;
    int keep = 0, no_register = 0, buffered = 0;
    st_error err = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--keep")) { keep = 1; continue; }
        if (!strcmp(a, "--no-register")) { no_register = 1; continue; }
        if (!strcmp(a, "--buffered")) { buffered = 1; continue; }
        if (i + 1 >= argc) return cli_usage_error("iobench", "unknown flag or missing value: %s", a);
        const char *v = argv[++i];
        st_status s = ST_OK;
        if (!strcmp(a, "--path")) paths_arg = v;
        else if (!strcmp(a, "--size")) s = cli_parse_size(a, v, &size, &err);
        else if (!strcmp(a, "--block")) s = cli_parse_size(a, v, &block, &err);
        else if (!strcmp(a, "--qd")) s = cli_parse_int(a, v, 1, 256, &qd, &err);
        else if (!strcmp(a, "--engine")) engine_arg = v;
        else if (!strcmp(a, "--rw")) rw = v;
        else if (!strcmp(a, "--file")) fname = v;
        else return cli_usage_error("iobench", "unknown flag: %s", a);
        if (s != ST_OK) return cli_usage_error("iobench", "%s", err.msg);
    }
    if (!paths_arg) return cli_usage_error("iobench", "--path is required");
    io_engine_kind kind;
    if (io_engine_kind_parse(engine_arg, &kind, &err) != ST_OK) return cli_usage_error("iobench", "%s", err.msg);
    int do_write = !strcmp(rw, "write") || !strcmp(rw, "both");
    int do_read = !strcmp(rw, "read") || !strcmp(rw, "both");
    if (!do_write && !do_read) return cli_usage_error("iobench", "--rw must be write, read or both, not '%s'", rw);
    if (block == 0 || block % 4096 || block > (1ull << 30))
        return cli_usage_error("iobench", "--block must be a multiple of 4096 and at most 1G");
    if (size == 0 || size % 4096) return cli_usage_error("iobench", "--size must be a positive multiple of 4096");
    if (strchr(fname, '/')) return cli_usage_error("iobench", "--file must be a plain name, not a path");

    char *plist = strdup(paths_arg);
    bench_path bp[IOBENCH_MAX_PATHS];
    memset(bp, 0, sizeof bp);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(plist, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == IOBENCH_MAX_PATHS) {
            free(plist);
            return cli_usage_error("iobench", "at most %d paths", IOBENCH_MAX_PATHS);
        }
        bp[n++].dir = tok;
    }
    if (n == 0) {
        free(plist);
        return cli_usage_error("iobench", "--path lists no directory");
    }

    int rc = 1;
    io_engine *eng = NULL;
    io_preflight_path pre[IOBENCH_MAX_PATHS];
    memset(pre, 0, sizeof pre);
    for (int p = 0; p < n; p++) pre[p] = (io_preflight_path){.dir = bp[p].dir, .need_bytes = do_write ? size : 0};
    char warning[1024];
    if (io_preflight(pre, n, buffered, warning, sizeof warning, &err) != ST_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    if (warning[0]) fprintf(stderr, "strata: warning: %s\n", warning);

    io_engine_config cfg = io_engine_default_config();
    cfg.kind = kind;
    cfg.chunk_bytes = block;
    cfg.queue_depth = (int)qd;
    cfg.register_buffers = !no_register;
    if (io_engine_create(&cfg, &eng, &err) != ST_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    for (int p = 0; p < n; p++) {
        int id;
        io_path_options opt = {.buffered = !pre[p].direct_ok};
        if (io_engine_add_path(eng, bp[p].dir, &opt, &id, &err) != ST_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        st_status os = io_file_open(eng, id, fname, do_write ? IO_FILE_CREATE : IO_FILE_READ_ONLY, &bp[p].file, &err);
        if (os == ST_ENOENT && !do_write) {
            rc = cli_error("%s/%s does not exist: run with --rw write or both first (and --keep)", bp[p].dir, fname);
            goto out;
        }
        if (os != ST_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        uint64_t have = 0;
        if (io_file_size(bp[p].file, &have, &err) != ST_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        if (!do_write && have < size) {
            rc = cli_error("%s holds %llu bytes, fewer than --size %llu: run with --rw write or both first",
                           io_file_name(bp[p].file), (unsigned long long)have, (unsigned long long)size);
            goto out;
        }
        if (do_write && io_file_reserve(bp[p].file, size, &err) != ST_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        bp[p].buf = st_alloc_aligned(4096, (size_t)(block * (uint64_t)qd));
        if (!bp[p].buf) {
            rc = cli_error("out of memory for %ld buffers of %llu bytes", qd, (unsigned long long)block);
            goto out;
        }
        /* Incompressible bytes, in case the device compresses or deduplicates. */
        st_rng r;
        st_rng_seed(&r, 1234 + (uint64_t)p);
        uint64_t *w = (uint64_t *)bp[p].buf;
        for (size_t k = 0; k < block * (uint64_t)qd / 8; k++) w[k] = st_rng_next(&r);
        if (io_engine_register_buffer(eng, bp[p].buf, (size_t)(block * (uint64_t)qd), &err) != ST_OK) {
            rc = cli_fail(&err);
            goto out;
        }
    }

    io_engine_info info;
    io_engine_describe(eng, &info);
    char sz[32], bl[32];
    printf("engine %s%s, block %s, qd %ld per path, %s per path, %d path%s\n", io_engine_kind_name(info.kind),
           info.registered_buffers ? " (registered buffers)" : "", st_format_bytes((double)block, bl, sizeof bl), qd,
           st_format_bytes((double)size, sz, sizeof sz), n, n == 1 ? "" : "s");
    if (info.fallback_reason[0]) printf("io_uring unavailable, using psync: %s\n", info.fallback_reason);

    double wsec = 0, rsec = 0, wpath[IOBENCH_MAX_PATHS] = {0}, rpath[IOBENCH_MAX_PATHS] = {0};
    if (do_write) {
        if (run_pass(eng, bp, n, IO_OP_WRITE, size, block, (int)qd, &wsec, &err) != ST_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        for (int p = 0; p < n; p++) wpath[p] = bp[p].t_done - bp[p].t_start;
        /* Make the written data durable before timing reads (not timed, as fio). */
        for (int p = 0; p < n; p++) {
            io_request sy = {.op = IO_OP_SYNC, .file = bp[p].file};
            if (io_run(eng, &sy, &err) != ST_OK) {
                rc = cli_fail(&err);
                goto out;
            }
        }
    }
    if (do_read) {
        if (run_pass(eng, bp, n, IO_OP_READ, size, block, (int)qd, &rsec, &err) != ST_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        for (int p = 0; p < n; p++) rpath[p] = bp[p].t_done - bp[p].t_start;
    }
    printf("%-40s %12s %12s\n", "path", "write GB/s", "read GB/s");
    for (int p = 0; p < n; p++) print_row(bp[p].dir, (double)size, wpath[p], (double)size, rpath[p], do_write, do_read);
    if (n > 1) print_row("combined", (double)size * n, wsec, (double)size * n, rsec, do_write, do_read);
    rc = 0;

out:
    for (int p = 0; p < n; p++) {
        if (bp[p].file) {
            char name[4096];
            snprintf(name, sizeof name, "%s", io_file_name(bp[p].file));
            io_file_close(bp[p].file);
            if (!keep && do_write) unlink(name);
        }
    }
    for (int p = 0; p < n; p++) {
        if (eng && bp[p].buf) io_engine_unregister_buffer(eng, bp[p].buf);
    }
    io_engine_destroy(eng);
    for (int p = 0; p < n; p++) st_free_aligned(bp[p].buf);
    free(plist);
    return rc;
}
