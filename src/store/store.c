/* store.c - the tensor store's core: the tensor table, shadow slots, async
 * reads and writes with per-chunk checksums, counters. Commits live in
 * store_commit.c, opening and closing in store_open.c, the file-system
 * helpers they share in store_fs.c; docs/STORE.md
 * explains the layout and why a crash cannot expose a half-written state. */
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

/* ---- names -------------------------------------------------------------- */

const char *store_kind_name(store_kind k) {
    static const char *names[STORE_KIND_COUNT] = {"weights", "master", "adam_m", "adam_v",
                                                  "grads", "activations", "other", "manifest"};
    return (unsigned)k < STORE_KIND_COUNT ? names[k] : "?";
}

const char *store_key_name(store_key k, char *buf, size_t n) {
    if (k.index) snprintf(buf, n, "%s[%d,%d]", store_kind_name(k.kind), k.block, k.index);
    else snprintf(buf, n, "%s[%d]", store_kind_name(k.kind), k.block);
    return buf;
}

uint64_t store_padded_bytes(uint64_t bytes) { return (bytes + STORE_ALIGN - 1) / STORE_ALIGN * STORE_ALIGN; }

store_config store_default_config(void) {
    store_config c;
    memset(&c, 0, sizeof c);
    c.mode = STORE_OPEN_EXISTING;
    c.chunk_bytes = 1u << 20;
    c.measure_bytes = 64u << 20;
    c.io = io_engine_default_config();
    return c;
}

/* ---- the tensor table ----------------------------------------------------------- */

static int key_eq(store_key a, store_key b) { return a.kind == b.kind && a.block == b.block && a.index == b.index; }

static uint64_t key_hash(store_key k) {
    uint64_t x = ((uint64_t)(uint32_t)k.kind << 58) ^ ((uint64_t)(uint32_t)k.block << 26) ^ (uint32_t)k.index;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

store_tensor *tensor_find(const store *s, store_key k) {
    if (!s->hash_cap) return NULL;
    for (uint64_t i = key_hash(k) & (uint64_t)(s->hash_cap - 1);; i = (i + 1) & (uint64_t)(s->hash_cap - 1)) {
        store_tensor *t = s->hash[i];
        if (!t) return NULL;
        if (key_eq(t->key, k)) return t;
    }
}

static void hash_put(store *s, store_tensor *t) {
    uint64_t i = key_hash(t->key) & (uint64_t)(s->hash_cap - 1);
    while (s->hash[i]) i = (i + 1) & (uint64_t)(s->hash_cap - 1);
    s->hash[i] = t;
}

static st_status hash_rebuild(store *s, int cap, st_error *err) {
    store_tensor **h = calloc((size_t)cap, sizeof *h);
    if (!h) return st_fail(err, ST_ENOMEM, "store: out of memory for the tensor index");
    free(s->hash);
    s->hash = h;
    s->hash_cap = cap;
    for (int i = 0; i < s->n_tensors; i++) hash_put(s, s->list[i]);
    return ST_OK;
}

st_status store_table_add(store *s, store_tensor *t, st_error *err) {
    if (s->n_tensors == s->cap_tensors) {
        int cap = s->cap_tensors ? 2 * s->cap_tensors : 64;
        store_tensor **l = realloc(s->list, (size_t)cap * sizeof *l);
        if (!l) return st_fail(err, ST_ENOMEM, "store: out of memory for the tensor list");
        s->list = l;
        s->cap_tensors = cap;
    }
    if (2 * (s->n_tensors + 1) > s->hash_cap) {
        st_status st = hash_rebuild(s, s->hash_cap ? 2 * s->hash_cap : 128, err);
        if (st != ST_OK) return st;
    }
    s->list[s->n_tensors++] = t;
    hash_put(s, t);
    return ST_OK;
}

static void table_remove(store *s, store_tensor *t) {
    for (int i = 0; i < s->n_tensors; i++) {
        if (s->list[i] == t) {
            memmove(&s->list[i], &s->list[i + 1], (size_t)(s->n_tensors - i - 1) * sizeof *s->list);
            s->n_tensors--;
            break;
        }
    }
    /* Deletion is rare next to lookups: rebuilding keeps probing simple. */
    memset(s->hash, 0, (size_t)s->hash_cap * sizeof *s->hash);
    for (int i = 0; i < s->n_tensors; i++) hash_put(s, s->list[i]);
}

uint64_t tensor_disk_bytes(const store *s, const store_tensor *t) {
    uint64_t n = 0;
    for (int p = 0; p < s->n_paths; p++) n += t->slot_len[p] * (uint64_t)t->n_slots;
    return n;
}

void store_release_extents(store *s, store_tensor *t) {
    for (int p = 0; p < s->n_paths; p++)
        if (t->ext_off[p] != STORE_NO_EXTENT) space_release(&s->space[p], t->ext_off[p], t->slot_len[p] * (uint64_t)t->n_slots);
    s->ssd_used -= tensor_disk_bytes(s, t);
}

void tensor_free(store_tensor *t) {
    if (!t) return;
    free(t->crc[0]);
    free(t->crc[1]);
    st_free_aligned(t->host);
    free(t);
}

/* ---- counters and per-chunk callbacks (engine threads) --------------------------- */

void counter_add(_Atomic uint64_t *c, uint64_t n) { atomic_fetch_add_explicit(c, n, memory_order_relaxed); }

static st_status on_chunk_written(void *ctx, uint64_t i, st_error *err) {
    store_op *op = ctx;
    store *s = op->store;
    const store_tensor *t = op->tensor;
    counter_add(&s->bytes_written[t->key.kind][layout_chunk_path(&s->layout, i)], store_padded_bytes(tensor_chunk_len(s, t, i)));
    (void)err;
    return ST_OK;
}

st_status store_chunk_mismatch(store *s, const store_tensor *t, int slot, uint64_t i, uint32_t got, st_error *err) {
    char name[96];
    atomic_fetch_add(&s->checksum_failures, 1);
    int p = layout_chunk_path(&s->layout, i);
    return st_fail(err, ST_ECORRUPT,
                   "checksum mismatch in tensor %s at offset %llu (chunk %llu of %u, %llu bytes): %s/%s offset %llu "
                   "holds crc %08x, expected %08x",
                   store_key_name(t->key, name, sizeof name), (unsigned long long)(i * s->layout.chunk_bytes),
                   (unsigned long long)i, t->n_chunks, (unsigned long long)tensor_chunk_len(s, t, i), s->dirs[p],
                   STORE_DATA_NAME, (unsigned long long)tensor_chunk_offset(s, t, slot, i), got, t->crc[slot][i]);
}

static st_status on_chunk_read(void *ctx, uint64_t i, st_error *err) {
    store_op *op = ctx;
    store *s = op->store;
    const store_tensor *t = op->tensor;
    uint64_t len = tensor_chunk_len(s, t, i);
    counter_add(&s->bytes_read[t->key.kind][layout_chunk_path(&s->layout, i)], store_padded_bytes(len));
    if (!atomic_load_explicit(&s->verify, memory_order_relaxed)) return ST_OK;
    uint32_t got = st_crc32c(0, op->buf + i * s->layout.chunk_bytes, len);
    if (got != t->crc[op->slot][i]) return store_chunk_mismatch(s, t, op->slot, i, got, err);
    return ST_OK;
}

/* Called once per op when its last chunk finished: tensor bookkeeping. */
void store_on_op_finished(io_ticket *ticket, void *arg) {
    store_op *op = arg;
    store *s = op->store;
    store_tensor *t = op->tensor;
    pthread_mutex_lock(&s->mu);
    if (op->write) {
        t->write_inflight = 0;
        s->writes_inflight--;
        if (ticket->status == ST_OK) {
            t->current_slot = op->slot;
            t->has_data = 1;
            t->dirty = 1;
            t->write_failed = 0;
            if (!(t->flags & STORE_VOLATILE))
                for (int p = 0; p < s->n_paths; p++) s->path_dirty[p] |= t->slot_len[p] > 0;
        } else {
            /* The slot is half written: fall back to the committed version,
             * and refuse to commit until the tensor is written again. */
            t->current_slot = t->committed_slot;
            t->has_data = t->committed_slot >= 0;
            /* A host-tier tensor's memory is still right: the next commit
             * simply writes it out again. */
            t->write_failed = !(t->flags & STORE_VOLATILE) && t->tier != STORE_TIER_HOST;
        }
    } else {
        t->reads_inflight--;
    }
    s->ops_inflight--;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
}

/* ---- reads and writes ------------------------------------------------------------------ */

static st_status check_buffer(const store_tensor *t, const void *buf, uint64_t cap, const char *what, st_error *err) {
    char name[96];
    if (!buf || (uintptr_t)buf % STORE_ALIGN)
        return st_fail(err, ST_EINVAL, "%s tensor %s: the buffer must be %u-byte aligned (st_alloc_aligned or a pool buffer)",
                       what, store_key_name(t->key, name, sizeof name), STORE_ALIGN);
    if (cap < store_padded_bytes(t->bytes))
        return st_fail(err, ST_EINVAL, "%s tensor %s: the buffer holds %llu bytes, the tensor needs %llu (%llu rounded up to %u)",
                       what, store_key_name(t->key, name, sizeof name), (unsigned long long)cap,
                       (unsigned long long)store_padded_bytes(t->bytes), (unsigned long long)t->bytes, STORE_ALIGN);
    return ST_OK;
}

st_status store_usable(store *s, st_error *err) {
    if (s->broken) {
        if (err) *err = s->broken_err;
        return s->broken_err.status ? s->broken_err.status : ST_EIO;
    }
    return ST_OK;
}

st_status store_writable(const store *s, const char *what, st_error *err) {
    if (s->read_only) return st_fail(err, ST_EINVAL, "%s: the store in %s is open read-only", what, s->dirs[0]);
    return ST_OK;
}

/* Queues one request per chunk of slot `slot` (whole tensor). */
st_status store_submit_chunks(store *s, store_tensor *t, int slot, io_op opk, char *buf, store_op *op, st_error *err) {
    io_request *reqs = malloc((size_t)t->n_chunks * sizeof *reqs);
    if (!reqs) return st_fail(err, ST_ENOMEM, "store: out of memory for %u requests", t->n_chunks);
    for (uint32_t i = 0; i < t->n_chunks; i++) {
        int p = layout_chunk_path(&s->layout, i);
        reqs[i] = (io_request){.op = opk, .file = s->data[p], .buf = buf + (uint64_t)i * s->layout.chunk_bytes,
                               .len = store_padded_bytes(tensor_chunk_len(s, t, i)), .offset = tensor_chunk_offset(s, t, slot, i),
                               .on_done = opk == IO_OP_WRITE ? on_chunk_written : on_chunk_read, .ctx = op, .tag = i};
    }
    io_ticket_init(&op->ticket);
    op->ticket.on_complete = store_on_op_finished;
    op->ticket.on_complete_arg = op;
    st_status st = io_submit(s->engine, reqs, t->n_chunks, &op->ticket, err);
    free(reqs);
    return st;
}

void store_op_init(store_op *op, store *s, store_tensor *t, void *buf, int write) {
    memset(op, 0, sizeof *op);
    op->store = s;
    op->tensor = t;
    op->buf = buf;
    op->write = write;
}

static int write_slot(const store_tensor *t) {
    if (t->n_slots == 1) return 0;
    if (t->committed_slot >= 0) return 1 - t->committed_slot;
    return t->current_slot >= 0 ? t->current_slot : 0;
}

/* The commit before the last stays loadable until the store next writes
 * (a write may land in its slots, or in the regions of tensors deleted
 * since): its manifest goes first, durably. With s->mu held. */
static st_status forget_previous(store *s, st_error *err) {
    char prev[PATH_MAX];
    store_path_join(prev, sizeof prev, s->dirs[0], STORE_MANIFEST_PREV);
    if (unlink(prev) != 0 && errno != ENOENT) return st_fail_errno(err, errno, "cannot remove %s", prev);
    st_status st = st_fsync_dir(s->dirs[0], err);
    if (st == ST_OK) s->keeps_previous = 0;
    return st;
}

/* Starts writing buf as t's new version; the caller holds s->mu, which is
 * released while checksums are computed. */
st_status store_start_write(store *s, store_tensor *t, const void *buf, store_op *op, st_error *err) {
    if (s->keeps_previous) {
        st_status st = forget_previous(s, err);
        if (st != ST_OK) return st;
    }
    int slot = write_slot(t);
    t->write_inflight = 1;
    s->writes_inflight++;
    s->ops_inflight++;
    pthread_mutex_unlock(&s->mu);
    store_op_init(op, s, t, (void *)buf, 1);
    op->slot = slot;
    /* Nothing reads crc[slot] now: it is not the committed slot, and reads of
     * this tensor are refused while its write is in flight. */
    for (uint32_t i = 0; i < t->n_chunks; i++)
        t->crc[slot][i] = st_crc32c(0, (const char *)buf + (uint64_t)i * s->layout.chunk_bytes, tensor_chunk_len(s, t, i));
    st_status st = store_submit_chunks(s, t, slot, IO_OP_WRITE, (char *)buf, op, err);
    pthread_mutex_lock(&s->mu);
    if (st != ST_OK) {
        t->write_inflight = 0;
        s->writes_inflight--;
        s->ops_inflight--;
        pthread_cond_broadcast(&s->changed);
    }
    return st;
}

st_status store_write_async(store *s, store_key key, const void *buf, uint64_t buf_bytes, store_op *op, st_error *err) {
    char name[96];
    pthread_mutex_lock(&s->mu);
    while (s->committing) pthread_cond_wait(&s->changed, &s->mu);
    store_tensor *t = tensor_find(s, key);
    st_status st = store_usable(s, err);
    if (st == ST_OK) st = store_writable(s, "write tensor", err);
    if (st == ST_OK && !t)
        st = st_fail(err, ST_ENOENT, "write tensor %s: no such tensor", store_key_name(key, name, sizeof name));
    if (st == ST_OK) st = check_buffer(t, buf, buf_bytes, "write", err);
    if (st == ST_OK && (t->write_inflight || t->reads_inflight))
        st = st_fail(err, ST_EINVAL, "write tensor %s: it still has a %s in flight", store_key_name(key, name, sizeof name),
                     t->write_inflight ? "write" : "read");
    if (st != ST_OK) {
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    if (t->tier == STORE_TIER_HOST) {
        memcpy(t->host, buf, t->bytes);
        t->has_data = 1;
        t->dirty = 1;
        pthread_mutex_unlock(&s->mu);
        store_op_init(op, s, t, (void *)buf, 1);
        op->immediate = 1;
        return ST_OK;
    }
    st = store_start_write(s, t, buf, op, err);
    pthread_mutex_unlock(&s->mu);
    return st;
}

st_status store_read_async(store *s, store_key key, void *buf, uint64_t buf_bytes, store_op *op, st_error *err) {
    char name[96];
    pthread_mutex_lock(&s->mu);
    store_tensor *t = tensor_find(s, key);
    st_status st = store_usable(s, err);
    if (st == ST_OK && !t)
        st = st_fail(err, ST_ENOENT, "read tensor %s: no such tensor", store_key_name(key, name, sizeof name));
    if (st == ST_OK) st = check_buffer(t, buf, buf_bytes, "read", err);
    if (st == ST_OK && t->write_inflight)
        st = st_fail(err, ST_EINVAL, "read tensor %s: it has a write in flight", store_key_name(key, name, sizeof name));
    if (st == ST_OK && !t->has_data)
        st = st_fail(err, ST_ENOENT, "read tensor %s: it has no data (created but never written)",
                     store_key_name(key, name, sizeof name));
    if (st != ST_OK) {
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    if (t->tier == STORE_TIER_HOST) {
        memcpy(buf, t->host, t->bytes);
        pthread_mutex_unlock(&s->mu);
        store_op_init(op, s, t, buf, 0);
        op->immediate = 1;
        return ST_OK;
    }
    int slot = t->current_slot;
    t->reads_inflight++;
    s->ops_inflight++;
    pthread_mutex_unlock(&s->mu);
    store_op_init(op, s, t, buf, 0);
    op->slot = slot;
    st = store_submit_chunks(s, t, slot, IO_OP_READ, buf, op, err);
    if (st != ST_OK) {
        pthread_mutex_lock(&s->mu);
        t->reads_inflight--;
        s->ops_inflight--;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->mu);
    }
    return st;
}

int store_op_done(store_op *op) { return op->immediate || io_ticket_done(&op->ticket); }

st_status store_op_wait(store_op *op, st_error *err) {
    if (op->immediate) {
        if (op->status != ST_OK && err) *err = op->error;
        return op->status;
    }
    return io_ticket_wait(&op->ticket, err);
}

st_status store_read(store *s, store_key key, void *buf, uint64_t buf_bytes, st_error *err) {
    store_op op;
    st_status st = store_read_async(s, key, buf, buf_bytes, &op, err);
    return st != ST_OK ? st : store_op_wait(&op, err);
}

st_status store_write(store *s, store_key key, const void *buf, uint64_t buf_bytes, st_error *err) {
    store_op op;
    st_status st = store_write_async(s, key, buf, buf_bytes, &op, err);
    return st != ST_OK ? st : store_op_wait(&op, err);
}

void *store_host_data(store *s, store_key key) {
    pthread_mutex_lock(&s->mu);
    store_tensor *t = tensor_find(s, key);
    void *p = t && t->tier == STORE_TIER_HOST ? t->host : NULL;
    pthread_mutex_unlock(&s->mu);
    return p;
}

st_status store_mark_dirty(store *s, store_key key, st_error *err) {
    char name[96];
    pthread_mutex_lock(&s->mu);
    while (s->committing) pthread_cond_wait(&s->changed, &s->mu);
    store_tensor *t = tensor_find(s, key);
    st_status st = store_writable(s, "mark tensor dirty", err);
    if (st == ST_OK && !t) st = st_fail(err, ST_ENOENT, "mark tensor %s dirty: no such tensor", store_key_name(key, name, sizeof name));
    else if (st == ST_OK && t->tier != STORE_TIER_HOST)
        st = st_fail(err, ST_EINVAL, "mark tensor %s dirty: only host-tier tensors are changed in place",
                     store_key_name(key, name, sizeof name));
    else if (st == ST_OK) t->dirty = t->has_data = 1;
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* ---- tensors ------------------------------------------------------------------------------ */

/* Reserves each path's region for t (and file space behind it). */
static st_status place_tensor(store *s, store_tensor *t, st_error *err) {
    char name[96];
    for (int p = 0; p < s->n_paths; p++) t->ext_off[p] = STORE_NO_EXTENT;
    if (t->n_slots == 0) return ST_OK;
    st_status st = ST_OK;
    int p = 0;
    for (; p < s->n_paths && st == ST_OK; p++) {
        uint64_t len = t->slot_len[p] * (uint64_t)t->n_slots;
        if (len == 0) continue;
        st = space_alloc(&s->space[p], len, &t->ext_off[p], err);
        if (st != ST_OK) break;
        uint64_t end = space_end(&s->space[p]);
        if (end > s->reserved[p]) {
            /* Grow in steps of 1 MiB at least, to spare fallocate calls. */
            uint64_t want = (end + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
            st_error e2 = {0};
            st = io_file_reserve(s->data[p], want, &e2);
            if (st != ST_OK) {
                st_fail(err, st, "create tensor %s: path %s: %s", store_key_name(t->key, name, sizeof name), s->dirs[p],
                        e2.msg);
                if (err) err->sys_errno = e2.sys_errno;
                space_release(&s->space[p], t->ext_off[p], len);
                t->ext_off[p] = STORE_NO_EXTENT;
                break;
            }
            s->reserved[p] = want;
            /* The file's new size is metadata that only an fdatasync makes
             * durable: the next commit must sync this path even if nothing
             * is written to it, or a manifest could name a region beyond the
             * end of the file after a power loss. */
            s->path_dirty[p] = 1;
        }
    }
    if (st != ST_OK) {
        for (int q = 0; q < s->n_paths; q++)
            if (t->ext_off[q] != STORE_NO_EXTENT) {
                space_release(&s->space[q], t->ext_off[q], t->slot_len[q] * (uint64_t)t->n_slots);
                t->ext_off[q] = STORE_NO_EXTENT;
            }
    }
    return st;
}

store_tensor *tensor_new(store *s, store_key key, uint64_t bytes, store_tier tier, unsigned flags) {
    store_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->key = key;
    t->bytes = bytes;
    t->tier = tier;
    t->flags = flags;
    t->n_chunks = layout_chunk_count(&s->layout, bytes);
    t->n_slots = (flags & STORE_VOLATILE) ? (tier == STORE_TIER_HOST ? 0 : 1) : 2;
    t->committed_slot = t->current_slot = -1;
    layout_slot_lengths(&s->layout, bytes, t->slot_len);
    for (int k = 0; k < t->n_slots; k++) {
        t->crc[k] = calloc(t->n_chunks, sizeof *t->crc[k]);
        if (!t->crc[k]) {
            tensor_free(t);
            return NULL;
        }
    }
    if (tier == STORE_TIER_HOST) {
        t->host = st_alloc_io((size_t)store_padded_bytes(bytes));   /* commits write it, opens read it */
        if (!t->host) {
            tensor_free(t);
            return NULL;
        }
        memset(t->host, 0, (size_t)store_padded_bytes(bytes));
    }
    return t;
}

st_status store_create_tensor(store *s, store_key key, uint64_t bytes, store_tier tier, unsigned flags, st_error *err) {
    char name[96], a[32], b[32], c[32];
    store_key_name(key, name, sizeof name);
    if ((unsigned)key.kind >= STORE_MANIFEST) return st_fail(err, ST_EINVAL, "create tensor %s: bad kind %d", name, (int)key.kind);
    if (bytes == 0) return st_fail(err, ST_EINVAL, "create tensor %s: size 0", name);
    if (tier != STORE_TIER_SSD && tier != STORE_TIER_HOST) return st_fail(err, ST_EINVAL, "create tensor %s: bad tier", name);
    if (flags & ~(unsigned)STORE_VOLATILE) return st_fail(err, ST_EINVAL, "create tensor %s: unknown flags %#x", name, flags);
    if (bytes / s->layout.chunk_bytes >= UINT32_MAX) return st_fail(err, ST_EINVAL, "create tensor %s: too large", name);
    pthread_mutex_lock(&s->mu);
    while (s->committing) pthread_cond_wait(&s->changed, &s->mu);
    st_status st = store_usable(s, err);
    if (st == ST_OK) st = store_writable(s, "create tensor", err);
    if (st == ST_OK && tensor_find(s, key)) st = st_fail(err, ST_EEXIST, "create tensor %s: it already exists", name);
    store_tensor *t = NULL;
    /* The budget first: tensor_new allocates (and touches) the host memory. */
    if (st == ST_OK && tier == STORE_TIER_HOST && s->host_used + store_padded_bytes(bytes) > s->host_budget)
        st = st_fail(err, ST_ENOMEM, "create tensor %s: the host budget of %s is exhausted (%s in use, %s more needed)", name,
                     st_format_bytes((double)s->host_budget, a, sizeof a), st_format_bytes((double)s->host_used, b, sizeof b),
                     st_format_bytes((double)store_padded_bytes(bytes), c, sizeof c));
    if (st == ST_OK) {
        t = tensor_new(s, key, bytes, tier, flags);
        if (!t) st = st_fail(err, ST_ENOMEM, "create tensor %s (%s): out of memory", name, st_format_bytes((double)bytes, a, sizeof a));
    }
    if (st == ST_OK && s->ssd_budget && s->ssd_used + tensor_disk_bytes(s, t) > s->ssd_budget)
        st = st_fail(err, ST_ENOSPC, "create tensor %s: the SSD budget of %s is exhausted (%s in use, %s more needed)", name,
                     st_format_bytes((double)s->ssd_budget, a, sizeof a), st_format_bytes((double)s->ssd_used, b, sizeof b),
                     st_format_bytes((double)tensor_disk_bytes(s, t), c, sizeof c));
    if (st == ST_OK) st = place_tensor(s, t, err);
    if (st == ST_OK) {
        st = store_table_add(s, t, err);
        if (st != ST_OK) store_release_extents(s, t);
    }
    if (st != ST_OK) {
        tensor_free(t);
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    s->ssd_used += tensor_disk_bytes(s, t);
    if (tier == STORE_TIER_HOST) s->host_used += store_padded_bytes(bytes);
    pthread_mutex_unlock(&s->mu);
    return ST_OK;
}

st_status store_delete_tensor(store *s, store_key key, st_error *err) {
    char name[96];
    pthread_mutex_lock(&s->mu);
    while (s->committing) pthread_cond_wait(&s->changed, &s->mu);
    store_tensor *t = tensor_find(s, key);
    st_status st = store_usable(s, err);
    if (st == ST_OK) st = store_writable(s, "delete tensor", err);
    if (st == ST_OK && !t) st = st_fail(err, ST_ENOENT, "delete tensor %s: no such tensor", store_key_name(key, name, sizeof name));
    if (st == ST_OK && (t->reads_inflight || t->write_inflight))
        st = st_fail(err, ST_EINVAL, "delete tensor %s: it has I/O in flight", store_key_name(key, name, sizeof name));
    if (st == ST_OK && t->in_manifest && s->n_grave == s->cap_grave) {
        int cap = s->cap_grave ? 2 * s->cap_grave : 16;
        store_tensor **g = realloc(s->grave, (size_t)cap * sizeof *g);
        if (!g) st = st_fail(err, ST_ENOMEM, "delete tensor %s: out of memory", store_key_name(key, name, sizeof name));
        else {
            s->grave = g;
            s->cap_grave = cap;
        }
    }
    if (st != ST_OK) {
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    table_remove(s, t);
    if (t->tier == STORE_TIER_HOST) s->host_used -= store_padded_bytes(t->bytes);
    st_free_aligned(t->host);
    t->host = NULL;
    if (t->in_manifest) {
        /* The committed manifest still points at its region: keep it until
         * the next commit no longer does. */
        s->grave[s->n_grave++] = t;
    } else {
        store_release_extents(s, t);
        tensor_free(t);
    }
    pthread_mutex_unlock(&s->mu);
    return ST_OK;
}

int store_has_tensor(store *s, store_key key) {
    pthread_mutex_lock(&s->mu);
    int has = tensor_find(s, key) != NULL;
    pthread_mutex_unlock(&s->mu);
    return has;
}

static void fill_info(const store_tensor *t, store_tensor_info *out) {
    *out = (store_tensor_info){.key = t->key, .bytes = t->bytes, .padded_bytes = store_padded_bytes(t->bytes),
                               .tier = t->tier, .flags = t->flags, .has_data = t->has_data, .dirty = t->dirty,
                               .chunks = t->n_chunks};
}

st_status store_tensor_info_of(store *s, store_key key, store_tensor_info *out, st_error *err) {
    char name[96];
    pthread_mutex_lock(&s->mu);
    store_tensor *t = tensor_find(s, key);
    if (t) fill_info(t, out);
    pthread_mutex_unlock(&s->mu);
    if (!t) return st_fail(err, ST_ENOENT, "tensor %s: no such tensor", store_key_name(key, name, sizeof name));
    return ST_OK;
}

int store_tensor_count(store *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_tensors;
    pthread_mutex_unlock(&s->mu);
    return n;
}

st_status store_tensor_info_at(store *s, int i, store_tensor_info *out, st_error *err) {
    pthread_mutex_lock(&s->mu);
    int ok = i >= 0 && i < s->n_tensors;
    if (ok) fill_info(s->list[i], out);
    pthread_mutex_unlock(&s->mu);
    if (!ok) return st_fail(err, ST_EINVAL, "tensor index %d out of range", i);
    return ST_OK;
}

/* ---- verify, locate ------------------------------------------------------------------------- */

void store_set_verify(store *s, int on) { atomic_store(&s->verify, on ? 1 : 0); }

st_status store_locate(store *s, store_key key, uint64_t offset, int *path, char *file, size_t file_cap,
                       uint64_t *file_offset, st_error *err) {
    char name[96];
    pthread_mutex_lock(&s->mu);
    store_tensor *t = tensor_find(s, key);
    st_status st = ST_OK;
    if (!t) st = st_fail(err, ST_ENOENT, "locate tensor %s: no such tensor", store_key_name(key, name, sizeof name));
    else if (t->current_slot < 0 || t->n_slots == 0)
        st = st_fail(err, ST_ENOENT, "locate tensor %s: it has no data on disk", store_key_name(key, name, sizeof name));
    else if (offset >= t->bytes)
        st = st_fail(err, ST_EINVAL, "locate tensor %s: offset %llu is past its %llu bytes",
                     store_key_name(key, name, sizeof name), (unsigned long long)offset, (unsigned long long)t->bytes);
    if (st == ST_OK) {
        uint64_t i = offset / s->layout.chunk_bytes;
        int p = layout_chunk_path(&s->layout, i);
        if (path) *path = p;
        if (file) store_path_join(file, file_cap, s->dirs[p], STORE_DATA_NAME);
        if (file_offset) *file_offset = tensor_chunk_offset(s, t, t->current_slot, i) + offset % s->layout.chunk_bytes;
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* ---- counters and info ----------------------------------------------------------------------------- */

void store_get_counters(store *s, store_counters *out) {
    memset(out, 0, sizeof *out);
    for (int k = 0; k < STORE_KIND_COUNT; k++)
        for (int p = 0; p < STORE_MAX_PATHS; p++) {
            out->bytes_read[k][p] = atomic_load_explicit(&s->bytes_read[k][p], memory_order_relaxed);
            out->bytes_written[k][p] = atomic_load_explicit(&s->bytes_written[k][p], memory_order_relaxed);
        }
    out->commits = atomic_load(&s->commits);
    out->checksum_failures = atomic_load(&s->checksum_failures);
    out->n_paths = s->n_paths;
    for (int p = 0; p < s->n_paths; p++) io_engine_path_counters(s->engine, s->path_id[p], &out->io[p]);
}

uint64_t store_counters_written(const store_counters *c) {
    uint64_t n = 0;
    for (int k = 0; k < STORE_KIND_COUNT; k++)
        for (int p = 0; p < STORE_MAX_PATHS; p++) n += c->bytes_written[k][p];
    return n;
}

uint64_t store_counters_read(const store_counters *c) {
    uint64_t n = 0;
    for (int k = 0; k < STORE_KIND_COUNT; k++)
        for (int p = 0; p < STORE_MAX_PATHS; p++) n += c->bytes_read[k][p];
    return n;
}

void store_get_info(store *s, store_info *out) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    out->n_paths = s->n_paths;
    for (int p = 0; p < s->n_paths; p++) out->weights[p] = (double)s->layout.weight[p] / s->layout.period;
    out->chunk_bytes = s->layout.chunk_bytes;
    out->ssd_bytes_used = s->ssd_used;
    out->host_bytes_used = s->host_used;
    out->generation = s->generation;
    out->store_id = s->store_id;
    pthread_mutex_unlock(&s->mu);
}

double store_endurance_days(double bytes_per_step, double step_seconds, double rated_bytes_written) {
    if (bytes_per_step <= 0 || step_seconds <= 0) return 1e300;
    return rated_bytes_written / (bytes_per_step / step_seconds) / 86400.0;
}

