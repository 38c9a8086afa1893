/*
 * store_internal.h - the tensor store's parts: the stripe layout and space
 * allocator (store_layout.c), the manifest codec (store_manifest.c), the
 * file-system helpers (store_fs.c), and the store itself: its core
 * (store.c), commits and scrubs (store_commit.c), opening and closing
 * (store_open.c). The buffer pool (store_pool.c) stands alone.
 *
 * The parts call each other in one direction only (a file uses the files
 * left of it, never one to its right), so each can be read and tested with
 * what is below it:
 *
 *     store_layout.c, store_manifest.c, store_fs.c  ->  store.c
 *         ->  store_commit.c  ->  store_open.c
 *
 * store_dirs.c (the directory list; removing, moving and reverting a closed
 * store) uses only store_fs.c.
 *
 * store_open.c creates a store's first manifest with store_commit.c's
 * encoder and installer; nothing calls into store_open.c but the public API.
 */
#ifndef STRATA_STORE_INTERNAL_H
#define STRATA_STORE_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "strata/store.h"

#define STORE_ALIGN 4096u
#define STORE_META_MAX (1u << 20)
#define STORE_WEIGHT_SCALE 32        /* integer stripe weights are in [1, 32] */
#define STORE_FILE_PREFIX "strata-store."   /* every file of a store starts so (store_remove) */
#define STORE_MANIFEST_NAME "strata-store.manifest"
#define STORE_MANIFEST_TMP "strata-store.manifest.tmp"
#define STORE_MANIFEST_PREV "strata-store.manifest.prev"   /* the commit before the last, until the next write */
#define STORE_DATA_NAME "strata-store.data"
#define STORE_ID_NAME "strata-store.id"
#define STORE_LOCK_NAME "strata-store.lock"
#define STORE_NO_EXTENT UINT64_MAX

/* ---- striping ---------------------------------------------------------------
 * Chunk i of every tensor goes to path pattern[i % period]; it is that path's
 * (i / period) * weight[p] + rank[i % period]-th chunk of the tensor, so a
 * tensor's chunks on one path are contiguous on disk. */
typedef struct store_layout {
    int n_paths;
    uint64_t chunk_bytes;
    uint32_t weight[STORE_MAX_PATHS];
    uint32_t period;
    uint8_t pattern[STORE_MAX_PATHS * STORE_WEIGHT_SCALE];
    uint32_t rank[STORE_MAX_PATHS * STORE_WEIGHT_SCALE];
} store_layout;

/* Integer weights in [1, STORE_WEIGHT_SCALE] proportional to w (or all 1). */
void layout_weights_from_doubles(int n, const double *w, uint32_t *out);
st_status layout_init(store_layout *l, int n_paths, const uint32_t *weights, uint64_t chunk_bytes, st_error *err);
static inline int layout_chunk_path(const store_layout *l, uint64_t i) { return l->pattern[i % l->period]; }
static inline uint64_t layout_chunk_rank(const store_layout *l, uint64_t i) {
    return i / l->period * l->weight[l->pattern[i % l->period]] + l->rank[i % l->period];
}
/* Bytes one version (slot) of a tensor of `bytes` takes on each path. */
void layout_slot_lengths(const store_layout *l, uint64_t bytes, uint64_t *slot_len);
static inline uint32_t layout_chunk_count(const store_layout *l, uint64_t bytes) {
    return (uint32_t)((bytes + l->chunk_bytes - 1) / l->chunk_bytes);
}

/* ---- disk space per path: first fit over a sorted list of used extents ---- */
typedef struct store_extent {
    uint64_t off, len;
} store_extent;
typedef struct store_space {
    store_extent *used;
    int n, cap;
} store_space;
/* Offset of a free range of len bytes (first fit, else the end). */
st_status space_alloc(store_space *sp, uint64_t len, uint64_t *off, st_error *err);
/* Marks [off, off+len) used; fails if it overlaps (a corrupt manifest). */
st_status space_claim(store_space *sp, uint64_t off, uint64_t len, st_error *err);
void space_release(store_space *sp, uint64_t off, uint64_t len);
uint64_t space_end(const store_space *sp);
void space_free_all(store_space *sp);

/* ---- manifest ----------------------------------------------------------------- */
typedef struct manifest_tensor {
    store_key key;
    uint64_t bytes;
    uint32_t tier, flags;
    int32_t slot;                           /* committed slot, -1: never written */
    uint32_t n_chunks;
    uint64_t ext_off[STORE_MAX_PATHS];      /* STORE_NO_EXTENT where it has no chunks */
    uint32_t *crc;                          /* n_chunks, when slot >= 0 */
} manifest_tensor;

typedef struct manifest {
    uint64_t store_id, generation, chunk_bytes;
    int n_paths;
    uint32_t weight[STORE_MAX_PATHS];
    unsigned char *meta;
    size_t meta_n;
    int n_tensors;
    manifest_tensor *tensors;
} manifest;

/* Encoded size, padded to STORE_ALIGN. */
size_t manifest_encoded_size(const manifest *m);
/* Writes m into buf (manifest_encoded_size bytes, zero padded). */
void manifest_encode(const manifest *m, unsigned char *buf);
/* Parses and verifies (magic, version, lengths, CRC32C); `file` names the
 * source in errors. On success m owns its arrays: free with manifest_free. */
st_status manifest_decode(const unsigned char *buf, size_t n, const char *file, manifest *m, st_error *err);
void manifest_free(manifest *m);

/* ---- the store's state (store.c, store_commit.c, store_open.c) ---------------------------- */

typedef struct store_tensor {
    store_key key;
    uint64_t bytes;
    uint32_t n_chunks;
    store_tier tier;
    unsigned flags;
    int n_slots;                            /* 2 persistent, 1 volatile, 0 volatile host */
    uint64_t ext_off[STORE_MAX_PATHS];      /* region start per path (STORE_NO_EXTENT: none) */
    uint64_t slot_len[STORE_MAX_PATHS];     /* one version's bytes per path */
    uint32_t *crc[2];                       /* per slot, per chunk */
    int committed_slot;                     /* -1: no committed version */
    int current_slot;                       /* newest version, -1: none */
    int has_data;
    int dirty;
    int write_failed;
    int reads_inflight, write_inflight;
    int in_manifest;                        /* the committed manifest lists it */
    void *host;                             /* host tier memory */
} store_tensor;

struct store {
    char *dirs[STORE_MAX_PATHS];
    int n_paths;
    io_engine *engine;
    int own_engine;
    int path_id[STORE_MAX_PATHS];           /* engine path per store path */
    io_file *data[STORE_MAX_PATHS];
    uint64_t reserved[STORE_MAX_PATHS];     /* data file bytes reserved on disk */
    store_space space[STORE_MAX_PATHS];
    store_layout layout;
    uint64_t ssd_budget, host_budget, ssd_used, host_used;
    int lock_fd;
    int read_only;                          /* store_config.read_only */

    pthread_mutex_t mu;
    pthread_cond_t changed;                 /* ops finished, or a commit ended */
    store_tensor **list;                    /* creation order */
    int n_tensors, cap_tensors;
    store_tensor **hash;                    /* open addressing, power-of-two size */
    int hash_cap;
    store_tensor **grave;                   /* deleted, still in the committed manifest */
    int n_grave, cap_grave;
    long ops_inflight, writes_inflight;
    int committing;
    int keeps_previous;                     /* STORE_MANIFEST_PREV is there and its slots intact */
    int path_dirty[STORE_MAX_PATHS];
    int broken;
    st_error broken_err;
    uint64_t generation, store_id;
    unsigned char *meta;
    size_t meta_n;

    atomic_int verify;
    _Atomic uint64_t bytes_read[STORE_KIND_COUNT][STORE_MAX_PATHS];
    _Atomic uint64_t bytes_written[STORE_KIND_COUNT][STORE_MAX_PATHS];
    _Atomic uint64_t commits, checksum_failures;
};

/* ---- chunk geometry ---------------------------------------------------------------- */

static inline uint64_t tensor_chunk_len(const store *s, const store_tensor *t, uint64_t i) {
    uint64_t off = i * s->layout.chunk_bytes;
    return t->bytes - off < s->layout.chunk_bytes ? t->bytes - off : s->layout.chunk_bytes;
}

static inline uint64_t tensor_chunk_offset(const store *s, const store_tensor *t, int slot, uint64_t i) {
    int p = layout_chunk_path(&s->layout, i);
    return t->ext_off[p] + (uint64_t)slot * t->slot_len[p] + layout_chunk_rank(&s->layout, i) * s->layout.chunk_bytes;
}

/* store_fs.c */
/* dir/name into out (cap bytes; store paths are checked to fit at open). */
void store_path_join(char *out, size_t cap, const char *dir, const char *name);
/* A small file (a manifest, a path marker) read whole into a malloc'd buffer. */
st_status store_read_whole_file(const char *name, unsigned char **out, size_t *n, st_error *err);
/* Runs a batch of requests on the store's engine and waits for them. */
st_status store_run_batch(store *s, io_request *reqs, size_t n, st_error *err);

/* store.c */
store_tensor *tensor_find(const store *s, store_key k);
st_status store_table_add(store *s, store_tensor *t, st_error *err);
uint64_t tensor_disk_bytes(const store *s, const store_tensor *t);
void store_release_extents(store *s, store_tensor *t);
store_tensor *tensor_new(store *s, store_key key, uint64_t bytes, store_tier tier, unsigned flags);
void tensor_free(store_tensor *t);
void counter_add(_Atomic uint64_t *c, uint64_t n);
st_status store_chunk_mismatch(store *s, const store_tensor *t, int slot, uint64_t i, uint32_t got, st_error *err);
/* Tensor bookkeeping when an op's last chunk finished (an io_ticket hook). */
void store_on_op_finished(io_ticket *ticket, void *arg);
st_status store_usable(store *s, st_error *err);
/* ST_EINVAL naming `what` when the store was opened read-only. */
st_status store_writable(const store *s, const char *what, st_error *err);
/* Queues one request per chunk of the tensor's slot (whole tensor). */
st_status store_submit_chunks(store *s, store_tensor *t, int slot, io_op opk, char *buf, store_op *op, st_error *err);
void store_op_init(store_op *op, store *s, store_tensor *t, void *buf, int write);
/* Starts writing buf as t's new version; called with s->mu held, which is
 * released while checksums are computed and retaken before returning. */
st_status store_start_write(store *s, store_tensor *t, const void *buf, store_op *op, st_error *err);

/* store_commit.c */
/* Encodes the manifest of the current state (s->mu held): a buffer of
 * *size bytes, aligned and padded for O_DIRECT. */
st_status store_encode_manifest(store *s, uint64_t generation, unsigned char **out, size_t *size, st_error *err);
/* STORE_MANIFEST_TMP written, synced and renamed over STORE_MANIFEST_NAME in
 * the first path; on failure the old manifest is untouched and no temporary
 * is left. The caller syncs the directory. Called without s->mu. */
st_status store_install_manifest(store *s, const unsigned char *buf, size_t size, st_error *err);

#endif
