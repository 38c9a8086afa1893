/*
 * tokenizer_internal.h - the tokenizer's insides, shared by its two loaders
 * (tokenizer.c: GPT-2's files; tokenizer_json.c: tokenizer.json) and open to
 * its tests and benchmarks; not part of the data layer's contract.
 *
 * A loader fills in the vocabulary (every id's bytes, which ids the BPE
 * model owns), calls tok_index_vocab, tok_set_merges and tok_add_token, sets
 * the pre-split rule and class table, and ends with tok_finish.
 */
#ifndef STRATA_DATA_TOKENIZER_INTERNAL_H
#define STRATA_DATA_TOKENIZER_INTERNAL_H

#include "data/unicode_tables.h"
#include "strata/tokenizer.h"

/* The pre-split regexes this build knows (see strata/tokenizer.h). */
typedef enum tok_pretok {
    PRETOK_GPT2,     /* GPT-2's */
    PRETOK_LLAMA3,   /* Llama 3's: \p{N}{1,3} */
    PRETOK_QWEN2,    /* Qwen2's: Llama 3's with \p{N} */
} tok_pretok;

typedef struct tok_merge_slot {
    uint64_t key;        /* (left << 32) | right; UINT64_MAX = empty */
    int32_t rank, merged;
} tok_merge_slot;

typedef struct tok_cache_slot {
    uint32_t hash;
    uint32_t off;                   /* into arena: key bytes, then n_ids int32 (aligned) */
    uint16_t len, n_ids;            /* len == 0: empty */
} tok_cache_slot;

/* An added token: matched in the text by its content before the pre-split. */
typedef struct tok_added {
    char *content;
    uint32_t len;
    int32_t id;
    uint8_t special;
    uint8_t normalized;             /* matched in the second pass (the library's order) */
} tok_added;

struct tokenizer {
    int n_vocab;                    /* all ids: [0, n_model) the BPE model's, then added tokens */
    int n_model;
    char *tok_bytes;                /* every token's bytes (what decoding gives), concatenated */
    uint32_t *tok_off;              /* [n_vocab + 1] */
    uint8_t *special;               /* [n_vocab]: 1 for a special token */
    int32_t byte_id[256];
    /* the model's tokens by bytes (merge results, ignore_merges, token_id) */
    int32_t *vocab_slot;            /* id or -1 */
    uint32_t vocab_mask;
    /* merges: (left id, right id) -> (rank, merged id) */
    tok_merge_slot *merges;
    uint64_t merge_mask;
    int32_t *merge_list;            /* [2 n_merges]: the pairs in file order (fingerprint) */
    int n_merges;
    int ignore_merges;
    /* pre-split */
    tok_pretok pretok;
    const uni_range *ranges;
    size_t n_ranges;
    uint8_t *bmp_class;             /* class of each code point below 0x10000 */
    /* added tokens (file order until tok_finish sorts them for matching) */
    tok_added *added;
    int n_added, cap_added;
    struct tok_added_index *added_ix;
    int added_has_newline;          /* (then `strata prepare` must not cut text at newlines) */
    /* what it is */
    int32_t bos, eos, doc_sep;
    uint64_t fingerprint;
    char name[16];
    char *source;
    /* encode cache and scratch (why encoding is single-threaded per tokenizer) */
    tok_cache_slot *cache;
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

/* ---- for loaders ------------------------------------------------------------ */

tokenizer *tok_new(void);
/* Builds the bytes -> id table over the model's ids [0, n_model). Fails with
 * ST_ECORRUPT naming `what` if two ids have the same bytes or a byte has no
 * token. */
st_status tok_index_vocab(tokenizer *t, const char *what, st_error *err);
/* The model's id with exactly these bytes, or -1. */
int32_t tok_find_bytes(const tokenizer *t, const char *p, size_t n);
/* Sets the merges from pairs[2 n] in rank order: a pair given twice takes
 * its last rank, as the library (and OpenAI's dict of ranks) do. Fails with
 * ST_ECORRUPT naming `what` and the merge if the merged token is not in the
 * vocabulary. */
st_status tok_set_merges(tokenizer *t, const int32_t *pairs, size_t n, const char *what, st_error *err);
/* Adds an added token (content copied); the caller has settled its id. */
st_status tok_add_token(tokenizer *t, const char *content, size_t len, int32_t id, int special, int normalized,
                        st_error *err);
/* Classes, cache, fingerprint, document separator; then t is usable. */
st_status tok_finish(tokenizer *t, st_error *err);

/* Reads a whole file (NUL-terminated; *size excludes the NUL). Errors name it. */
st_status tok_read_file(const char *path, char **data, size_t *size, st_error *err);
/* Reads a JSON file with cJSON (tokenizer_json.c): *root on success; else
 * ST_ENOENT/ST_EIO, or ST_ECORRUPT naming the file, line and byte. */
struct cJSON;
st_status tok_read_json(const char *path, struct cJSON **root, st_error *err);

/* Sets the model's vocabulary [0, n) from a JSON object of token strings (in
 * the byte alphabet) to ids, which must be exactly 0..n-1, then indexes it
 * (tok_index_vocab). Errors name path and `where` (a field, or ""); a token
 * outside the alphabet fails with status `outside`. */
st_status tok_set_vocab(tokenizer *t, const struct cJSON *vocab, const int16_t *byte_of_cp, const char *path,
                        const char *where, st_status outside, st_error *err);

/* GPT-2's byte <-> unicode alphabet (bytes_to_unicode in OpenAI's encoder). */
void tok_byte_alphabet(uint32_t cp_of_byte[256], int16_t byte_of_cp[512]);
/* Converts a string in that alphabet (UTF-8 p[0, n)) to raw bytes in out (at
 * most n bytes). Returns the length, or -1 for a character outside it. */
long tok_unicode_to_bytes(const int16_t *byte_of_cp, const char *p, size_t n, char *out);
/* 1 if p[0, n) is valid UTF-8. */
int tok_utf8_valid(const char *p, size_t n);

/* tokenizer_load_json of text[0, len) (NUL-terminated at len) instead of a
 * file; name stands for the path in errors. For the fuzz target. */
st_status tok_load_json_text(tokenizer **out, const char *text, size_t len, const char *name, st_error *err);

/* ---- for tests and benchmarks --------------------------------------------------- */

/* Pre-splits text[0, len) (no added tokens, no BPE): writes the end offset
 * of each piece to ends[] (up to cap of them) and returns how many pieces
 * there are (which may exceed cap). */
size_t tokenizer_pretokenize(const tokenizer *tok, const char *text, size_t len, size_t *ends, size_t cap);

#endif
