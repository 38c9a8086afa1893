/* store_manifest.c - the manifest's binary form (docs/STORE.md):
 *
 *   header   64 bytes: "STRATAMF", version, header size, store id,
 *            generation, body size, path count, tensor count, chunk size,
 *            user-metadata size
 *   body     per path: u32 stripe weight
 *            user metadata, padded to 8
 *            per tensor: kind, block, index, tier, flags, slot, bytes,
 *            chunk count, one u64 region offset per path, then (when
 *            slot >= 0) one u32 CRC32C per chunk, padded to 8
 *   trailer  u32 CRC32C of header and body, "MEND"
 *
 * all little-endian, zero padded to a multiple of 4096 for O_DIRECT. */
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "strata/checksum.h"

#define MANIFEST_MAGIC "STRATAMF"
#define MANIFEST_END "MEND"
#define MANIFEST_VERSION 1u
#define HEADER_BYTES 64u
#define TENSOR_FIXED_BYTES 40u

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static size_t tensor_bytes(const manifest *m, const manifest_tensor *t) {
    return TENSOR_FIXED_BYTES + 8u * (size_t)m->n_paths + (t->slot >= 0 ? pad8(4u * (size_t)t->n_chunks) : 0);
}

static size_t body_bytes(const manifest *m) {
    size_t n = pad8(4u * (size_t)m->n_paths) + pad8(m->meta_n);
    for (int i = 0; i < m->n_tensors; i++) n += tensor_bytes(m, &m->tensors[i]);
    return n;
}

size_t manifest_encoded_size(const manifest *m) {
    size_t n = HEADER_BYTES + body_bytes(m) + 8;
    return (n + STORE_ALIGN - 1) / STORE_ALIGN * STORE_ALIGN;
}

static unsigned char *put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 4;
}
static unsigned char *put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
    return p + 8;
}
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void manifest_encode(const manifest *m, unsigned char *buf) {
    size_t total = manifest_encoded_size(m), body = body_bytes(m);
    memset(buf, 0, total);
    unsigned char *p = buf;
    memcpy(p, MANIFEST_MAGIC, 8);
    p = put32(p + 8, MANIFEST_VERSION);
    p = put32(p, HEADER_BYTES);
    p = put64(p, m->store_id);
    p = put64(p, m->generation);
    p = put64(p, body);
    p = put32(p, (uint32_t)m->n_paths);
    p = put32(p, (uint32_t)m->n_tensors);
    p = put64(p, m->chunk_bytes);
    p = put32(p, (uint32_t)m->meta_n);
    p = put32(p, 0);
    p = buf + HEADER_BYTES;
    for (int i = 0; i < m->n_paths; i++) p = put32(p, m->weight[i]);
    p = buf + HEADER_BYTES + pad8(4u * (size_t)m->n_paths);
    if (m->meta_n) memcpy(p, m->meta, m->meta_n);
    p += pad8(m->meta_n);
    for (int i = 0; i < m->n_tensors; i++) {
        const manifest_tensor *t = &m->tensors[i];
        unsigned char *start = p;
        p = put32(p, (uint32_t)t->key.kind);
        p = put32(p, (uint32_t)t->key.block);
        p = put32(p, (uint32_t)t->key.index);
        p = put32(p, t->tier);
        p = put32(p, t->flags);
        p = put32(p, (uint32_t)t->slot);
        p = put64(p, t->bytes);
        p = put32(p, t->n_chunks);
        p = put32(p, 0);
        for (int k = 0; k < m->n_paths; k++) p = put64(p, t->ext_off[k]);
        if (t->slot >= 0)
            for (uint32_t c = 0; c < t->n_chunks; c++) p = put32(p, t->crc[c]);
        p = start + tensor_bytes(m, t);
    }
    uint32_t crc = st_crc32c(0, buf, HEADER_BYTES + body);
    p = put32(buf + HEADER_BYTES + body, crc);
    memcpy(p, MANIFEST_END, 4);
}

void manifest_free(manifest *m) {
    if (m->tensors)
        for (int i = 0; i < m->n_tensors; i++) free(m->tensors[i].crc);
    free(m->tensors);
    free(m->meta);
    memset(m, 0, sizeof *m);
}

st_status manifest_decode(const unsigned char *buf, size_t n, const char *file, manifest *m, st_error *err) {
    memset(m, 0, sizeof *m);
    if (n < HEADER_BYTES + 8 || memcmp(buf, MANIFEST_MAGIC, 8) != 0)
        return st_fail(err, ST_ECORRUPT, "%s is not a strata store manifest (bad magic)", file);
    uint32_t version = get32(buf + 8), hbytes = get32(buf + 12);
    if (version != MANIFEST_VERSION)
        return st_fail(err, ST_EUNSUPPORTED, "%s: manifest version %u, this build reads version %u", file, version,
                       MANIFEST_VERSION);
    uint64_t body = get64(buf + 32);
    if (hbytes != HEADER_BYTES || body > n - HEADER_BYTES - 8)
        return st_fail(err, ST_ECORRUPT, "%s: manifest length fields are inconsistent (file has %zu bytes)", file, n);
    uint32_t want = get32(buf + HEADER_BYTES + body), got = st_crc32c(0, buf, HEADER_BYTES + body);
    if (want != got || memcmp(buf + HEADER_BYTES + body + 4, MANIFEST_END, 4) != 0)
        return st_fail(err, ST_ECORRUPT, "%s: manifest checksum mismatch (stored %08x, computed %08x)", file, want, got);
    m->store_id = get64(buf + 16);
    m->generation = get64(buf + 24);
    m->n_paths = (int)get32(buf + 40);
    m->n_tensors = (int)get32(buf + 44);
    m->chunk_bytes = get64(buf + 48);
    m->meta_n = get32(buf + 56);
    if (m->n_paths < 1 || m->n_paths > STORE_MAX_PATHS || m->n_tensors < 0 || m->meta_n > STORE_META_MAX ||
        m->chunk_bytes == 0 || m->chunk_bytes % STORE_ALIGN)
        return st_fail(err, ST_ECORRUPT, "%s: manifest header values out of range", file);
    const unsigned char *p = buf + HEADER_BYTES, *end = buf + HEADER_BYTES + body;
    size_t fixed = pad8(4u * (size_t)m->n_paths) + pad8(m->meta_n);
    /* Every tensor record takes at least its fixed part: a count the body
     * cannot hold is refused before it sizes an allocation. */
    if ((size_t)(end - p) < fixed ||
        (uint64_t)m->n_tensors > ((size_t)(end - p) - fixed) / (TENSOR_FIXED_BYTES + 8u * (size_t)m->n_paths))
        return st_fail(err, ST_ECORRUPT, "%s: manifest body too short", file);
    for (int i = 0; i < m->n_paths; i++) m->weight[i] = get32(p + 4 * i);
    p += pad8(4u * (size_t)m->n_paths);
    if (m->meta_n) {
        m->meta = malloc(m->meta_n);
        if (!m->meta) return st_fail(err, ST_ENOMEM, "%s: out of memory", file);
        memcpy(m->meta, p, m->meta_n);
    }
    p += pad8(m->meta_n);
    m->tensors = calloc((size_t)(m->n_tensors ? m->n_tensors : 1), sizeof *m->tensors);
    if (!m->tensors) {
        manifest_free(m);
        return st_fail(err, ST_ENOMEM, "%s: out of memory for %d tensors", file, m->n_tensors);
    }
    int decoded = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        manifest_tensor *t = &m->tensors[i];
        if ((size_t)(end - p) < TENSOR_FIXED_BYTES + 8u * (size_t)m->n_paths) break;
        t->key.kind = (store_kind)get32(p);
        t->key.block = (int32_t)get32(p + 4);
        t->key.index = (int32_t)get32(p + 8);
        t->tier = get32(p + 12);
        t->flags = get32(p + 16);
        t->slot = (int32_t)get32(p + 20);
        t->bytes = get64(p + 24);
        t->n_chunks = get32(p + 32);
        for (int k = 0; k < m->n_paths; k++) t->ext_off[k] = get64(p + TENSOR_FIXED_BYTES + 8 * k);
        /* Not (bytes + chunk - 1) / chunk: that wraps for sizes near 2^64. */
        uint64_t chunks = t->bytes / m->chunk_bytes + (t->bytes % m->chunk_bytes != 0);
        if ((unsigned)t->key.kind >= STORE_MANIFEST || t->tier > STORE_TIER_HOST || t->slot < -1 || t->slot > 1 ||
            t->bytes == 0 || chunks != t->n_chunks || (size_t)(end - p) < tensor_bytes(m, t))
            break;
        if (t->slot >= 0) {
            t->crc = malloc(4u * (size_t)t->n_chunks);
            if (!t->crc) break;
            const unsigned char *c = p + TENSOR_FIXED_BYTES + 8u * (size_t)m->n_paths;
            for (uint32_t k = 0; k < t->n_chunks; k++) t->crc[k] = get32(c + 4 * k);
        }
        p += tensor_bytes(m, t);
        decoded++;
    }
    if (decoded != m->n_tensors) {
        int bad = decoded;
        manifest_free(m);
        return st_fail(err, ST_ECORRUPT, "%s: manifest record of tensor %d is malformed", file, bad);
    }
    return ST_OK;
}
