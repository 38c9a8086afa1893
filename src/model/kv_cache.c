/* kv_cache.c - the cache of keys and values of generation (strata/generate.h). */
#include <string.h>

#include "strata/generate.h"

static size_t layer_floats(const kv_cache *c) { return (size_t)c->n_kv_head * c->max_len * c->head_size; }

size_t kv_cache_bytes(int n_layer, int n_kv_head, int head_size, int max_len) {
    return 2 * (size_t)n_layer * n_kv_head * (size_t)max_len * head_size * sizeof(float);
}

st_status kv_cache_create(kv_cache *c, const compute_backend *be, int n_layer, int n_kv_head, int head_size,
                          int max_len, st_error *err) {
    memset(c, 0, sizeof *c);
    if (n_layer < 1 || n_kv_head < 1 || head_size < 1 || max_len < 1)
        return st_fail(err, ST_EINVAL, "a cache of %d layers, %d heads of %d, %d positions: every size must be >= 1",
                       n_layer, n_kv_head, head_size, max_len);
    *c = (kv_cache){.be = be, .n_layer = n_layer, .n_kv_head = n_kv_head, .head_size = head_size, .max_len = max_len};
    const size_t half = kv_cache_bytes(n_layer, n_kv_head, head_size, max_len) / 2;
    c->k = be->alloc(be, half);
    c->v = be->alloc(be, half);
    if (!c->k || !c->v) {
        char buf[32];
        kv_cache_free(c);
        return st_fail(err, ST_ENOMEM, "out of memory allocating a cache of keys and values (%s) on the %s backend",
                       st_format_bytes(2.0 * (double)half, buf, sizeof buf), be->name);
    }
    return ST_OK;
}

void kv_cache_free(kv_cache *c) {
    if (c->be) {
        c->be->free(c->be, c->k);
        c->be->free(c->be, c->v);
    }
    c->k = c->v = NULL;
}

float *kv_cache_k(const kv_cache *c, int layer) { return c->k + (size_t)layer * layer_floats(c); }
float *kv_cache_v(const kv_cache *c, int layer) { return c->v + (size_t)layer * layer_floats(c); }
