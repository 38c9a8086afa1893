/*
 * strata/tokenizer.h - byte-level BPE tokenizers: OpenAI's GPT-2 files and
 * Hugging Face tokenizer.json files (GPT-2, Llama 3, Qwen2 and the like).
 *
 * One tokenizer type and one BPE engine serve both sources. Encoding:
 *
 *   1. added tokens (tokenizer.json "added_tokens"; GPT-2's <|endoftext|>)
 *      are found in the text first, leftmost-longest, as Hugging Face's
 *      library does; the text between them goes through steps 2 and 3;
 *   2. a pre-split regex cuts the text into pieces: GPT-2's
 *         's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      or Llama 3's (Qwen2's is the same with \p{N} for \p{N}{1,3})
 *         (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *         ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *      (hand-written matchers; no other regex is accepted);
 *   3. each piece's bytes are merged by BPE rank (lowest rank first, leftmost
 *      on ties); with ignore_merges (Llama 3) a piece that is a token as a
 *      whole is that token.
 *
 * The classes \p{L}, \p{N} and \s depend on the regex engine, and so on the
 * source: GPT-2's own files use node's (the JavaScript encoder gpt-3-encoder
 * that made tests/fixtures/tokenizer_vectors.tsv, Unicode 17), tokenizer.json
 * files use Oniguruma's as Hugging Face's tokenizers library (0.22) runs it
 * (Unicode 16; \s has U+0085 but not U+FEFF). src/data/unicode_tables.c has
 * both; tools/gen_unicode_tables.js makes them from the engines themselves.
 *
 * Any byte string is accepted, invalid UTF-8 included (the library itself
 * only takes valid UTF-8): a byte that does not start a valid UTF-8 sequence
 * counts as one character of the class [^\s\p{L}\p{N}]. Pieces are byte
 * ranges and BPE works on bytes, so decode(encode(x)) == x for every x.
 *
 * Special tokens (added tokens marked "special", and GPT-2's <|endoftext|>)
 * written in the text are plain text unless TOKENIZER_ALLOW_SPECIAL is
 * passed, as in OpenAI's encoder (the library's encode_special_tokens mode);
 * with it they become their ids, as the library does by default. Added
 * tokens not marked special are always matched, as in the library.
 *
 *     tokenizer *tok;
 *     st_error err = {0};
 *     if (tokenizer_load_default(&tok, &err) != ST_OK) { ...err.msg... }
 *     int32_t *ids; size_t n;
 *     tokenizer_encode(tok, "Hello world", 11, &ids, &n, &err);   // {15496, 995}
 *     char *text; size_t len;
 *     tokenizer_decode(tok, ids, n, &text, &len, &err);            // "Hello world"
 *     free(ids); free(text); tokenizer_free(tok);
 *
 * Threading: encoding updates a per-tokenizer cache of recent words, so one
 * tokenizer must not encode on two threads at once (load one per thread).
 * Everything else only reads and may run concurrently.
 */
#ifndef STRATA_TOKENIZER_H
#define STRATA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Facts of GPT-2's vocabulary (the default). */
#define GPT2_EOT 50256
#define GPT2_VOCAB_SIZE 50257
#define GPT2_EOT_TEXT "<|endoftext|>"

/* Flags for tokenizer_encode_append. */
#define TOKENIZER_ALLOW_SPECIAL 1u   /* special tokens written in the text -> their ids */

typedef struct tokenizer tokenizer;

/* ---- loading ------------------------------------------------------------- */

/* Loads OpenAI's GPT-2 files, encoder.json and vocab.bpe. Fails with
 * ST_ENOENT/ST_EIO naming the file, or ST_ECORRUPT naming the file and
 * line/offset if either is not a GPT-2 vocabulary (every merge result and
 * every byte must have an id). <|endoftext|> (the last id) is its one
 * special token. */
st_status tokenizer_load_gpt2(tokenizer **out, const char *encoder_json, const char *vocab_bpe, st_error *err);
/* GPT-2 from $STRATA_VOCAB_DIR if set, else from <source dir>/vocab/ (where
 * scripts/setup.sh puts the files). The error says how to fetch them. */
st_status tokenizer_load_default(tokenizer **out, st_error *err);
/* Loads a Hugging Face tokenizer.json. Accepted: a BPE model (vocab; merges
 * as "a b" strings or ["a", "b"] pairs; ignore_merges; dropout null,
 * byte_fallback false, no unk_token, continuing_subword_prefix and
 * end_of_word_suffix null or ""), no normalizer, the pre-tokenizer ByteLevel
 * (use_regex true, add_prefix_space false) or Sequence [Split(one of the
 * regexes above, behavior Isolated, invert false), ByteLevel(use_regex
 * false)], the ByteLevel decoder, post-processors ByteLevel,
 * TemplateProcessing and Sequences of them, added tokens with lstrip,
 * rstrip and single_word false, truncation and padding null. Anything else
 * fails with ST_EUNSUPPORTED naming the file and the field (quoting a regex);
 * malformed JSON fails with ST_ECORRUPT naming the file, line and byte; a
 * missing file ST_ENOENT. */
st_status tokenizer_load_json(tokenizer **out, const char *path, st_error *err);
/* What --tokenizer takes: a tokenizer.json file, or a directory holding one
 * (a model directory); NULL or "" loads the default (tokenizer_load_default),
 * so a command passes its flag's value as it is. */
st_status tokenizer_load_path(tokenizer **out, const char *path, st_error *err);
/* Finds GPT-2's vocabulary directory the way tokenizer_load_default does:
 * $STRATA_VOCAB_DIR if set (it must hold the files), else the first of
 * <source dir>/vocab (the tree this was built from), <dir of the running
 * program>/../vocab and ./vocab that holds encoder.json and vocab.bpe.
 * ST_ENOENT lists the places tried and how to fetch the files. */
st_status tokenizer_find_vocab_dir(char *dir, size_t cap, st_error *err);
void tokenizer_free(tokenizer *tok);

/* ---- encoding and decoding ------------------------------------------------ */

/* Encodes text[0, len) (any bytes; NUL is an ordinary byte), special tokens
 * as plain text. *ids is allocated with malloc (never NULL on success, even
 * for n = 0); the caller frees it. */
st_status tokenizer_encode(tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids, st_error *err);
/* Appends the ids of text to a growable array (*ids of capacity *cap holding
 * *n_ids, realloc'd as needed; start with NULL, 0, 0). flags:
 * TOKENIZER_ALLOW_SPECIAL. */
st_status tokenizer_encode_append(tokenizer *tok, const char *text, size_t len, unsigned flags, int32_t **ids,
                                  size_t *n_ids, size_t *cap, st_error *err);
/* Decodes ids to bytes, exactly (the library then makes a string of them,
 * replacing invalid UTF-8 with U+FFFD). *text is malloc'd and NUL-terminated
 * (len excludes the NUL); the caller frees it. Fails with ST_EINVAL naming
 * the position of an id outside [0, tokenizer_vocab_size). */
st_status tokenizer_decode(const tokenizer *tok, const int32_t *ids, size_t n, char **text, size_t *len, st_error *err);
/* The bytes of one token (not NUL-terminated; *len set), or NULL for an id
 * out of range. Valid until tokenizer_free. For streaming output. */
const char *tokenizer_token_bytes(const tokenizer *tok, int32_t id, size_t *len);
/* The id of a token by its text (an added token's content, or a vocabulary
 * token's bytes), or -1. */
int32_t tokenizer_token_id(const tokenizer *tok, const char *text, size_t len);
/* 1 if id is a special token (GPT-2's <|endoftext|>; added tokens marked so). */
int tokenizer_is_special(const tokenizer *tok, int32_t id);

/* ---- what it is ------------------------------------------------------------- */

/* Number of ids: the model's vocabulary plus the added tokens. */
int tokenizer_vocab_size(const tokenizer *tok);
/* A short name: "gpt2" for GPT-2's files; for tokenizer.json the family its
 * pre-tokenizer belongs to ("gpt2", "llama3", "qwen2"). */
const char *tokenizer_name(const tokenizer *tok);
/* Where it was loaded from: the tokenizer.json path, or
 * "<dir>/encoder.json + <dir>/vocab.bpe". */
const char *tokenizer_source(const tokenizer *tok);
/* 64-bit FNV-1a over the vocabulary's content: every id's bytes in id
 * order, the merges (as id pairs) in rank order, and the added tokens (id,
 * content, special). GPT-2's files and a tokenizer.json of the same
 * vocabulary give the same value; any change to a token, a merge or an added
 * token changes it. The pre-split rules are not part of it. */
uint64_t tokenizer_fingerprint(const tokenizer *tok);
/* The ids the post-processor puts before (BOS) and after (EOS) a sequence,
 * from a TemplateProcessing "single" template; -1 when there is none (GPT-2).
 * Only the first such token of each side is reported. */
int32_t tokenizer_bos_id(const tokenizer *tok);
int32_t tokenizer_eos_id(const tokenizer *tok);
/* The token `strata prepare` puts before each document: the BOS when the
 * template has one (Llama 3: <|begin_of_text|>), else the special token
 * "<|endoftext|>" (GPT-2), else the special added token with the lowest id;
 * -1 when the vocabulary has no special token. */
int32_t tokenizer_doc_separator(const tokenizer *tok);

#ifdef __cplusplus
}
#endif
#endif
