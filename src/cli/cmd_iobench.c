/* cmd_iobench.c - `strata iobench`: sequential O_DIRECT write and read
 * bandwidth of the I/O engine, per storage path and combined. The measuring
 * is io_bench's (strata/io.h), shared with `strata probe`. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/io.h"

typedef struct iobench_opts {
    const char *path, *engine, *rw, *file;
    uint64_t size, block, cycle;
    long cycle_idle;
    long qd;
    int keep, no_register, buffered, steady;
} iobench_opts;

#define O(field) offsetof(iobench_opts, field)
static const cli_flag iobench_flags[] = {
    CLI_STRING("path", O(path), "DIR[,DIR...]", "directories to test, one per drive (required)"),
    CLI_SIZE("size", O(size), "BYTES", "bytes per directory (default 1G; K, M, G suffixes)"),
    CLI_SIZE("block", O(block), "BYTES", "transfer size (default 1M, a multiple of 4096)"),
    CLI_INT("qd", O(qd), 1, 256, "N", "transfers in flight per directory (default 8)"),
    CLI_STRING("engine", O(engine), "E", "auto (default: io_uring if available), uring, psync"),
    CLI_STRING("rw", O(rw), "MODE", "write, read (of an existing file), or both (default)"),
    CLI_ON("keep", O(keep), "keep the test files (for fio on the same files)"),
    CLI_ON("steady", O(steady), "the timed write overwrites a written file, the read follows it\n"
                                "with no sync (the store rewrites its state in place)"),
    CLI_SIZE("cycle", O(cycle), "BYTES", "also cycle through the file in phases of BYTES, each read and then\n"
                                         "overwritten (the optimizer's phased streams: strata probe's way\n"
                                         "uses 18M), an untimed cycle first; needs --rw write or both"),
    CLI_INT("cycle-idle", O(cycle_idle), 0, 10000, "MS", "leave the drive idle MS milliseconds before each phase (as a\n"
                                                         "run's compute does; default 0: back to back)"),
    CLI_ON("no-register", O(no_register), "do not register buffers with io_uring"),
    CLI_ON("buffered", O(buffered), "allow buffered I/O where O_DIRECT is unsupported"),
    CLI_STRING("file", O(file), "NAME", "test file name in each directory (default strata-iobench.dat)"),
};

static const cli_spec iobench_spec = {
    .command = "iobench",
    .usage = "usage: strata iobench --path DIR[,DIR...] [--size BYTES] [--block BYTES] [--qd N]\n"
             "                      [--engine auto|uring|psync] [--rw write|read|both] [--keep]\n"
             "                      [--steady] [--cycle BYTES] [--cycle-idle MS]\n"
             "                      [--no-register] [--buffered] [--file NAME]",
    .about = "Writes, then reads back, a file of --size bytes in each directory with\n"
             "sequential --block transfers, --qd in flight per directory, all directories\n"
             "at once, and reports GB/s (10^9 bytes/s) per directory and combined.",
    .flags = iobench_flags,
    .n_flags = CLI_COUNT(iobench_flags),
};

static void print_row(const char *name, double wbytes, double wsec, double rbytes, double rsec, int w, int r) {
    char wcol[32] = "-", rcol[32] = "-";
    if (w) snprintf(wcol, sizeof wcol, "%.3f", wbytes / wsec / 1e9);
    if (r) snprintf(rcol, sizeof rcol, "%.3f", rbytes / rsec / 1e9);
    printf("%-40s %12s %12s\n", name, wcol, rcol);
}

int cmd_iobench(int argc, char **argv) {
    iobench_opts o = {.engine = "auto", .rw = "both", .file = "strata-iobench.dat", .size = 1ull << 30,
                      .block = 1u << 20, .qd = 8};
    cli_parsed flags;
    int parsed = cli_parse_flags(&iobench_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *paths_arg = o.path, *rw = o.rw, *fname = o.file;
    const uint64_t size = o.size, block = o.block;
    st_error err = {0};
    if (!paths_arg) return cli_usage_error("iobench", "--path is required");
    io_engine_kind kind;
    if (io_engine_kind_parse(o.engine, &kind, &err) != ST_OK) return cli_usage_error("iobench", "%s", err.msg);
    int do_write = !strcmp(rw, "write") || !strcmp(rw, "both");
    int do_read = !strcmp(rw, "read") || !strcmp(rw, "both");
    if (!do_write && !do_read) return cli_usage_error("iobench", "--rw must be write, read or both, not '%s'", rw);
    if (block == 0 || block % 4096 || block > (1ull << 30))
        return cli_usage_error("iobench", "--block must be a multiple of 4096 and at most 1G");
    if (size == 0 || size % 4096) return cli_usage_error("iobench", "--size must be a positive multiple of 4096");
    if (o.cycle_idle && !o.cycle) return cli_usage_error("iobench", "--cycle-idle needs --cycle");
    if (o.cycle && (!do_write || o.cycle % 4096))
        return cli_usage_error("iobench", "--cycle needs --rw write or both, and a multiple of 4096");
    if (strchr(fname, '/')) return cli_usage_error("iobench", "--file must be a plain name, not a path");

    store_dirs dirs;
    if (store_dirs_parse(paths_arg, &dirs, &err) != ST_OK) return cli_usage_error("iobench", "--path: %s", err.msg);
    if (dirs.n > IO_BENCH_MAX_PATHS) return cli_usage_error("iobench", "--path: at most %d directories", IO_BENCH_MAX_PATHS);

    io_bench_config bc = io_bench_default_config();
    bc.dirs = dirs.paths;
    bc.n_dirs = dirs.n;
    bc.file_name = fname;
    bc.size = size;
    bc.block = block;
    bc.queue_depth = (int)o.qd;
    bc.kind = kind;
    bc.register_buffers = !o.no_register;
    bc.allow_buffered = o.buffered;
    bc.write = do_write;
    bc.read = do_read;
    bc.keep = o.keep;
    bc.steady = o.steady;
    bc.cycle_phase = o.cycle;
    bc.cycle_warm = 1;
    bc.cycle_idle_us = o.cycle_idle * 1000;
    const int n = dirs.n;
    io_bench_result r;
    st_status s = io_bench(&bc, &r, &err);
    if (r.warning[0]) fprintf(stderr, "strata: warning: %s\n", r.warning);
    if (s != ST_OK) {
        if (!do_write && (s == ST_ENOENT || s == ST_EINVAL) && strstr(err.msg, fname))
            return cli_error("%s: run with --rw write or both first%s", err.msg, s == ST_ENOENT ? " (and --keep)" : "");
        return cli_fail(&err);
    }
    char sz[32], bl[32];
    printf("engine %s%s, block %s, qd %ld per path, %s per path, %d path%s\n", io_engine_kind_name(r.engine.kind),
           r.engine.registered_buffers ? " (registered buffers)" : "", st_format_bytes((double)block, bl, sizeof bl), o.qd,
           st_format_bytes((double)size, sz, sizeof sz), n, n == 1 ? "" : "s");
    if (r.engine.fallback_reason[0]) printf("io_uring unavailable, using psync: %s\n", r.engine.fallback_reason);
    printf("%-40s %12s %12s\n", "path", "write GB/s", "read GB/s");
    for (int p = 0; p < n; p++) print_row(dirs.paths[p], (double)size, r.write_s[p], (double)size, r.read_s[p], do_write, do_read);
    if (n > 1) print_row("combined", (double)size * n, r.write_total_s, (double)size * n, r.read_total_s, do_write, do_read);
    if (o.cycle) {
        char ph[32];
        printf("cycle: phases of %s, each read then overwritten, %ld ms idle before each (rates: bytes over the "
               "sum of the phases)\n", st_format_bytes((double)o.cycle, ph, sizeof ph), o.cycle_idle);
        for (int p = 0; p < n; p++)
            print_row(dirs.paths[p], (double)size, r.cycle_write_s[p], (double)size, r.cycle_read_s[p], 1, 1);
        if (n > 1)
            print_row("combined", (double)size * n, r.cycle_write_total_s, (double)size * n, r.cycle_read_total_s,
                      1, 1);
    }
    return 0;
}
