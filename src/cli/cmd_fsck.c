/* cmd_fsck.c - `strata fsck PATH[,PATH...]`: checks a tensor store without
 * changing it: opens it read-only (which verifies the manifest, the path
 * markers and every tensor's region against the data files), then reads
 * every committed tensor and checks every chunk's CRC32C, naming each bad
 * chunk: tensor, chunk, tensor offset, path, data file and file offset. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/store.h"

typedef struct fsck_opts {
    int verbose;
} fsck_opts;

static const cli_flag fsck_flags[] = {
    {.name = "verbose", .short_name = 'v', .type = CLI_TYPE_ON, .offset = offsetof(fsck_opts, verbose),
     .help = "also list every committed tensor and where each chunk lies\n(path, data file, file offset)"},
};

static const cli_spec fsck_spec = {
    .command = "fsck",
    .usage = "usage: strata fsck PATH[,PATH...] [--verbose]",
    .about = "Verifies a tensor store: its manifest (checksum, lengths, every tensor's\n"
             "region inside the data files), then every chunk of every committed tensor\n"
             "against its CRC32C. Prints each damaged tensor with the chunk index, tensor\n"
             "offset, path, data file and file offset of each bad chunk, then\n"
             "\"N tensors, M chunks checked, K damaged\".\n"
             "\n"
             "PATH is the store's directories in the order the run gave them (--store;\n"
             "the first holds the manifest), or a run directory whose store is in\n"
             "RUN_DIR/store (the default of 'strata train'). A run of several ranks\n"
             "(mpirun) has a store per rank below those directories: each is checked.\n"
             "\n"
             "The store is opened read-only: nothing is created, written or removed, and\n"
             "a store that a running process (a training run) has open is not touched:\n"
             "fsck says it is in use and exits 1.\n"
             "\n"
             "Only committed tensors are checked: a training run commits its store when it\n"
             "creates it (the initial weights and optimizer state); commits during a run\n"
             "come with resumable training. Volatile state (gradients, activation\n"
             "checkpoints) and versions written since the last commit are not part of\n"
             "the committed state and are not read.",
    .epilogue = "Exit status: 0 clean; 1 damaged or unreadable (bad manifest, truncated\n"
                "file, I/O error, store in use or missing); 2 bad usage.",
    .flags = fsck_flags,
    .n_flags = CLI_COUNT(fsck_flags),
    .one_arg = "PATH[,PATH...]",
};

typedef struct fsck_ctx {
    store_key last;
    int have_last;
    uint64_t printed;
} fsck_ctx;

static int same_key(store_key a, store_key b) { return a.kind == b.kind && a.block == b.block && a.index == b.index; }

static void on_bad(void *arg, const store_bad_chunk *b) {
    fsck_ctx *c = arg;
    char name[96];
    store_key_name(b->key, name, sizeof name);
    if (!c->have_last || !same_key(c->last, b->key)) printf("damaged tensor %s (%u chunks)\n", name, b->n_chunks);
    c->last = b->key;
    c->have_last = 1;
    c->printed++;
    if (b->status == ST_ECORRUPT)
        printf("  chunk %u: tensor offset %llu, %llu bytes: path %d %s offset %llu: checksum mismatch (crc %08x on disk, "
               "%08x in the manifest)\n",
               b->chunk, (unsigned long long)b->tensor_offset, (unsigned long long)b->len, b->path, b->file,
               (unsigned long long)b->file_offset, b->crc_read, b->crc_stored);
    else
        printf("  chunk %u: tensor offset %llu, %llu bytes: path %d %s offset %llu: unreadable (%s)\n", b->chunk,
               (unsigned long long)b->tensor_offset, (unsigned long long)b->len, b->path, b->file,
               (unsigned long long)b->file_offset, b->message);
    fflush(stdout);
}

/* --verbose: every tensor of the committed state and its chunks' places. */
static int list_tensors(store *s) {
    store_info info;
    store_get_info(s, &info);
    st_error err = {0};
    int n = store_tensor_count(s);
    for (int i = 0; i < n; i++) {
        store_tensor_info ti;
        if (store_tensor_info_at(s, i, &ti, &err) != ST_OK) return cli_fail(&err);
        char name[96];
        store_key_name(ti.key, name, sizeof name);
        if (!ti.has_data) {
            printf("tensor %s: %llu bytes, %u chunks, never committed (not checked)\n", name,
                   (unsigned long long)ti.bytes, ti.chunks);
            continue;
        }
        printf("tensor %s: %llu bytes, %u chunks\n", name, (unsigned long long)ti.bytes, ti.chunks);
        for (uint32_t k = 0; k < ti.chunks; k++) {
            uint64_t off = (uint64_t)k * info.chunk_bytes, foff = 0;
            uint64_t len = ti.bytes - off < info.chunk_bytes ? ti.bytes - off : info.chunk_bytes;
            int path = 0;
            char file[PATH_MAX];
            if (store_locate(s, ti.key, off, &path, file, sizeof file, &foff, &err) != ST_OK) return cli_fail(&err);
            printf("  chunk %u: tensor offset %llu, %llu bytes: path %d %s offset %llu\n", k, (unsigned long long)off,
                   (unsigned long long)len, path, file, (unsigned long long)foff);
        }
    }
    return 0;
}

/* Checks the one store in dirs; returns the exit code. */
static int fsck_store(const store_dirs *dirs, int verbose) {
    st_error err = {0};
    store *s = NULL;
    st_status st = store_open_read_only(dirs, 0, &s, &err);
    if (st != ST_OK) {
        const char *what = st == ST_EIO      ? "I/O error"
                           : st == ST_EEXIST ? "not checked"
                           : st != ST_ECORRUPT ? "cannot open the store"
                           : strstr(err.msg, "beyond the end") ? "the store is damaged (truncated data file)"
                           : strstr(err.msg, "manifest")       ? "the store is damaged (bad manifest)"
                                                               : "the store is damaged";
        return cli_error("fsck: %s: %s", what, err.msg);
    }
    store_info info;
    store_get_info(s, &info);
    printf("store %s: %d path%s, generation %llu, chunks of %llu bytes, %d tensors in the manifest\n", dirs->paths[0],
           info.n_paths, info.n_paths == 1 ? "" : "s", (unsigned long long)info.generation,
           (unsigned long long)info.chunk_bytes, store_tensor_count(s));
    fflush(stdout);
    if (verbose && list_tensors(s) != 0) {
        store_close(s);
        return 1;
    }

    fsck_ctx ctx = {0};
    store_scrub_result r = {0};
    st = store_scrub_each(s, on_bad, &ctx, &r, &err);
    store_close(s);
    uint64_t damaged = r.bad_chunks + r.unreadable_chunks;
    printf("%llu tensors, %llu chunks checked, %llu damaged", (unsigned long long)r.tensors, (unsigned long long)r.chunks,
           (unsigned long long)damaged);
    if (damaged)
        printf(" (in %llu tensor%s%s)", (unsigned long long)r.damaged_tensors, r.damaged_tensors == 1 ? "" : "s",
               r.unreadable_chunks ? ", some unreadable" : "");
    printf("\n");
    fflush(stdout);
    int rc = 0;
    if (st != ST_OK && damaged)
        rc = cli_error("fsck: the store in %s is damaged: %llu bad chunk%s in %llu tensor%s; the first: %s", dirs->paths[0],
                       (unsigned long long)damaged, damaged == 1 ? "" : "s", (unsigned long long)r.damaged_tensors,
                       r.damaged_tensors == 1 ? "" : "s", err.msg);
    else if (st != ST_OK)
        rc = cli_error("fsck: %s: %s", st == ST_EIO ? "I/O error" : "checking the store failed", err.msg);
    return rc;
}

int cmd_fsck(int argc, char **argv) {
    fsck_opts o = {0};
    cli_parsed flags;
    int parsed = cli_parse_flags(&fsck_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *arg = flags.n_args ? flags.args[0] : NULL;
    if (!arg || !arg[0]) return cli_usage_error("fsck", "give the store's directories, or a run directory");

    store_dirs dirs;
    st_error err = {0};
    st_status ds = cli_store_dirs(arg, &dirs, &err);
    if (ds != ST_OK) return ds == ST_ENOENT ? cli_error("fsck: %s", err.msg) : cli_usage_error("fsck", "%s", err.msg);
    /* a run of several ranks: each rank's store in turn (each its last commit) */
    const int ranks = cli_store_ranks(&dirs);
    int rc = 0;
    for (int r = 0; r < ranks; r++) {
        store_dirs d;
        if (store_dirs_of_rank(&dirs, r, ranks, &d, &err) != ST_OK) return cli_fail(&err);
        if (ranks > 1) printf("rank %d of %d:\n", r, ranks);
        const int rr = fsck_store(&d, o.verbose);
        if (!rc) rc = rr;
    }
    return rc;
}
