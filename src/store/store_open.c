/* store_open.c - creating, opening and closing a store: path markers,
 * bandwidth probes for stripe weights, the manifest read back and checked,
 * the exclusive lock. */
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

/* ---- path markers --------------------------------------------------------------- */

/* Written once, at creation, through a temporary file: a crash leaves no
 * half-written marker that would make the path look foreign. */
static st_status write_marker(store *s, int p, st_error *err) {
    char name[PATH_MAX], text[128];
    store_path_join(name, sizeof name, s->dirs[p], STORE_ID_NAME);
    int n = snprintf(text, sizeof text, "strata-store 1\nid %016llx\npath %d of %d\n", (unsigned long long)s->store_id,
                     p, s->n_paths);
    return st_write_file_atomic(name, text, (size_t)n, err);
}

static st_status check_marker(store *s, int p, st_error *err) {
    char name[PATH_MAX];
    store_path_join(name, sizeof name, s->dirs[p], STORE_ID_NAME);
    unsigned char *text;
    size_t n;
    st_status st = store_read_whole_file(name, &text, &n, err);
    if (st == ST_ENOENT)
        return st_fail(err, ST_ENOENT, "%s is not part of the store in %s (no %s)", s->dirs[p], s->dirs[0], STORE_ID_NAME);
    if (st != ST_OK) return st;
    unsigned long long id = 0;
    int idx = -1, total = -1;
    char *z = malloc(n + 1);
    if (!z) {
        free(text);
        return st_fail(err, ST_ENOMEM, "out of memory");
    }
    memcpy(z, text, n);
    z[n] = '\0';
    int ok = sscanf(z, "strata-store 1\nid %llx\npath %d of %d", &id, &idx, &total) == 3;
    free(z);
    free(text);
    if (!ok) return st_fail(err, ST_ECORRUPT, "%s is malformed", name);
    if (id != s->store_id)
        return st_fail(err, ST_EINVAL, "%s belongs to another store (id %016llx, expected %016llx)", s->dirs[p], id,
                       (unsigned long long)s->store_id);
    if (idx != p || total != s->n_paths)
        return st_fail(err, ST_EINVAL,
                       "%s is path %d of %d of this store, but was given as path %d of %d: list the paths in the "
                       "order the store was created with",
                       s->dirs[p], idx, total, p, s->n_paths);
    return ST_OK;
}

/* ---- open and close ----------------------------------------------------------------------------- */

/* Times a sequential write and read of `bytes` on path p: bytes per second
 * over both, the mix training produces. */
static st_status measure_path(store *s, int p, uint64_t bytes, double *bw, st_error *err) {
    const char *probe = "strata-store.probe";
    uint64_t piece = 16u << 20;
    if (bytes < piece) piece = bytes;
    bytes = bytes / piece * piece;
    char *buf = st_alloc_io((size_t)piece);
    if (!buf) return st_fail(err, ST_ENOMEM, "measuring %s: out of memory", s->dirs[p]);
    for (uint64_t k = 0; k < piece; k++) buf[k] = (char)(k * 2654435761u >> 13);
    io_file *f = NULL;
    st_status st = io_file_open(s->engine, s->path_id[p], probe, IO_FILE_CREATE | IO_FILE_TRUNCATE, &f, err);
    uint64_t n = bytes / piece;
    io_request *reqs = calloc(n + 1, sizeof *reqs);
    if (st == ST_OK && !reqs) st = st_fail(err, ST_ENOMEM, "measuring %s: out of memory", s->dirs[p]);
    if (st == ST_OK) st = io_file_reserve(f, bytes, err);
    double t_write = 0, t_read = 0;
    for (int pass = 0; pass < 2 && st == ST_OK; pass++) {
        io_op op = pass == 0 ? IO_OP_WRITE : IO_OP_READ;
        for (uint64_t k = 0; k < n; k++) reqs[k] = (io_request){.op = op, .file = f, .buf = buf, .len = piece, .offset = k * piece};
        size_t count_reqs = (size_t)n;
        if (op == IO_OP_WRITE) reqs[count_reqs++] = (io_request){.op = IO_OP_SYNC, .file = f};
        double t0 = st_now();
        st = store_run_batch(s, reqs, count_reqs, err);
        *(pass == 0 ? &t_write : &t_read) = st_now() - t0;
    }
    if (f) {
        char name[PATH_MAX];
        snprintf(name, sizeof name, "%s", io_file_name(f));
        io_file_close(f);
        unlink(name);
    }
    free(reqs);
    st_free_aligned(buf);
    if (st == ST_OK) *bw = 2.0 * (double)bytes / (t_write + t_read > 0 ? t_write + t_read : 1e-9);
    return st;
}

static st_status create_store(store *s, const store_config *cfg, st_error *err) {
    for (int p = 0; p < s->n_paths; p++) {
        static const char *names[] = {STORE_ID_NAME, STORE_DATA_NAME, STORE_MANIFEST_NAME};
        for (int k = 0; k < 3; k++) {
            char name[PATH_MAX];
            store_path_join(name, sizeof name, s->dirs[p], names[k]);
            if (access(name, F_OK) == 0)
                return st_fail(err, ST_EEXIST,
                               "%s already holds store files (%s): open that store, or remove its strata-store.* files",
                               s->dirs[p], names[k]);
        }
    }
    if (getrandom(&s->store_id, sizeof s->store_id, 0) != (ssize_t)sizeof s->store_id)
        s->store_id = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    uint32_t w[STORE_MAX_PATHS];
    double measured[STORE_MAX_PATHS];
    const double *wd = cfg->weights;
    if (!wd && cfg->measure_bandwidth && s->n_paths > 1) {
        for (int p = 0; p < s->n_paths; p++) {
            st_status st = measure_path(s, p, cfg->measure_bytes ? cfg->measure_bytes : 64u << 20, &measured[p], err);
            if (st != ST_OK) return st;
        }
        wd = measured;
    }
    layout_weights_from_doubles(s->n_paths, wd, w);
    st_status st = layout_init(&s->layout, s->n_paths, w, cfg->chunk_bytes ? cfg->chunk_bytes : 1u << 20, err);
    for (int p = 0; p < s->n_paths && st == ST_OK; p++) st = write_marker(s, p, err);
    for (int p = 0; p < s->n_paths && st == ST_OK; p++)
        st = io_file_open(s->engine, s->path_id[p], STORE_DATA_NAME, IO_FILE_CREATE | IO_FILE_EXCL, &s->data[p], err);
    if (st != ST_OK) return st;
    /* Generation 0: an empty store exists once its first manifest does. The
     * directories are synced after it, for the data files created in each. */
    unsigned char *mbuf = NULL;
    size_t n = 0;
    st = store_encode_manifest(s, 0, &mbuf, &n, err);
    if (st == ST_OK) st = store_install_manifest(s, mbuf, n, err);
    st_free_aligned(mbuf);
    for (int p = 0; p < s->n_paths && st == ST_OK; p++) st = st_fsync_dir(s->dirs[p], err);
    if (st == ST_OK) counter_add(&s->bytes_written[STORE_MANIFEST][0], n);
    return st;
}

static st_status load_host_tensor(store *s, store_tensor *t, st_error *err) {
    store_op op;
    store_op_init(&op, s, t, t->host, 0);
    op.slot = t->committed_slot;
    pthread_mutex_lock(&s->mu);
    t->reads_inflight++;
    s->ops_inflight++;
    pthread_mutex_unlock(&s->mu);
    st_status st = store_submit_chunks(s, t, t->committed_slot, IO_OP_READ, t->host, &op, err);
    if (st != ST_OK) {
        pthread_mutex_lock(&s->mu);
        t->reads_inflight--;
        s->ops_inflight--;
        pthread_mutex_unlock(&s->mu);
        return st;
    }
    return io_ticket_wait(&op.ticket, err);
}

static st_status open_existing(store *s, const char *manifest_path, st_error *err) {
    unsigned char *buf;
    size_t n;
    st_status st = store_read_whole_file(manifest_path, &buf, &n, err);
    if (st != ST_OK) return st;
    manifest m;
    st = manifest_decode(buf, n, manifest_path, &m, err);
    free(buf);
    if (st != ST_OK) return st;
    if (m.n_paths != s->n_paths) {
        st = st_fail(err, ST_EINVAL, "the store in %s spans %d paths, but %d were given", s->dirs[0], m.n_paths, s->n_paths);
        manifest_free(&m);
        return st;
    }
    s->store_id = m.store_id;
    s->generation = m.generation;
    s->meta = m.meta;
    s->meta_n = m.meta_n;
    m.meta = NULL;
    st = layout_init(&s->layout, s->n_paths, m.weight, m.chunk_bytes, err);
    for (int p = 0; p < s->n_paths && st == ST_OK; p++) st = check_marker(s, p, err);
    uint64_t file_size[STORE_MAX_PATHS] = {0};
    for (int p = 0; p < s->n_paths && st == ST_OK; p++) {
        st = io_file_open(s->engine, s->path_id[p], STORE_DATA_NAME, s->read_only ? IO_FILE_READ_ONLY : 0, &s->data[p],
                          err);
        if (st == ST_OK) st = io_file_size(s->data[p], &file_size[p], err);
        s->reserved[p] = file_size[p];
    }
    for (int i = 0; i < m.n_tensors && st == ST_OK; i++) {
        manifest_tensor *mt = &m.tensors[i];
        char name[96];
        store_key_name(mt->key, name, sizeof name);
        if (tensor_find(s, mt->key)) {
            st = st_fail(err, ST_ECORRUPT, "%s lists tensor %s twice", manifest_path, name);
            break;
        }
        /* Read-only: a host-tier tensor is read from its committed slot on
         * disk, like an SSD-tier one (same two-slot layout), without memory. */
        store_tier tier = s->read_only ? STORE_TIER_SSD : (store_tier)mt->tier;
        /* The budget before tensor_new, which allocates the host memory. */
        if (tier == STORE_TIER_HOST && s->host_used + store_padded_bytes(mt->bytes) > s->host_budget) {
            st = st_fail(err, ST_ENOMEM, "opening the store: host-tier tensor %s does not fit the host budget", name);
            break;
        }
        store_tensor *t = tensor_new(s, mt->key, mt->bytes, tier, mt->flags & ~(unsigned)STORE_VOLATILE);
        if (!t) {
            st = st_fail(err, ST_ENOMEM, "opening the store: out of memory for tensor %s", name);
            break;
        }
        memcpy(t->ext_off, mt->ext_off, sizeof t->ext_off);
        t->committed_slot = t->current_slot = mt->slot;
        t->has_data = mt->slot >= 0;
        t->in_manifest = 1;
        if (mt->slot >= 0) memcpy(t->crc[mt->slot], mt->crc, 4u * (size_t)t->n_chunks);
        for (int p = 0; p < s->n_paths && st == ST_OK; p++) {
            uint64_t len = t->slot_len[p] * 2;
            if ((len == 0) != (t->ext_off[p] == STORE_NO_EXTENT)) {
                st = st_fail(err, ST_ECORRUPT, "%s: tensor %s has a region on path %d that its size does not match",
                             manifest_path, name, p);
            } else if (len && (t->ext_off[p] % STORE_ALIGN || len > file_size[p] || t->ext_off[p] > file_size[p] - len)) {
                st = st_fail(err, ST_ECORRUPT,
                             "%s: tensor %s lies beyond the end of %s/%s or is misaligned (offset %llu, %llu bytes; the "
                             "file has %llu bytes)",
                             manifest_path, name, s->dirs[p], STORE_DATA_NAME, (unsigned long long)t->ext_off[p],
                             (unsigned long long)len, (unsigned long long)file_size[p]);
            } else if (len) {
                st_error e2 = {0};
                st = space_claim(&s->space[p], t->ext_off[p], len, &e2);
                if (st != ST_OK) st = st_fail(err, st, "%s: tensor %s: %s", manifest_path, name, e2.msg);
            }
        }
        if (st == ST_OK) st = store_table_add(s, t, err);
        if (st != ST_OK) {
            tensor_free(t);
            break;
        }
        if (t->tier == STORE_TIER_HOST) s->host_used += store_padded_bytes(t->bytes);
        s->ssd_used += tensor_disk_bytes(s, t);
    }
    manifest_free(&m);
    for (int i = 0; i < s->n_tensors && st == ST_OK; i++)
        if (s->list[i]->tier == STORE_TIER_HOST && s->list[i]->has_data) st = load_host_tensor(s, s->list[i], err);
    return st;
}

/* Exclusive for work; shared when read-only, so that several checks may
 * run at once while none can run beside a process working on the store. */
/* The preflight of a read-only open: each path is a directory, and its data
 * file is read with O_DIRECT where that works (from the drive, not the page
 * cache), buffered where it does not. Writes nothing. */
static st_status preflight_read_only(store *s, io_preflight_path *pre, st_error *err) {
    for (int p = 0; p < s->n_paths; p++) {
        struct stat sb;
        if (stat(s->dirs[p], &sb) != 0) {
            if (errno == ENOENT) return st_fail(err, ST_ENOENT, "storage path %s does not exist", s->dirs[p]);
            return st_fail_errno(err, errno, "storage path %s", s->dirs[p]);
        }
        if (!S_ISDIR(sb.st_mode)) return st_fail(err, ST_EINVAL, "storage path %s is not a directory", s->dirs[p]);
        char name[PATH_MAX];
        store_path_join(name, sizeof name, s->dirs[p], STORE_DATA_NAME);
        int fd = open(name, O_RDONLY | O_DIRECT | O_CLOEXEC);
        pre[p].direct_ok = 0;
        if (fd >= 0) {
            void *buf = st_alloc_aligned(STORE_ALIGN, STORE_ALIGN);
            pre[p].direct_ok = buf && pread(fd, buf, STORE_ALIGN, 0) >= 0;
            st_free_aligned(buf);
            close(fd);
        }
    }
    return ST_OK;
}

static st_status lock_store(store *s, st_error *err) {
    char name[PATH_MAX];
    store_path_join(name, sizeof name, s->dirs[0], STORE_LOCK_NAME);
    /* Every store has its lock file from its creation on; without one no
     * process holds the store, and a read-only open creates nothing. */
    long holder;
    st_error e = {0};
    st_status st = st_lock_take(name, !s->read_only, &s->lock_fd, &holder, &e);
    if (st != ST_EEXIST) return st == ST_OK ? ST_OK : st_fail(err, st, "%s", e.msg);
    char who[48] = "another process";
    if (holder) snprintf(who, sizeof who, "another process (PID %ld)", holder);
    if (s->read_only)
        return st_fail(err, ST_EEXIST, "the store in %s is in use by %s (a training run?): check it when that process has ended",
                       s->dirs[0], who);
    return st_fail(err, ST_EEXIST, "the store in %s is open in %s", s->dirs[0], who);
}

st_status store_open(const store_config *cfg, store **out, char *warning, size_t warning_cap, st_error *err) {
    if (warning && warning_cap) warning[0] = '\0';
    if (!cfg || !cfg->paths || cfg->n_paths < 1 || cfg->n_paths > STORE_MAX_PATHS)
        return st_fail(err, ST_EINVAL, "a store needs 1 to %d paths", STORE_MAX_PATHS);
    store *s = calloc(1, sizeof *s);
    if (!s) return st_fail(err, ST_ENOMEM, "store: out of memory");
    s->lock_fd = -1;
    s->read_only = cfg->read_only != 0;
    s->n_paths = cfg->n_paths;
    s->ssd_budget = cfg->ssd_budget_bytes;
    s->host_budget = cfg->host_budget_bytes;
    atomic_init(&s->verify, cfg->skip_checksums ? 0 : 1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->changed, NULL);
    st_status st = ST_OK;
    if (s->read_only && cfg->mode != STORE_OPEN_EXISTING)
        st = st_fail(err, ST_EINVAL, "a read-only store can only be opened (STORE_OPEN_EXISTING), not created");
    if (cfg->previous && (!s->read_only || cfg->mode != STORE_OPEN_EXISTING))
        st = st_fail(err, ST_EINVAL, "the commit before the last can only be opened read-only");
    for (int p = 0; p < s->n_paths && st == ST_OK; p++) {
        if (!cfg->paths[p] || !cfg->paths[p][0] || strlen(cfg->paths[p]) > PATH_MAX - 64) {
            st = st_fail(err, ST_EINVAL, "store path %d is empty or too long", p);
            break;
        }
        s->dirs[p] = strdup(cfg->paths[p]);
        if (!s->dirs[p]) st = st_fail(err, ST_ENOMEM, "store: out of memory");
        for (int q = 0; q < p && st == ST_OK; q++)
            if (!strcmp(s->dirs[q], s->dirs[p])) st = st_fail(err, ST_EINVAL, "store path %s is listed twice", s->dirs[p]);
    }

    /* Preflight: every path usable, with the space the caller expects to need. */
    io_preflight_path pre[STORE_MAX_PATHS];
    memset(pre, 0, sizeof pre);
    for (int p = 0; p < s->n_paths && st == ST_OK; p++)
        pre[p] = (io_preflight_path){.dir = s->dirs[p], .need_bytes = cfg->reserve_bytes / (uint64_t)s->n_paths};
    if (st == ST_OK && s->read_only) st = preflight_read_only(s, pre, err);
    else if (st == ST_OK) st = io_preflight(pre, s->n_paths, cfg->allow_buffered, warning, warning_cap, err);
    if (st == ST_OK) st = lock_store(s, err);

    char manifest_path[PATH_MAX];
    if (st == ST_OK) {
        store_path_join(manifest_path, sizeof manifest_path, s->dirs[0], STORE_MANIFEST_NAME);
        int exists = access(manifest_path, F_OK) == 0;
        char prev_path[PATH_MAX];
        store_path_join(prev_path, sizeof prev_path, s->dirs[0], STORE_MANIFEST_PREV);
        if (cfg->mode == STORE_CREATE && exists)
            st = st_fail(err, ST_EEXIST, "a store already exists in %s (%s)", s->dirs[0], STORE_MANIFEST_NAME);
        else if (cfg->mode == STORE_OPEN_EXISTING && !exists)
            st = st_fail(err, ST_ENOENT, "no store in %s (no %s)", s->dirs[0], STORE_MANIFEST_NAME);
        else if (cfg->previous && access(prev_path, F_OK) != 0)
            st = st_fail(err, ST_ENOENT, "the store in %s keeps no commit before its last (no %s: it has written "
                         "since)", s->dirs[0], STORE_MANIFEST_PREV);
        if (cfg->previous) memcpy(manifest_path, prev_path, sizeof manifest_path);
        s->keeps_previous = exists && !s->read_only && access(prev_path, F_OK) == 0;
        if (st == ST_OK && cfg->engine) {
            s->engine = cfg->engine;
        } else if (st == ST_OK) {
            st = io_engine_create(&cfg->io, &s->engine, err);
            s->own_engine = st == ST_OK;
        }
        for (int p = 0; p < s->n_paths && st == ST_OK; p++) {
            io_path_options opt = {.buffered = !pre[p].direct_ok};
            st = io_engine_add_path(s->engine, s->dirs[p], &opt, &s->path_id[p], err);
        }
        if (st == ST_OK) {
            if (exists) st = open_existing(s, manifest_path, err);
            else st = create_store(s, cfg, err);
        }
        if (st == ST_OK && !s->read_only) {
            char tmp[PATH_MAX];
            store_path_join(tmp, sizeof tmp, s->dirs[0], STORE_MANIFEST_TMP);
            unlink(tmp);   /* left by a crash inside a commit: never part of the store */
        }
    }
    if (st != ST_OK) {
        store_close(s);
        return st;
    }
    *out = s;
    return ST_OK;
}

st_status store_open_read_only(const store_dirs *d, int previous, store **out, st_error *err) {
    store_config sc = store_default_config();
    sc.paths = d->paths;
    sc.n_paths = d->n;
    sc.mode = STORE_OPEN_EXISTING;
    sc.read_only = 1;
    sc.previous = previous;
    return store_open(&sc, out, NULL, 0, err);
}

void store_close(store *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    while (s->ops_inflight > 0 || s->committing) pthread_cond_wait(&s->changed, &s->mu);
    pthread_mutex_unlock(&s->mu);
    for (int p = 0; p < s->n_paths; p++) io_file_close(s->data[p]);
    if (s->own_engine) io_engine_destroy(s->engine);
    for (int i = 0; i < s->n_tensors; i++) tensor_free(s->list[i]);
    for (int i = 0; i < s->n_grave; i++) tensor_free(s->grave[i]);
    for (int p = 0; p < s->n_paths; p++) {
        space_free_all(&s->space[p]);
        free(s->dirs[p]);
    }
    st_lock_release(&s->lock_fd);
    free(s->list);
    free(s->hash);
    free(s->grave);
    free(s->meta);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->changed);
    free(s);
}
