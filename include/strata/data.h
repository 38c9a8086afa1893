/*
 * strata/data.h - training data: token files, datasets, and `strata prepare`.
 *
 * A token file is a flat sequence of token ids in one of two formats, told
 * apart by the first 8 bytes (docs/FORMATS.md has the details):
 *
 *   - a strata shard: a 64-byte header (magic "\xff\xffSTRATA", version,
 *     token width, token count, vocab size, CRC32C of the tokens, CRC32C of
 *     the header) followed by little-endian uint16 (or uint32) ids;
 *   - nanoGPT's raw format: little-endian uint16 ids and nothing else.
 *
 * A file named *.tok must be a shard. Raw ids carry no mark of what they
 * are (any file of even size would pass), so a file without the magic is
 * read as raw uint16 only where its format is certain: its name ends in
 * .bin (nanoGPT's), or the caller says so (TOKEN_FORMAT_U16, --data-format
 * u16). Anything else is refused, text with the advice to run `strata
 * prepare`. The magic starts with 0xffff, an id no GPT-2 file can hold, so a
 * raw file is never mistaken for a shard, and a file that starts with 0xffff
 * but not the full magic is reported as a damaged shard.
 * token_file_open checks a shard's header and checksum (reading the file once).
 *
 * A dataset is a directory written by dataset_prepare / `strata prepare`:
 *   DIR/train.tok, DIR/val.tok   shards of the training and validation splits
 *   DIR/meta.json                what made them (tokenizer and its fingerprint,
 *                                sources, counts)
 * A nanoGPT directory (train.bin, val.bin) is accepted as a dataset too.
 *
 *     char train[4096], val[4096];
 *     token_file *tf;
 *     if (dataset_resolve("data/corpus-tok", train, val, sizeof train, &err) ||
 *         token_file_open(&tf, train, TOKEN_FORMAT_AUTO, &err)) { ...err.msg... }
 *     int32_t batch[1025];
 *     token_file_read(tf, 0, 1025, batch, tokenizer_vocab_size(tok), &err);
 *     token_file_close(tf);
 *
 * Threading: a token_file may be read from several threads at once (reads use
 * pread and touch no shared state). A token_writer belongs to one thread.
 */
#ifndef STRATA_DATA_H
#define STRATA_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"
#include "strata/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TOKEN_SHARD_MAGIC "\xff\xffSTRATA"
#define TOKEN_SHARD_VERSION 2   /* 2 added the vocabulary fingerprint; version 1 still reads */
#define TOKEN_SHARD_HEADER_BYTES 64
#define TOKEN_SHARD_EXT ".tok"

/* ---- reading ------------------------------------------------------------ */

typedef struct token_file token_file;

/* How a file without the shard magic is read. */
typedef enum token_format {
    TOKEN_FORMAT_AUTO,   /* raw uint16 if its name ends in .bin, else refused */
    TOKEN_FORMAT_U16,    /* raw uint16 whatever its name (but *.tok) */
} token_format;

/* "auto" or "u16" (the --data-format flag); ST_EINVAL naming the value. */
st_status token_format_parse(const char *name, token_format *out, st_error *err);

/* Opens a shard or a raw uint16 file (format: which files are raw). Errors,
 * each naming the file: ST_ENOENT/ST_EIO (cannot open/read), ST_ECORRUPT (a
 * shard whose magic, header checksum, size or token checksum is wrong; a
 * raw file of odd size; an empty file), ST_EUNSUPPORTED (a shard version
 * newer than this build), ST_EINVAL (a directory; with TOKEN_FORMAT_AUTO a
 * file that is neither a shard nor named *.bin: text, with the advice to
 * tokenize it, or anything else, with the ways to say it is raw uint16). */
st_status token_file_open(token_file **out, const char *path, token_format format, st_error *err);
uint64_t  token_file_count(const token_file *tf);          /* number of tokens */
/* Reads tokens [start, start+n) as int32. Fails with ST_ECORRUPT naming the
 * file and the position if an id is >= vocab_size (pass 0 to skip that
 * check), ST_EINVAL if the range is past the end. */
st_status token_file_read(token_file *tf, uint64_t start, size_t n, int32_t *out, int vocab_size, st_error *err);
/* Checks every id against vocab_size before any is used, so that an id past
 * it fails at the start of a run, not hours into it: reads the whole file
 * once, except a shard written for a vocabulary no larger (its writer
 * refused larger ids, and its checksum says they are unchanged). Fails as
 * token_file_read does, at the first id past it. */
st_status token_file_check_ids(token_file *tf, int vocab_size, st_error *err);
/* The vocabulary size a shard was written for (0 for a raw file). */
uint32_t  token_file_vocab_size(const token_file *tf);
/* The fingerprint of the vocabulary a shard was made with (see
 * tokenizer_fingerprint), or 0 where it is not recorded: a raw file, a
 * version-1 shard, or a writer that did not know it. */
uint64_t  token_file_vocab_fingerprint(const token_file *tf);
int       token_file_is_shard(const token_file *tf);
const char *token_file_path(const token_file *tf);
void      token_file_close(token_file *tf);

/* Whether ids made with one vocabulary may be read by something that knows
 * another: data and a model, a model and a tokenizer. Fingerprints as
 * tokenizer_fingerprint gives them, 0 where one side does not know (raw
 * files, version-1 shards, weights from elsewhere), which passes: the
 * vocabulary sizes are checked apart. ST_EINVAL naming both sides and
 * both fingerprints when they differ. */
st_status vocab_fingerprint_check(const char *a_name, uint64_t a_fingerprint, const char *b_name, uint64_t b_fingerprint,
                                  st_error *err);

/* ---- writing ------------------------------------------------------------ */

typedef struct token_writer token_writer;

/* Starts a shard that will appear at `path` only when token_writer_commit
 * succeeds: tokens go to a temporary file beside it ("<path>.tmp.<pid>"),
 * which commit fills in the header of, fsyncs and renames over path, so a
 * crash or an error never leaves a half-written shard under the final name.
 * Ids are stored as uint16 when vocab_size <= 65535, else uint32.
 * vocab_fingerprint (0 if unknown) is recorded in the header, so that a
 * reader can tell data made with another vocabulary of the same size. */
st_status token_writer_open(token_writer **out, const char *path, uint32_t vocab_size, uint64_t vocab_fingerprint,
                            st_error *err);
/* Appends n ids; ST_EINVAL naming the id if one is negative or >= vocab_size. */
st_status token_writer_append(token_writer *w, const int32_t *ids, size_t n, st_error *err);
uint64_t  token_writer_count(const token_writer *w);
/* Finishes the file and renames it into place; frees w whatever happens. */
st_status token_writer_commit(token_writer *w, st_error *err);
/* Drops the temporary file and frees w (NULL is fine). */
void      token_writer_abort(token_writer *w);

/* ---- datasets ----------------------------------------------------------- */

/* Resolves a --data argument to the training and validation files:
 *   - a dataset directory (train.tok + val.tok, or nanoGPT's train.bin +
 *     val.bin) gives those two;
 *   - a single token file gives train = val = that file.
 * The paths are written to train_path and val_path (cap bytes each). Fails
 * with ST_ENOENT naming what is missing, ST_EINVAL if cap is too small. */
st_status dataset_resolve(const char *path, char *train_path, char *val_path, size_t cap, st_error *err);

/* Progress of dataset_prepare, called every few MB and once at the end. */
typedef void (*dataset_progress_fn)(void *ctx, uint64_t bytes_done, uint64_t bytes_total, uint64_t tokens_done);

typedef struct dataset_prepare_opts {
    const char *const *inputs;   /* text files or directories (searched recursively) */
    size_t n_inputs;
    const char *out_dir;         /* created if missing */
    double val_fraction;         /* share of tokens for validation, in (0, 0.5]; 0 means 0.1 */
    int overwrite;               /* replace a dataset already in out_dir */
    unsigned encode_flags;       /* TOKENIZER_ALLOW_SPECIAL: special tokens written in the text
                                    ("<|endoftext|>", ...) become their ids */
    dataset_progress_fn progress;
    void *progress_ctx;
} dataset_prepare_opts;

typedef struct dataset_prepare_result {
    uint64_t files;              /* text files read */
    uint64_t skipped;            /* files skipped in directories (binary, empty) */
    uint64_t bytes;              /* bytes of text read */
    uint64_t train_tokens, val_tokens;
} dataset_prepare_result;

/* Tokenizes the inputs with tok into out_dir/{train.tok,val.tok,meta.json}.
 * Each file is one document and begins with tokenizer_doc_separator(tok)
 * (GPT-2: <|endoftext|>; Llama 3: <|begin_of_text|>; ST_EUNSUPPORTED if it
 * has none). The shards hold uint32 ids when the vocabulary has more than
 * 65535 tokens, and meta.json records the tokenizer's name, fingerprint and
 * source (docs/FORMATS.md). The token stream is cut into
 * blocks and every k-th block (k = round(1/val_fraction)) goes to validation,
 * so both splits sample every source. Files in directories are taken in
 * sorted order; hidden entries and files that look binary (a NUL byte in the
 * first 8 KiB) or are empty are skipped. Errors name the file: a missing or
 * empty input file, a directory without text, an input too small to split,
 * out_dir already holding a dataset (ST_EEXIST unless overwrite). Output is
 * written to temporary files and renamed at the end, so a failure leaves
 * out_dir as it was. */
st_status dataset_prepare(tokenizer *tok, const dataset_prepare_opts *opts, dataset_prepare_result *res, st_error *err);

#ifdef __cplusplus
}
#endif
#endif
