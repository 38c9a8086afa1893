/* base.c - status values, errors, memory, time, random numbers. */
#include "strata/base.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

static st_status vfail(st_error *err, st_status s, int errnum, const char *fmt, va_list ap) {
    if (!err) return s;
    err->status = s;
    err->sys_errno = errnum;
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (errnum && n >= 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
    /* one line, whatever a file's names held: control characters print as '?' */
    for (char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return s;
}

st_status st_fail(st_error *err, st_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(err, s, 0, fmt, ap);
    va_end(ap);
    return s;
}

st_status st_fail_errno(st_error *err, int errnum, const char *fmt, ...) {
    st_status s = errnum == ENOSPC || errnum == EDQUOT ? ST_ENOSPC
                : errnum == ENOENT ? ST_ENOENT
                : errnum == ENOMEM ? ST_ENOMEM
                : errnum == EEXIST ? ST_EEXIST
                : errnum == EINVAL ? ST_EINVAL
                : ST_EIO;
    va_list ap;
    va_start(ap, fmt);
    vfail(err, s, errnum, fmt, ap);
    va_end(ap);
    return s;
}

const char *st_status_name(st_status s) {
    switch (s) {
    case ST_OK: return "ok";
    case ST_EINVAL: return "invalid argument";
    case ST_EIO: return "I/O error";
    case ST_ENOSPC: return "no space left";
    case ST_ENOMEM: return "out of memory";
    case ST_ECORRUPT: return "corrupt data";
    case ST_ENOENT: return "not found";
    case ST_EUNSUPPORTED: return "unsupported";
    case ST_EEXIST: return "already exists";
    case ST_EINTR: return "interrupted";
    }
    return "unknown status";
}

size_t st_round_up(size_t n, size_t align) { return (n + align - 1) / align * align; }

void *st_alloc_aligned(size_t align, size_t size) {
    void *p = NULL;
    if (size == 0) size = align;
    if (posix_memalign(&p, align, st_round_up(size, align)) != 0) return NULL;
    return p;
}

void st_free_aligned(void *p) { free(p); }

void *st_alloc_io(size_t size) {
    const size_t huge = (size_t)2 << 20;
    if (size < huge) return st_alloc_aligned(4096, size);
    void *p = NULL;
    if (posix_memalign(&p, huge, st_round_up(size, 4096)) != 0) return NULL;
    (void)madvise(p, size / huge * huge, MADV_HUGEPAGE);   /* advice: EINVAL where THP is built out */
    return p;
}

size_t st_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024;   /* Linux reports KiB */
}

double st_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double st_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int st_parse_hex64(const char *s, uint64_t *out) {
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') v = v << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v = v << 4 | (uint64_t)(c - 'a' + 10);
        else return 0;   /* also the end of a shorter string */
    }
    if (s[16]) return 0;
    *out = v;
    return 1;
}

const char *st_format_bytes(double bytes, char *buf, size_t n) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (fabs(bytes) >= 1024.0 && u < 5) { bytes /= 1024.0; u++; }
    if (u == 0) snprintf(buf, n, "%.0f B", bytes);
    else snprintf(buf, n, "%.*f %s", fabs(bytes) < 10 ? 2 : 1, bytes, units[u]);
    return buf;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void st_rng_seed(st_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t st_rng_next(st_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t; s[3] = rotl(s[3], 45);
    return result;
}

float st_rng_uniform(st_rng *r) { return (float)(st_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float st_rng_normal(st_rng *r) {
    /* Box-Muller in double so the result does not depend on libm's float paths. */
    double u1 = ((double)(st_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(st_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

void st_rng_normal_fill(st_rng *r, float *p, size_t n, float std) {
    for (size_t i = 0; i < n; i += 2) {
        double u1 = ((double)(st_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
        double u2 = (double)(st_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
        double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
        p[i] = std * (float)(rad * cos(ang));
        if (i + 1 < n) p[i + 1] = std * (float)(rad * sin(ang));
    }
}

float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else {   /* subnormal: normalize */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t st_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);     /* overflow to inf */
    if (a < 0x38800000u) {                                       /* subnormal or zero */
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t man = (a & 0x7fffff) | 0x800000, shift = 126 - (a >> 23);   /* 14..24 */
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((a >> 13) - ((127 - 15) << 10)), rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}
