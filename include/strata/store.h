/*
 * strata/store.h - the tensor store: named tensors of training state on host
 * memory or striped over one or more SSD paths, moved asynchronously,
 * checksummed, and committed atomically.
 *
 * A tensor is named by a key (kind, block, index): the fp32 master weights
 * of block 3 are {STORE_MASTER, 3, 0}; the activation checkpoint of block 3
 * for micro-batch 5 is {STORE_ACTIVATIONS, 3, 5}. Its bytes are cut into
 * chunks (1 MiB by default); chunk i goes to a path chosen by a weighted
 * round robin, so each path gets a share of every tensor in proportion to
 * its bandwidth weight, and every chunk carries a CRC32C that is checked
 * when it is read back.
 *
 *     store *s;
 *     store_config cfg = store_default_config();
 *     const char *dirs[] = {"/nvme0/run", "/nvme1/run"};
 *     cfg.paths = dirs; cfg.n_paths = 2; cfg.mode = STORE_OPEN_OR_CREATE;
 *     if (store_open(&cfg, &s, NULL, 0, &err)) return fail(&err);
 *     store_key k = {STORE_MASTER, 3, 0};
 *     if (!store_has_tensor(s, k) && store_create_tensor(s, k, bytes, STORE_TIER_SSD, 0, &err)) ...
 *     void *buf = store_pool_acquire(pool);           // blocks while the pool is exhausted
 *     store_op op;
 *     store_read_async(s, k, buf, store_pool_buffer_bytes(pool), &op, &err);
 *     ... compute something else ...
 *     if (store_op_wait(&op, &err)) ...                // "checksum mismatch in master[3] at offset ..."
 *     ... update buf ...
 *     store_write_async(s, k, buf, cap, &op, &err);  store_op_wait(&op, &err);
 *     store_pool_release(pool, buf);
 *     store_commit(s, &err);                           // the step is durable, atomically
 *
 * Crash safety. Writing a tensor never touches the bytes of its committed
 * version: each persistent tensor has two slots on disk, and writes go to
 * the one not holding the committed version. store_commit waits for the
 * writes, makes them durable (fdatasync), writes a new manifest to a
 * temporary file, syncs it, renames it over the old one and syncs the
 * directory. A store reopened after a crash at any moment shows exactly the
 * state of its last completed commit. Volatile tensors (STORE_VOLATILE:
 * gradients, activation checkpoints) are not part of commits and are gone
 * after a reopen. docs/STORE.md has the layout and the argument.
 *
 * Rules. A tensor may have one write, or any number of reads, in flight;
 * anything else is refused with ST_EINVAL. Buffers for reads and writes must
 * be 4096-aligned and hold store_padded_bytes(size) bytes: the tail of the
 * last chunk is padded for O_DIRECT, and a read may overwrite the padding.
 * Every op that store_*_async accepted must be waited for with
 * store_op_wait before its buffer is reused. Host-tier tensors changed in
 * place (store_host_data) must not be changed while a commit runs.
 *
 * Threads. All functions may be called from any thread; one store_op is
 * used by one thread at a time. The store takes one lock for bookkeeping;
 * checksums are computed outside it (writes: by the caller, at submit;
 * reads: by the I/O engine's thread, as each chunk arrives).
 */
#ifndef STRATA_STORE_H
#define STRATA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"
#include "strata/io.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STORE_MAX_PATHS 16

typedef enum store_kind {
    STORE_WEIGHTS = 0,     /* compute weights (bf16) */
    STORE_MASTER,          /* fp32 master weights */
    STORE_ADAM_M,          /* Adam first moment */
    STORE_ADAM_V,          /* Adam second moment */
    STORE_GRADS,           /* gradients or gradient accumulators */
    STORE_ACTIVATIONS,     /* activation checkpoints, index = micro-batch */
    STORE_OTHER,           /* anything else */
    STORE_MANIFEST,        /* counters only: the store's own metadata writes */
    STORE_KIND_COUNT
} store_kind;
const char *store_kind_name(store_kind k);   /* "weights", "master", "adam_m", ... */

typedef struct store_key {
    store_kind kind;
    int32_t block;         /* transformer block, or -1 for tensors outside blocks */
    int32_t index;         /* micro-batch for activations, else 0 (or a part number) */
} store_key;
/* "master[3]", "activations[3,5]" into buf; returns buf. */
const char *store_key_name(store_key k, char *buf, size_t n);

typedef enum store_tier {
    STORE_TIER_SSD = 0,    /* lives on the paths; moved through caller buffers */
    STORE_TIER_HOST,       /* lives in host memory owned by the store (host budget);
                              persistent host tensors are written to SSD at commit */
} store_tier;

enum {
    STORE_VOLATILE = 1,    /* not committed, not crash-safe: one slot, gone on reopen */
};

typedef enum store_open_mode {
    STORE_OPEN_EXISTING = 0,
    STORE_CREATE,          /* fails with ST_EEXIST when a store is there */
    STORE_OPEN_OR_CREATE,
} store_open_mode;

typedef struct store_config {
    const char *const *paths;   /* directories, one per drive; paths[0] holds the manifest */
    int n_paths;
    store_open_mode mode;
    /* Creation only (an existing store keeps what it was created with): */
    const double *weights;      /* relative bandwidth per path; NULL: equal, or measured */
    int measure_bandwidth;      /* with weights NULL: time a probe write+read per path */
    uint64_t measure_bytes;     /* probe size per path (default 64 MiB) */
    uint64_t chunk_bytes;       /* stripe and checksum unit, multiple of 4096 (default 1 MiB) */
    /* Every open: */
    uint64_t ssd_budget_bytes;  /* cap on disk space for tensors (both slots); 0: none */
    uint64_t host_budget_bytes; /* cap on host-tier tensor memory; 0: no host tier */
    uint64_t reserve_bytes;     /* free space preflight demands, over all paths (by weight) */
    int skip_checksums;         /* 1: do not verify CRCs on read (they are still written) */
    int allow_buffered;         /* 1: paths without O_DIRECT use buffered I/O (warning) */
    int read_only;              /* 1: inspect an existing store (mode must be STORE_OPEN_EXISTING):
                                   nothing on the paths is created, written or removed (no preflight
                                   probe file, no cleanup of a crashed commit's temporary manifest),
                                   the data files are opened read-only, the lock is shared (a
                                   process with the store open for work still excludes it: ST_EEXIST),
                                   persistent host-tier tensors are read from their committed slot
                                   on disk (reported as STORE_TIER_SSD, no host budget needed), and
                                   creating, deleting, writing, marking dirty and committing fail
                                   with ST_EINVAL. For checks: store_scrub_each, store_locate. */
    int previous;               /* 1 (read_only only): open the commit before the last, which
                                   store_commit keeps until the store next writes (ST_ENOENT when
                                   it is gone): what store_revert_commit would go back to */
    io_engine *engine;          /* shared engine (must outlive the store; the store adds
                                   its paths to it), or NULL: the store makes its own from `io` */
    io_engine_config io;
} store_config;

store_config store_default_config(void);

typedef struct store store;

/* Opens or creates a store. Runs the preflight on every path, takes an
 * exclusive lock (a second process gets ST_EEXIST), checks that the paths
 * are the store's in its order, reads and verifies the manifest, and loads
 * persistent host-tier tensors. warning (may be NULL) receives preflight
 * warnings, such as buffered I/O on a path without O_DIRECT. */
st_status store_open(const store_config *cfg, store **out, char *warning, size_t warning_cap, st_error *err);
/* Waits for running ops, then closes. Uncommitted changes are dropped: the
 * next open shows the last commit. NULL is a no-op. */
void store_close(store *s);

/* ---- tensors ---------------------------------------------------------------
 * Creation and deletion take effect in memory at once and on disk at the
 * next commit. Space is reserved on disk at creation (fallocate), so a full
 * file system or an exhausted budget shows up here as ST_ENOSPC. */
st_status store_create_tensor(store *s, store_key key, uint64_t bytes, store_tier tier, unsigned flags,
                              st_error *err);
st_status store_delete_tensor(store *s, store_key key, st_error *err);
int store_has_tensor(store *s, store_key key);

typedef struct store_tensor_info {
    store_key key;
    uint64_t bytes;
    uint64_t padded_bytes;      /* buffer size reads and writes need */
    store_tier tier;
    unsigned flags;
    int has_data;               /* written at least once (or committed) */
    int dirty;                  /* written since the last commit */
    uint32_t chunks;
} store_tensor_info;
st_status store_tensor_info_of(store *s, store_key key, store_tensor_info *out, st_error *err);
/* Tensors in creation order, for listing: index in [0, store_tensor_count). */
int store_tensor_count(store *s);
st_status store_tensor_info_at(store *s, int i, store_tensor_info *out, st_error *err);

uint64_t store_padded_bytes(uint64_t bytes);   /* rounded up to 4096 */

/* ---- asynchronous reads and writes ------------------------------------------ */
typedef struct store_op {
    io_ticket ticket;
    /* Private. */
    struct store *store;
    struct store_tensor *tensor;
    char *buf;
    int write, slot, immediate;
    st_status status;
    st_error error;
} store_op;

/* Reads the newest version of the tensor (its uncommitted write, if any,
 * else its committed version) into buf. */
st_status store_read_async(store *s, store_key key, void *buf, uint64_t buf_bytes, store_op *op, st_error *err);
/* Writes buf as the tensor's new version, into the slot that does not hold
 * the committed version. Its checksums are computed before this returns. */
st_status store_write_async(store *s, store_key key, const void *buf, uint64_t buf_bytes, store_op *op,
                            st_error *err);
/* 1 when the op has finished (store_op_wait then returns at once). */
int store_op_done(store_op *op);
/* Waits; returns the first error: an I/O error naming file and offset, or a
 * checksum mismatch (ST_ECORRUPT) naming tensor, tensor offset, path and file
 * offset. */
st_status store_op_wait(store_op *op, st_error *err);
/* Blocking conveniences. */
st_status store_read(store *s, store_key key, void *buf, uint64_t buf_bytes, st_error *err);
st_status store_write(store *s, store_key key, const void *buf, uint64_t buf_bytes, st_error *err);

/* Host tier: the tensor's memory, to use in place; call store_mark_dirty
 * after changing it so that the next commit saves it. NULL for SSD tensors. */
void *store_host_data(store *s, store_key key);
st_status store_mark_dirty(store *s, store_key key, st_error *err);

/* ---- commits ------------------------------------------------------------- */
/* Makes the current state durable and the state a reopen shows. Waits for
 * writes in flight. Fails without changing the committed state when a write
 * since the last commit failed (write the tensor again first) or when any
 * step of the commit fails; the store then still holds the uncommitted
 * changes and the commit may be retried. */
st_status store_commit(store *s, st_error *err);
/* Number of completed commits over the store's life (0: fresh store). */
uint64_t store_generation(store *s);
/* Bytes committed with the next commit and returned after a reopen: for the
 * trainer's step, random state and data position. At most 1 MiB. */
st_status store_set_user_meta(store *s, const void *data, size_t n, st_error *err);
const void *store_user_meta(store *s, size_t *n);

/* Reads every committed tensor and checks every chunk's checksum (also when
 * skip_checksums is set). *bad_chunks counts mismatches; the error names
 * the first. */
st_status store_scrub(store *s, uint64_t *bad_chunks, st_error *err);
/* One bad chunk of a committed tensor, as store_scrub_each reports it. */
typedef struct store_bad_chunk {
    store_key key;
    uint32_t chunk, n_chunks;   /* chunk index within the tensor, of n_chunks */
    uint64_t tensor_offset;     /* chunk * chunk_bytes */
    uint64_t len;               /* the chunk's real bytes (the last may be short) */
    int path;                   /* store path index */
    const char *file;           /* that path's data file (valid during the callback) */
    uint64_t file_offset;       /* where the chunk starts in it */
    st_status status;           /* ST_ECORRUPT: checksum mismatch; else the read failed (I/O) */
    uint32_t crc_stored, crc_read;  /* ST_ECORRUPT: what the manifest says, what the disk holds */
    const char *message;        /* the whole story in one line (valid during the callback) */
} store_bad_chunk;

typedef struct store_scrub_result {
    uint64_t tensors;           /* committed tensors read */
    uint64_t chunks;            /* their chunks */
    uint64_t bytes;             /* their real bytes */
    uint64_t bad_chunks;        /* checksum mismatches */
    uint64_t unreadable_chunks; /* chunks whose read failed */
    uint64_t damaged_tensors;   /* tensors with at least one bad or unreadable chunk */
} store_scrub_result;

typedef void (*store_bad_chunk_fn)(void *ctx, const store_bad_chunk *bad);

/* store_scrub, reporting every bad chunk: reads every committed tensor
 * (creation order) and calls bad(ctx, ...) on the calling thread for each
 * chunk whose checksum does not match or whose read failed, in tensor
 * order then chunk order (bad may be NULL). Keeps going after a bad chunk
 * or a failed read. Returns ST_OK when everything matched; otherwise the
 * first problem's status (ST_ECORRUPT for a mismatch) with err naming it.
 * *result (may be NULL) receives the counts. Uncommitted versions and
 * volatile tensors are not read. */
st_status store_scrub_each(store *s, store_bad_chunk_fn bad, void *ctx, store_scrub_result *result, st_error *err);
/* Turns read-side checksum checks on or off (off: faster, unprotected). */
void store_set_verify(store *s, int on);

/* Where byte `offset` of the tensor's newest version lies on disk. */
st_status store_locate(store *s, store_key key, uint64_t offset, int *path, char *file, size_t file_cap,
                       uint64_t *file_offset, st_error *err);

/* ---- counters ---------------------------------------------------------------
 * Bytes moved to and from the SSDs by kind and by path (as transferred, so
 * padding counts: this is what wears the drive). Host-tier copies in memory
 * are not counted. */
typedef struct store_counters {
    uint64_t bytes_read[STORE_KIND_COUNT][STORE_MAX_PATHS];
    uint64_t bytes_written[STORE_KIND_COUNT][STORE_MAX_PATHS];
    uint64_t commits;
    uint64_t checksum_failures;
    int n_paths;
    io_path_counters io[STORE_MAX_PATHS];   /* each path's I/O engine queue: its bytes and busy times */
} store_counters;
void store_get_counters(store *s, store_counters *out);
uint64_t store_counters_written(const store_counters *c);   /* all kinds, all paths */
uint64_t store_counters_read(const store_counters *c);

typedef struct store_info {
    int n_paths;
    double weights[STORE_MAX_PATHS];     /* stripe share per path, summing to 1 */
    uint64_t chunk_bytes;
    uint64_t ssd_bytes_used;             /* disk space held by tensors */
    uint64_t host_bytes_used;
    uint64_t generation;
    uint64_t store_id;
} store_info;
void store_get_info(store *s, store_info *out);

/* Days until a drive rated for rated_bytes_written (its TBW) wears out when
 * bytes_per_step are written every step_seconds. */
double store_endurance_days(double bytes_per_step, double step_seconds, double rated_bytes_written);

/* ---- buffer pool ------------------------------------------------------------
 * A fixed set of 4096-aligned host buffers of one size, allocated once
 * within a byte budget (count = budget / buffer size) and never grown:
 * memory stays inside the budget, and callers that want more wait.
 * Registered with the engine (when given) for io_uring fixed buffers.
 * Thread-safe. */
typedef struct store_pool store_pool;
st_status store_pool_create(uint64_t budget_bytes, uint64_t buffer_bytes, io_engine *engine, store_pool **out,
                            st_error *err);
/* All buffers must have been released. NULL is a no-op. */
void store_pool_destroy(store_pool *p);
void *store_pool_acquire(store_pool *p);              /* waits for a free buffer */
void *store_pool_try_acquire(store_pool *p);          /* NULL when all are in use */
/* Waits at most `seconds`; NULL on timeout. */
void *store_pool_acquire_timeout(store_pool *p, double seconds);
void store_pool_release(store_pool *p, void *buf);
uint64_t store_pool_buffer_bytes(const store_pool *p);
int store_pool_count(const store_pool *p);
int store_pool_in_use(store_pool *p);
/* Bytes the pool allocated (at most its budget). */
uint64_t store_pool_allocated_bytes(const store_pool *p);

/* ---- directories ------------------------------------------------------------
 * The one spelling of a store's directories on a command line or in a
 * run's record: a comma-separated list, one directory per drive. */
typedef struct store_dirs {
    char list[4200];                      /* the list, cut at its commas into paths */
    const char *paths[STORE_MAX_PATHS];
    int n;
} store_dirs;
/* ST_EINVAL for an empty list ("no directory given"), one too long, or more
 * than STORE_MAX_PATHS directories. */
st_status store_dirs_parse(const char *list, store_dirs *out, st_error *err);
/* The same directories in the same order, after resolving links and "." (st_same_paths). */
int store_dirs_same(const store_dirs *a, const store_dirs *b);
/* Rank `rank` of a job of `ranks` (data parallel: each rank keeps its share
 * of the state in a store of its own): in each directory "%r" becomes the
 * rank's number, and one without it gets "/rank-R" appended, so that
 * "/nvme0/run" gives /nvme0/run/rank-0, /nvme0/run/rank-1, ... On one rank
 * the same directories. out may be in. */
st_status store_dirs_of_rank(const store_dirs *in, int rank, int ranks, store_dirs *out, st_error *err);
/* Removes a store's files (strata-store.*) from each directory, creating
 * the directories that are missing; other files are left alone. The store
 * must not be open. */
st_status store_remove(const store_dirs *d, st_error *err);
/* Moves a store's files (strata-store.*) from each directory of from into
 * the directory of to at the same index (creating it; same file system:
 * a rename), so that a store can be set aside and put back. The store must
 * not be open; from and to have as many directories. */
st_status store_move(const store_dirs *from, const store_dirs *to, st_error *err);
/* store_open of the existing store in d, read-only (store_config.read_only;
 * previous: the commit before the last, store_config.previous): how checks
 * and readers of a committed state open it. */
st_status store_open_read_only(const store_dirs *d, int previous, store **out, st_error *err);
/* Undoes the store's last commit: the commit before it, which store_commit
 * keeps until the store next writes, becomes the last again (a rename over
 * the manifest, the directory synced). For a job of several ranks whose
 * crash let only some of them complete a commit: those go back, and every
 * rank's last commit is of one step again. ST_ENOENT when the store keeps
 * no commit before the last; the store is then untouched. The store must
 * not be open. */
st_status store_revert_commit(const store_dirs *d, st_error *err);
/* Disk space the store's files in d hold (allocated blocks: a store
 * reserves its space when tensors are created). */
uint64_t store_dirs_disk_bytes(const store_dirs *d);
/* Whether a store was made in d: a manifest, or a data file that holds
 * bytes, in any of the directories. A creation cut short before its first
 * manifest leaves only markers and empty files: no store. A store that
 * will not open although this is 1 is damaged, not absent. */
int store_dirs_hold_store(const store_dirs *d);

#ifdef __cplusplus
}
#endif
#endif
