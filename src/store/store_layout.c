/* store_layout.c - which path each chunk of a tensor lives on, and where on
 * that path's data file the tensor's region is. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"

void layout_weights_from_doubles(int n, const double *w, uint32_t *out) {
    double max = 0, rel[STORE_MAX_PATHS];
    for (int i = 0; i < n; i++)
        if (w && isfinite(w[i]) && w[i] > max) max = w[i];
    for (int i = 0; i < n; i++) rel[i] = (w && max > 0 && isfinite(w[i]) && w[i] > 0) ? w[i] / max : 1.0;
    /* The smallest scale whose integers match the ratios within 1% (a short
     * period spreads small tensors better), else the best up to the limit. */
    double best_err = 1e300;
    for (int m = 1; m <= STORE_WEIGHT_SCALE; m++) {
        uint32_t cand[STORE_MAX_PATHS];
        double e = 0;
        for (int i = 0; i < n; i++) {
            long v = lround(rel[i] * m);
            cand[i] = (uint32_t)(v < 1 ? 1 : v);
            double d = fabs((double)cand[i] / m - rel[i]) / rel[i];
            if (d > e) e = d;
        }
        if (e < best_err - 1e-12) {
            best_err = e;
            memcpy(out, cand, (size_t)n * sizeof *out);
        }
        if (e <= 0.01) break;
    }
}

st_status layout_init(store_layout *l, int n_paths, const uint32_t *weights, uint64_t chunk_bytes, st_error *err) {
    memset(l, 0, sizeof *l);
    if (n_paths < 1 || n_paths > STORE_MAX_PATHS)
        return st_fail(err, ST_EINVAL, "a store needs 1 to %d paths, not %d", STORE_MAX_PATHS, n_paths);
    if (chunk_bytes == 0 || chunk_bytes % STORE_ALIGN || chunk_bytes > (1ull << 30))
        return st_fail(err, ST_EINVAL, "store chunk size %llu must be a multiple of %u and at most 1 GiB",
                       (unsigned long long)chunk_bytes, STORE_ALIGN);
    l->n_paths = n_paths;
    l->chunk_bytes = chunk_bytes;
    for (int p = 0; p < n_paths; p++) {
        if (weights[p] < 1 || weights[p] > STORE_WEIGHT_SCALE)
            return st_fail(err, ST_ECORRUPT, "stripe weight %u of path %d is out of range [1, %d]", weights[p], p,
                           STORE_WEIGHT_SCALE);
        l->weight[p] = weights[p];
        l->period += weights[p];
    }
    /* Smooth weighted round robin: interleaves paths evenly within a period,
     * so that consecutive chunks go to different drives. */
    int64_t current[STORE_MAX_PATHS] = {0};
    uint32_t seen[STORE_MAX_PATHS] = {0};
    for (uint32_t j = 0; j < l->period; j++) {
        int best = 0;
        for (int p = 0; p < n_paths; p++) {
            current[p] += l->weight[p];
            if (current[p] > current[best]) best = p;
        }
        current[best] -= l->period;
        l->pattern[j] = (uint8_t)best;
        l->rank[j] = seen[best]++;
    }
    return ST_OK;
}

void layout_slot_lengths(const store_layout *l, uint64_t bytes, uint64_t *slot_len) {
    for (int p = 0; p < l->n_paths; p++) slot_len[p] = 0;
    uint64_t n = (bytes + l->chunk_bytes - 1) / l->chunk_bytes;
    if (n == 0) return;
    for (int p = 0; p < l->n_paths; p++) {
        /* Chunks on p among the first n: whole periods, then the partial one. */
        uint64_t whole = n / l->period, rest = n % l->period, cnt = whole * l->weight[p];
        for (uint64_t j = 0; j < rest; j++) cnt += l->pattern[j] == p;
        slot_len[p] = cnt * l->chunk_bytes;
    }
    /* The last chunk is stored padded to the alignment only. */
    uint64_t last = bytes - (n - 1) * l->chunk_bytes;
    int lp = layout_chunk_path(l, n - 1);
    slot_len[lp] -= l->chunk_bytes - (last + STORE_ALIGN - 1) / STORE_ALIGN * STORE_ALIGN;
}

/* ---- space ---------------------------------------------------------------- */

static st_status insert_at(store_space *sp, int i, uint64_t off, uint64_t len, st_error *err) {
    if (sp->n == sp->cap) {
        int cap = sp->cap ? sp->cap * 2 : 64;
        store_extent *u = realloc(sp->used, (size_t)cap * sizeof *u);
        if (!u) return st_fail(err, ST_ENOMEM, "store: out of memory for the extent list");
        sp->used = u;
        sp->cap = cap;
    }
    memmove(&sp->used[i + 1], &sp->used[i], (size_t)(sp->n - i) * sizeof *sp->used);
    sp->used[i] = (store_extent){off, len};
    sp->n++;
    return ST_OK;
}

st_status space_alloc(store_space *sp, uint64_t len, uint64_t *off, st_error *err) {
    uint64_t pos = 0;
    int i = 0;
    for (; i < sp->n; i++) {
        if (sp->used[i].off - pos >= len) break;
        pos = sp->used[i].off + sp->used[i].len;
    }
    st_status s = insert_at(sp, i, pos, len, err);
    if (s == ST_OK) *off = pos;
    return s;
}

st_status space_claim(store_space *sp, uint64_t off, uint64_t len, st_error *err) {
    int i = 0;
    while (i < sp->n && sp->used[i].off < off) i++;
    if ((i > 0 && sp->used[i - 1].off + sp->used[i - 1].len > off) || (i < sp->n && off + len > sp->used[i].off))
        return st_fail(err, ST_ECORRUPT, "extent [%llu, %llu) overlaps another tensor's", (unsigned long long)off,
                       (unsigned long long)(off + len));
    return insert_at(sp, i, off, len, err);
}

void space_release(store_space *sp, uint64_t off, uint64_t len) {
    for (int i = 0; i < sp->n; i++) {
        if (sp->used[i].off == off && sp->used[i].len == len) {
            memmove(&sp->used[i], &sp->used[i + 1], (size_t)(sp->n - i - 1) * sizeof *sp->used);
            sp->n--;
            return;
        }
    }
}

uint64_t space_end(const store_space *sp) {
    return sp->n ? sp->used[sp->n - 1].off + sp->used[sp->n - 1].len : 0;
}

void space_free_all(store_space *sp) {
    free(sp->used);
    memset(sp, 0, sizeof *sp);
}
