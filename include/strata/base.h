/*
 * strata/base.h - what every layer shares: status values, error messages,
 * aligned memory, time, a deterministic random generator, bf16 conversion.
 *
 * Errors are values. A function that can fail returns an st_status and, when
 * the caller passes a non-NULL st_error, writes one line saying what failed
 * and where (the file, the tensor, the offset). Only the CLI prints errors.
 *
 *     st_error err = {0};
 *     if (safetensors_open(&f, path, &err) != ST_OK) {
 *         fprintf(stderr, "strata: %s\n", err.msg);
 *         return 1;
 *     }
 */
#ifndef STRATA_BASE_H
#define STRATA_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum st_status {
    ST_OK = 0,
    ST_EINVAL,       /* a bad argument, flag or configuration value */
    ST_EIO,          /* an I/O operation failed */
    ST_ENOSPC,       /* a device is full */
    ST_ENOMEM,       /* an allocation failed, or a memory budget is too small */
    ST_ECORRUPT,     /* data failed a format, bounds or checksum check */
    ST_ENOENT,       /* a file or a named item does not exist */
    ST_EUNSUPPORTED, /* valid, but not something this build can do */
    ST_EEXIST,       /* refusing to overwrite something that exists */
    ST_EINTR,        /* stopped on request (a signal) */
} st_status;

typedef struct st_error {
    st_status status;
    int sys_errno;   /* errno behind the failure, 0 if none */
    char msg[512];
} st_error;

/* Records a failure in err (which may be NULL) and returns s. The message
 * is one line: control characters in it (a newline in a name read from a
 * hostile file) are replaced by '?'. */
st_status st_fail(st_error *err, st_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like st_fail for a failed system call: maps errnum to a status (ENOSPC ->
 * ST_ENOSPC, ENOENT -> ST_ENOENT, ENOMEM -> ST_ENOMEM, else ST_EIO) and
 * appends strerror(errnum) to the message. */
st_status st_fail_errno(st_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *st_status_name(st_status s);

/* Memory aligned to `align` (a power of two, at least sizeof(void*)); the
 * size is rounded up to a multiple of align. Free with st_free_aligned. */
void *st_alloc_aligned(size_t align, size_t size);
void st_free_aligned(void *p);

/* Memory for O_DIRECT transfers: `size` bytes, 4096-aligned (2 MiB-aligned
 * from 2 MiB up), the whole 2 MiB pages in it advised into the kernel's
 * transparent huge pages (MADV_HUGEPAGE; advice only, so on a kernel that
 * has them off this is st_alloc_aligned(4096, size)). Why: a direct
 * transfer is cut into one block-layer segment per physically contiguous
 * run of its pages, and a request holds at most the queue's max_segments
 * (254 on this machine's virtio disk). 1 MiB over scattered 4 KiB pages is
 * 256 segments, so every chunk split in two and none merged with its
 * neighbour; on huge pages a chunk is one segment and neighbours merge into
 * 4 MiB requests, which this disk read at 1.3x the rate (docs/BENCHMARKS.md,
 * "I/O buffers on huge pages"). Resident memory is `size`, as with
 * st_alloc_aligned: the partial 2 MiB page at the end is not advised.
 * Large host arrays that memory-bound passes stream through take it too
 * (the executor's host buffers of 2 MiB and more): fewer TLB misses, and
 * on this virtual machine a steady rate where 4 KiB pages were 2-6x slower
 * in some processes. The advice takes on pages not yet touched: a block
 * from glibc's heap may not be, which is why `strata probe`, which frees
 * and allocates gigabytes, fixes glibc's mmap threshold at 2 MiB
 * (src/cli/cmd_probe.c). Free with st_free_aligned. */
void *st_alloc_io(size_t size);
size_t st_round_up(size_t n, size_t align);

/* Peak resident set size of this process so far, in bytes. */
size_t st_peak_rss_bytes(void);
/* Monotonic wall-clock time in seconds. */
double st_now(void);
/* The median of v[0..n), n >= 1 (the mean of the middle two for even n); sorts v. */
double st_median(double *v, int n);
/* "1.50 GiB", "12.0 MiB", ... into buf; returns buf. */
const char *st_format_bytes(double bytes, char *buf, size_t n);
/* A 64-bit fingerprint as files spell it: exactly 16 lowercase hex digits
 * ("%016" PRIx64). Returns 1 and sets *out, or 0 for anything else. */
int st_parse_hex64(const char *s, uint64_t *out);

/* xoshiro256** seeded through splitmix64: fast, and the same sequence on every
 * platform for a given seed. */
typedef struct st_rng { uint64_t s[4]; } st_rng;
void st_rng_seed(st_rng *r, uint64_t seed);
uint64_t st_rng_next(st_rng *r);
float st_rng_uniform(st_rng *r);                /* [0, 1) */
float st_rng_normal(st_rng *r);                 /* mean 0, std 1 */
/* p[0..n) = std * N(0, 1), two values per Box-Muller draw (half the cost of
 * n calls to st_rng_normal, and a different sequence). */
void st_rng_normal_fill(st_rng *r, float *p, size_t n, float std);

/* bfloat16: the top 16 bits of an IEEE float, rounded to nearest even. */
typedef uint16_t st_bf16;
static inline st_bf16 st_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (st_bf16)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (st_bf16)(u >> 16);
}
static inline float st_bf16_to_f32(st_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* IEEE half precision, for reading F16 checkpoints. */
float st_f16_to_f32(uint16_t h);
uint16_t st_f32_to_f16(float f);

#ifdef __cplusplus
}
#endif
#endif
