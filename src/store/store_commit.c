/* store_commit.c - atomic commits (data sync, manifest to a temporary
 * file, sync, rename, directory sync), user metadata, and scrubbing. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store_internal.h"
#include "strata/checksum.h"
#include "strata/fs.h"

/* ---- commit ------------------------------------------------------------------------------------ */

st_status store_encode_manifest(store *s, uint64_t generation, unsigned char **out, size_t *size, st_error *err) {
    manifest m = {.store_id = s->store_id, .generation = generation, .chunk_bytes = s->layout.chunk_bytes,
                  .n_paths = s->n_paths, .meta = s->meta, .meta_n = s->meta_n};
    memcpy(m.weight, s->layout.weight, sizeof m.weight);
    m.tensors = calloc((size_t)(s->n_tensors ? s->n_tensors : 1), sizeof *m.tensors);
    if (!m.tensors) return st_fail(err, ST_ENOMEM, "commit: out of memory");
    for (int i = 0; i < s->n_tensors; i++) {
        const store_tensor *t = s->list[i];
        if (t->flags & STORE_VOLATILE) continue;
        manifest_tensor *mt = &m.tensors[m.n_tensors++];
        *mt = (manifest_tensor){.key = t->key, .bytes = t->bytes, .tier = t->tier, .flags = t->flags,
                                .slot = t->has_data ? t->current_slot : -1, .n_chunks = t->n_chunks};
        memcpy(mt->ext_off, t->ext_off, sizeof mt->ext_off);
        if (mt->slot >= 0) mt->crc = t->crc[mt->slot];
    }
    *size = manifest_encoded_size(&m);
    *out = st_alloc_aligned(STORE_ALIGN, *size);
    if (*out) manifest_encode(&m, *out);
    free(m.tensors);   /* the crc arrays belong to the tensors */
    if (!*out) return st_fail(err, ST_ENOMEM, "commit: out of memory for a %zu-byte manifest", *size);
    return ST_OK;
}

/* Writes an encoded manifest to the temporary file through the engine
 * (O_DIRECT where the path allows, counted, subject to fault injection),
 * syncs it and renames it over the manifest. On failure the temporary is
 * removed and the old manifest is untouched: nothing committed is lost. The
 * caller syncs the directory, and decides what a failure there means.
 * Without s->mu: the engine's thread needs that lock to finish other ops. */
st_status store_install_manifest(store *s, const unsigned char *buf, size_t size, st_error *err) {
    char tmp[PATH_MAX], final[PATH_MAX];
    store_path_join(tmp, sizeof tmp, s->dirs[0], STORE_MANIFEST_TMP);
    store_path_join(final, sizeof final, s->dirs[0], STORE_MANIFEST_NAME);
    io_file *f = NULL;
    st_status st = io_file_open(s->engine, s->path_id[0], STORE_MANIFEST_TMP, IO_FILE_CREATE | IO_FILE_TRUNCATE, &f, err);
    if (st == ST_OK) {
        io_request reqs[2] = {{.op = IO_OP_WRITE, .file = f, .buf = (void *)buf, .len = size, .offset = 0},
                              {.op = IO_OP_SYNC, .file = f}};
        st = store_run_batch(s, reqs, 2, err);
        io_file_close(f);
    }
    if (st == ST_OK && rename(tmp, final) != 0) st = st_fail_errno(err, errno, "rename %s to %s", tmp, final);
    if (st != ST_OK) unlink(tmp);
    return st;
}

/* Persistent host-tier tensors changed since the last commit go to their
 * shadow slots on disk. Called with s->mu held and committing set. */
static st_status flush_host_tensors(store *s, st_error *err) {
    for (int i = 0; i < s->n_tensors; i++) {
        store_tensor *t = s->list[i];
        if (t->tier != STORE_TIER_HOST || (t->flags & STORE_VOLATILE) || !t->dirty) continue;
        store_op op;
        st_status st = store_start_write(s, t, t->host, &op, err);
        if (st != ST_OK) return st;
        pthread_mutex_unlock(&s->mu);
        st = store_op_wait(&op, err);
        pthread_mutex_lock(&s->mu);
        if (st != ST_OK) return st;
    }
    return ST_OK;
}

/* The manifest about to be replaced stays as STORE_MANIFEST_PREV (a hard
 * link, durable before the rename): a job of several ranks goes back to it
 * when a crash let only some ranks complete this commit (store_revert_commit).
 * Nothing has written to its slots: every write first removes it
 * (store_start_write), and a commit's own writes come after that. A
 * failure leaves the old manifest the store's. */
static st_status keep_previous(store *s, st_error *err) {
    char final[PATH_MAX], prev[PATH_MAX];
    store_path_join(final, sizeof final, s->dirs[0], STORE_MANIFEST_NAME);
    store_path_join(prev, sizeof prev, s->dirs[0], STORE_MANIFEST_PREV);
    if (unlink(prev) != 0 && errno != ENOENT) return st_fail_errno(err, errno, "cannot remove %s", prev);
    if (link(final, prev) != 0) {
        /* a file system without hard links (exFAT, some FUSE mounts): the
         * commit goes on keeping none, and a job of several ranks that needs
         * to go back says the store no longer keeps it */
        if (errno == EPERM || errno == ENOTSUP || errno == EOPNOTSUPP || errno == ENOSYS || errno == EMLINK)
            return ST_OK;
        return st_fail_errno(err, errno, "cannot keep %s as %s", final, prev);
    }
    return st_fsync_dir(s->dirs[0], err);
}

st_status store_commit(store *s, st_error *err) {
    pthread_mutex_lock(&s->mu);
    while (s->committing) pthread_cond_wait(&s->changed, &s->mu);
    st_status st = store_usable(s, err);
    if (st == ST_OK) st = store_writable(s, "commit", err);
    if (st != ST_OK) {
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    s->committing = 1;
    while (s->writes_inflight > 0) pthread_cond_wait(&s->changed, &s->mu);
    for (int i = 0; i < s->n_tensors && st == ST_OK; i++) {
        char name[96];
        if (s->list[i]->write_failed)
            st = st_fail(err, ST_EIO,
                         "commit: the last write of tensor %s failed; write it again, or reopen the store to return to "
                         "generation %llu",
                         store_key_name(s->list[i]->key, name, sizeof name), (unsigned long long)s->generation);
    }
    if (st == ST_OK) st = flush_host_tensors(s, err);

    /* 1. The data: fdatasync every data file written since the last commit. */
    io_request syncs[STORE_MAX_PATHS];
    size_t n_syncs = 0;
    for (int p = 0; p < s->n_paths && st == ST_OK; p++)
        if (s->path_dirty[p]) syncs[n_syncs++] = (io_request){.op = IO_OP_SYNC, .file = s->data[p]};
    pthread_mutex_unlock(&s->mu);
    if (st == ST_OK && n_syncs) {
        st = store_run_batch(s, syncs, n_syncs, err);
        if (st != ST_OK) {
            /* After a failed fdatasync the kernel may have dropped the dirty
             * data and a second fdatasync may succeed anyway, so a retry
             * proves nothing: the tensors must be written again. */
            pthread_mutex_lock(&s->mu);
            for (int i = 0; i < s->n_tensors; i++) {
                store_tensor *t = s->list[i];
                if (!t->dirty || (t->flags & STORE_VOLATILE) || t->tier == STORE_TIER_HOST) continue;
                t->write_failed = 1;
                t->current_slot = t->committed_slot;
                t->has_data = t->committed_slot >= 0;
            }
            pthread_mutex_unlock(&s->mu);
        }
    }
    pthread_mutex_lock(&s->mu);

    /* 2. The manifest: temporary file, synced, renamed over, directory synced.
     * The state cannot change meanwhile: writers wait while committing.
     * (Not st_atomic_open: the manifest goes through the engine, and a
     * failed directory sync after the rename breaks the store.) */
    unsigned char *mbuf = NULL;
    size_t manifest_bytes = 0;
    if (st == ST_OK) st = store_encode_manifest(s, s->generation + 1, &mbuf, &manifest_bytes, err);
    pthread_mutex_unlock(&s->mu);
    if (st == ST_OK) st = keep_previous(s, err);
    if (st == ST_OK) st = store_install_manifest(s, mbuf, manifest_bytes, err);
    st_free_aligned(mbuf);
    if (st == ST_OK && (st = st_fsync_dir(s->dirs[0], err)) != ST_OK) {
        /* The new manifest is in place but maybe not durable: neither
         * version may be overwritten now. Only a reopen is safe. */
        pthread_mutex_lock(&s->mu);
        s->broken = 1;
        st_fail(&s->broken_err, st, "the store needs to be reopened: a commit failed after its rename (%s)", err ? err->msg : "");
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&s->mu);
    if (st == ST_OK) {
        for (int i = 0; i < s->n_tensors; i++) {
            store_tensor *t = s->list[i];
            if (t->flags & STORE_VOLATILE) continue;
            t->committed_slot = t->has_data ? t->current_slot : -1;
            t->dirty = 0;
            t->in_manifest = 1;
        }
        for (int i = 0; i < s->n_grave; i++) {
            store_release_extents(s, s->grave[i]);
            tensor_free(s->grave[i]);
        }
        s->n_grave = 0;
        memset(s->path_dirty, 0, sizeof s->path_dirty);
        s->generation++;
        s->keeps_previous = 1;
        counter_add(&s->bytes_written[STORE_MANIFEST][0], manifest_bytes);
        atomic_fetch_add(&s->commits, 1);
    }
    s->committing = 0;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
    return st;
}

uint64_t store_generation(store *s) {
    pthread_mutex_lock(&s->mu);
    uint64_t g = s->generation;
    pthread_mutex_unlock(&s->mu);
    return g;
}

st_status store_set_user_meta(store *s, const void *data, size_t n, st_error *err) {
    if (n > STORE_META_MAX) return st_fail(err, ST_EINVAL, "user metadata of %zu bytes exceeds the %u-byte limit", n, STORE_META_MAX);
    unsigned char *copy = NULL;
    if (n) {
        copy = malloc(n);
        if (!copy) return st_fail(err, ST_ENOMEM, "user metadata: out of memory");
        memcpy(copy, data, n);
    }
    pthread_mutex_lock(&s->mu);
    while (s->committing) pthread_cond_wait(&s->changed, &s->mu);
    free(s->meta);
    s->meta = copy;
    s->meta_n = n;
    pthread_mutex_unlock(&s->mu);
    return ST_OK;
}

const void *store_user_meta(store *s, size_t *n) {
    pthread_mutex_lock(&s->mu);
    const void *p = s->meta;
    *n = s->meta_n;
    pthread_mutex_unlock(&s->mu);
    return p;
}

/* ---- scrub ---------------------------------------------------------------------- */

enum { CHUNK_UNREAD = 0, CHUNK_GOOD, CHUNK_BAD };

typedef struct scrub_ctx {
    store_op op;
    unsigned char *state;   /* per chunk: CHUNK_* (set on the engine thread) */
    uint32_t *got;          /* per chunk: the CRC32C of what was read */
} scrub_ctx;

static st_status on_chunk_scrubbed(void *ctx, uint64_t i, st_error *err) {
    scrub_ctx *c = ctx;
    store *s = c->op.store;
    const store_tensor *t = c->op.tensor;
    uint64_t len = tensor_chunk_len(s, t, i);
    counter_add(&s->bytes_read[t->key.kind][layout_chunk_path(&s->layout, i)], store_padded_bytes(len));
    c->got[i] = st_crc32c(0, c->op.buf + i * s->layout.chunk_bytes, len);
    c->state[i] = c->got[i] == t->crc[c->op.slot][i] ? CHUNK_GOOD : CHUNK_BAD;
    (void)err;
    return ST_OK;   /* keep going: every chunk is checked */
}

/* Reads tensor t's committed slot (t->reads_inflight and s->ops_inflight
 * already counted; called without s->mu) and reports its bad chunks. */
static st_status scrub_tensor(store *s, store_tensor *t, int slot, store_bad_chunk_fn bad, void *ctx,
                              store_scrub_result *r, st_error *first, st_error *err) {
    char *buf = st_alloc_io((size_t)store_padded_bytes(t->bytes));
    scrub_ctx *c = calloc(1, sizeof *c);
    io_request *reqs = malloc((size_t)t->n_chunks * sizeof *reqs);
    if (c) c->state = calloc(t->n_chunks, 1);
    if (c) c->got = calloc(t->n_chunks, sizeof *c->got);
    st_status st = ST_OK;
    if (!buf || !c || !reqs || !c->state || !c->got) {
        st = st_fail(err, ST_ENOMEM, "scrub: out of memory");
        pthread_mutex_lock(&s->mu);
        t->reads_inflight--;
        s->ops_inflight--;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->mu);
    } else {
        store_op_init(&c->op, s, t, buf, 0);
        c->op.slot = slot;
        for (uint32_t k = 0; k < t->n_chunks; k++)
            reqs[k] = (io_request){.op = IO_OP_READ, .file = s->data[layout_chunk_path(&s->layout, k)],
                                   .buf = buf + (uint64_t)k * s->layout.chunk_bytes,
                                   .len = store_padded_bytes(tensor_chunk_len(s, t, k)),
                                   .offset = tensor_chunk_offset(s, t, slot, k), .on_done = on_chunk_scrubbed, .ctx = c,
                                   .tag = k};
        io_ticket_init(&c->op.ticket);
        c->op.ticket.on_complete = store_on_op_finished;
        c->op.ticket.on_complete_arg = &c->op;
        st_error io_err = {0};
        st_status io_st = io_submit(s->engine, reqs, t->n_chunks, &c->op.ticket, &io_err);
        if (io_st == ST_OK) io_st = io_ticket_wait(&c->op.ticket, &io_err);
        else {
            pthread_mutex_lock(&s->mu);
            t->reads_inflight--;
            s->ops_inflight--;
            pthread_cond_broadcast(&s->changed);
            pthread_mutex_unlock(&s->mu);
        }
        r->tensors++;
        r->chunks += t->n_chunks;
        r->bytes += t->bytes;
        int damaged = 0;
        for (uint32_t k = 0; k < t->n_chunks; k++) {
            if (c->state[k] == CHUNK_GOOD) continue;
            if (c->state[k] == CHUNK_UNREAD && io_st == ST_OK) continue;   /* cannot happen: all finished */
            char name[96], file[PATH_MAX];
            int p = layout_chunk_path(&s->layout, k);
            store_path_join(file, sizeof file, s->dirs[p], STORE_DATA_NAME);
            store_bad_chunk b = {.key = t->key, .chunk = k, .n_chunks = t->n_chunks,
                                 .tensor_offset = (uint64_t)k * s->layout.chunk_bytes,
                                 .len = tensor_chunk_len(s, t, k), .path = p, .file = file,
                                 .file_offset = tensor_chunk_offset(s, t, slot, k), .crc_stored = t->crc[slot][k]};
            st_error e = {0};
            if (c->state[k] == CHUNK_BAD) {
                b.status = store_chunk_mismatch(s, t, slot, k, c->got[k], &e);
                b.crc_read = c->got[k];
                r->bad_chunks++;
            } else {
                b.status = st_fail(&e, io_st,
                                   "could not read tensor %s at offset %llu (chunk %u of %u, %llu bytes) from %s "
                                   "offset %llu: %s",
                                   store_key_name(t->key, name, sizeof name), (unsigned long long)b.tensor_offset, k,
                                   t->n_chunks, (unsigned long long)b.len, file, (unsigned long long)b.file_offset,
                                   io_err.msg[0] ? io_err.msg : "I/O error");
                r->unreadable_chunks++;
            }
            b.message = e.msg;
            if (!first->status) *first = e;
            damaged = 1;
            if (bad) bad(ctx, &b);
        }
        r->damaged_tensors += (uint64_t)damaged;
        /* A failure with no chunk left unread (or none known) still counts. */
        if (io_st != ST_OK && !damaged && !first->status) *first = io_err;
    }
    free(reqs);
    if (c) {
        free(c->state);
        free(c->got);
    }
    free(c);
    st_free_aligned(buf);
    return st;
}

st_status store_scrub_each(store *s, store_bad_chunk_fn bad, void *ctx, store_scrub_result *result, st_error *err) {
    store_scrub_result r = {0};
    st_error first = {0};
    st_status st = ST_OK;
    pthread_mutex_lock(&s->mu);
    while (s->committing) pthread_cond_wait(&s->changed, &s->mu);
    for (int i = 0; i < s->n_tensors && st == ST_OK; i++) {
        store_tensor *t = s->list[i];
        if (t->committed_slot < 0 || t->write_inflight || t->n_slots == 0) continue;
        int slot = t->committed_slot;
        t->reads_inflight++;
        s->ops_inflight++;
        pthread_mutex_unlock(&s->mu);
        st = scrub_tensor(s, t, slot, bad, ctx, &r, &first, err);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    if (result) *result = r;
    if (st != ST_OK) return st;
    if (first.status) {
        if (err) *err = first;
        return first.status;
    }
    return ST_OK;
}

st_status store_scrub(store *s, uint64_t *bad_chunks, st_error *err) {
    store_scrub_result r;
    st_status st = store_scrub_each(s, NULL, NULL, &r, err);
    if (bad_chunks) *bad_chunks = r.bad_chunks;
    return st;
}
