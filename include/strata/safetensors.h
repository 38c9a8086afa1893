/*
 * strata/safetensors.h - tensors in and out of .safetensors files, the format
 * Hugging Face uses for model weights.
 *
 * The format: an 8-byte little-endian header length N, then N bytes of UTF-8
 * JSON, then the data section. The JSON maps each tensor name to
 *     {"dtype": "F32", "shape": [768, 2304], "data_offsets": [begin, end]}
 * with offsets relative to the start of the data section, plus an optional
 * "__metadata__" object of string -> string.
 *
 * Reading. safetensors_open validates the whole header before it returns, so
 * every tensor it lists has a known dtype, a shape of at most
 * SAFETENSORS_MAX_DIMS non-negative dimensions, and data that lies inside the
 * file, does not overlap any other tensor's, and is exactly numel * dtype size
 * bytes long. A hostile or truncated file gives an error, never a crash or a
 * huge allocation (the header is capped at SAFETENSORS_MAX_HEADER bytes).
 * Tensor data is read on request with pread, in chunks of
 * SAFETENSORS_IO_CHUNK bytes converted in place into the caller's buffer, so
 * reading a 6 GB checkpoint needs no memory beyond the destination.
 *
 *     safetensors_file *f;
 *     st_error err = {0};
 *     if (safetensors_open(&f, "model.safetensors", &err) != ST_OK) return err.status;
 *     const safetensors_tensor *t = safetensors_find(f, "wte.weight");
 *     float *w = malloc(t->numel * sizeof *w);          // BF16/F16/F32/F64 in the file
 *     st_status s = safetensors_read_f32(f, t, w, t->numel, &err);
 *     safetensors_close(f);
 *
 * Writing. safetensors_write takes a list of entries and writes them in that
 * order, contiguously, after a header padded with spaces to a multiple of 8
 * bytes. It writes "<path>.tmp", fsyncs it, renames it over path and fsyncs
 * the directory, so path holds either the old file or the complete new one.
 * Float data can be converted to BF16 or F16 while writing (round to nearest
 * even), through a bounded buffer.
 *
 *     safetensors_entry e[] = {
 *         {.name = "wte.weight", .dtype = SAFETENSORS_BF16, .ndim = 2,
 *          .shape = {50257, 768}, .data = wte, .from_f32 = 1},
 *     };
 *     const char *meta[] = {"format", "pt", NULL};
 *     st_status s = safetensors_write("out.safetensors", e, 1, meta, &err);
 *
 * Errors: every failure fills err with one line naming the file and, where
 * there is one, the tensor. Malformed headers and data that break a bound are
 * ST_ECORRUPT, dtypes the format defines but this module does not (F8_E4M3,
 * ...) ST_EUNSUPPORTED, caller mistakes (wrong element count, reading an
 * integer tensor as float) ST_EINVAL, failed system calls their errno's status
 * (ST_ENOENT, ST_ENOSPC, ST_EIO, ...). Short reads are ST_EIO.
 *
 * Ownership and threads: a safetensors_file owns its tensor list, names and
 * metadata; the pointers it hands out live until safetensors_close. After
 * open it is never modified, and reads use pread, so several threads may read
 * tensors of one file at the same time. Little-endian hosts only.
 */
#ifndef STRATA_SAFETENSORS_H
#define STRATA_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "strata/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum safetensors_dtype {
    SAFETENSORS_F64, SAFETENSORS_F32, SAFETENSORS_F16, SAFETENSORS_BF16,
    SAFETENSORS_I64, SAFETENSORS_I32, SAFETENSORS_I16, SAFETENSORS_I8, SAFETENSORS_U8, SAFETENSORS_BOOL,
    SAFETENSORS_U16, SAFETENSORS_U32, SAFETENSORS_U64,
    SAFETENSORS_DTYPE_COUNT
} safetensors_dtype;

#define SAFETENSORS_MAX_DIMS 8
/* Largest header accepted (and written): far above any real model's (GPT-2
 * 1.5B's is about 30 KB), far below an allocation that could hurt. */
#define SAFETENSORS_MAX_HEADER (100u * 1000u * 1000u)
/* Dimensions and offsets must be integers below 2^53: JSON numbers are read
 * as doubles, which are exact only up to there. */
#define SAFETENSORS_MAX_INTEGER (UINT64_C(1) << 53)
/* Bytes per pread (and per converted write) when streaming tensor data. */
#define SAFETENSORS_IO_CHUNK (4u << 20)

typedef struct safetensors_tensor {
    char *name;
    safetensors_dtype dtype;
    int ndim;                              /* 0 for a scalar */
    int64_t shape[SAFETENSORS_MAX_DIMS];
    uint64_t numel;                        /* product of shape; 1 for a scalar */
    uint64_t offset;                       /* absolute byte offset of the data in the file */
    uint64_t nbytes;                       /* numel * safetensors_dtype_size(dtype) */
} safetensors_tensor;

typedef struct safetensors_file safetensors_file;   /* opaque */

/* Opens path and validates the whole header before returning. On failure
 * *out is NULL. */
st_status safetensors_open(safetensors_file **out, const char *path, st_error *err);
/* Validates a header held in memory (for fuzzing and tests): buf is a prefix
 * of the file of len bytes, at least the 8-byte length and the header;
 * file_size is the whole file's size. The result lists tensors like an opened
 * file, but its data cannot be read (the read functions return ST_EINVAL). */
st_status safetensors_parse(safetensors_file **out, const uint8_t *buf, size_t len, uint64_t file_size,
                            const char *name_for_errors, st_error *err);

/* Tensors in the order the header lists them. */
size_t safetensors_count(const safetensors_file *f);
const safetensors_tensor *safetensors_at(const safetensors_file *f, size_t i);   /* NULL if i >= count */
const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name);  /* NULL if absent */
const char *safetensors_metadata(const safetensors_file *f, const char *key);             /* NULL if absent */
size_t safetensors_metadata_count(const safetensors_file *f);
/* The i-th metadata pair, in header order; returns the key, *value gets the value. NULL if i >= count. */
const char *safetensors_metadata_at(const safetensors_file *f, size_t i, const char **value);
const char *safetensors_path(const safetensors_file *f);

/* Reads tensor t of f into out, converting to the destination type; n must
 * equal t->numel. F32/F16/BF16/F64 tensors read as float or double (F64 to
 * float rounds); integer and BOOL tensors read as int32 (each value checked
 * to fit, else ST_ECORRUPT naming the element) or int64. Other pairings are
 * ST_EINVAL. t must come from f. Errors name the file and the tensor. */
st_status safetensors_read_f32(safetensors_file *f, const safetensors_tensor *t, float *out, uint64_t n, st_error *err);
/* Elements [first, first + n) of a float tensor (flat, row-major), as
 * safetensors_read_f32 converts them: a tensor too large to hold at once,
 * read a piece at a time. */
st_status safetensors_read_f32_range(safetensors_file *f, const safetensors_tensor *t, uint64_t first, float *out,
                                     uint64_t n, st_error *err);
st_status safetensors_read_f64(safetensors_file *f, const safetensors_tensor *t, double *out, uint64_t n, st_error *err);
st_status safetensors_read_i32(safetensors_file *f, const safetensors_tensor *t, int32_t *out, uint64_t n, st_error *err);
st_status safetensors_read_i64(safetensors_file *f, const safetensors_tensor *t, int64_t *out, uint64_t n, st_error *err);
/* The stored bytes, unconverted (little-endian, in t->dtype); nbytes must equal t->nbytes. */
st_status safetensors_read_raw(safetensors_file *f, const safetensors_tensor *t, void *out, uint64_t nbytes, st_error *err);
void safetensors_close(safetensors_file *f);   /* NULL is fine */

const char *safetensors_dtype_name(safetensors_dtype d);   /* "F32", ...; "?" if out of range */
size_t safetensors_dtype_size(safetensors_dtype d);        /* bytes per element; 0 if out of range */

/* Writing: the caller lists tensors with their bytes already in the given
 * dtype (little-endian), or gives float data with a target dtype F32/BF16/F16
 * to convert while writing (round to nearest even). Names must be distinct,
 * valid UTF-8, and not "__metadata__"; data may be NULL only for a tensor
 * with no elements. */
typedef struct safetensors_entry {
    const char *name;
    safetensors_dtype dtype;   /* dtype stored in the file */
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    const void *data;          /* bytes in `dtype`, or floats when from_f32 is set */
    int from_f32;              /* data is float; convert to dtype (F32, BF16 or F16) while writing */
} safetensors_entry;
/* metadata_kv: key, value, key, value, ..., NULL (or NULL for none). The file
 * is written to "<path>.tmp", fsynced, then renamed over path; on failure the
 * temporary file is removed and path is untouched. Two writers must not
 * target the same path at once. */
st_status safetensors_write(const char *path, const safetensors_entry *entries, size_t n,
                            const char *const *metadata_kv, st_error *err);
/* The same for data produced one tensor at a time (a model larger than
 * memory): fill(ctx, i, &data, err) is called just before entry i is
 * written and gives its data, which must stay valid until the next call;
 * entries[i].data is not used. An error from fill fails the write as above. */
typedef st_status (*safetensors_fill_fn)(void *ctx, size_t i, const void **data, st_error *err);
st_status safetensors_write_streamed(const char *path, const safetensors_entry *entries, size_t n,
                                     const char *const *metadata_kv, safetensors_fill_fn fill, void *ctx,
                                     st_error *err);

#ifdef __cplusplus
}
#endif
#endif
