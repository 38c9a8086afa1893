/* fuzz_model_safetensors.c - libFuzzer target for the safetensors reader and writer.
 *
 * Each input is a whole file. It must either be rejected with a one-line
 * message naming the file, or parse into tensors that satisfy every promise of
 * safetensors.h (shape, numel, bytes inside the file, find by name). Accepted
 * inputs then go through the real file path (safetensors_open on a memfd, every
 * tensor read in every type it allows, checked against the input bytes), and
 * through the writer: written back to a tmpfs file, they must reopen with the
 * same names, dtypes, shapes, bytes and metadata. Any broken promise aborts.
 *
 * Build and run with scripts/fuzz.sh; seeds are in fuzz/seeds/safetensors/. */
#define _GNU_SOURCE   /* memfd_create */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "strata/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "fuzz_model_safetensors: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                   \
        }                                                                              \
    } while (0)

static int is_float(safetensors_dtype d) {
    return d == SAFETENSORS_F64 || d == SAFETENSORS_F32 || d == SAFETENSORS_F16 || d == SAFETENSORS_BF16;
}

/* The promises every listed tensor keeps; the input is the file. */
static void check_tensors(const safetensors_file *f, uint64_t file_size) {
    size_t n = safetensors_count(f);
    for (size_t i = 0; i < n; i++) {
        const safetensors_tensor *t = safetensors_at(f, i);
        CHECK(t && t->name);
        CHECK(safetensors_find(f, t->name) == t);
        CHECK(t->dtype >= 0 && t->dtype < SAFETENSORS_DTYPE_COUNT);
        CHECK(t->ndim >= 0 && t->ndim <= SAFETENSORS_MAX_DIMS);
        uint64_t numel = 1;
        for (int k = 0; k < t->ndim; k++) {
            CHECK(t->shape[k] >= 0);
            numel *= (uint64_t)t->shape[k];   /* cannot overflow: checked by the parser */
        }
        CHECK(numel == t->numel);
        CHECK(t->nbytes == t->numel * safetensors_dtype_size(t->dtype));
        CHECK(t->offset >= 8 && t->offset <= file_size && t->nbytes <= file_size - t->offset);
    }
    CHECK(safetensors_at(f, n) == NULL);
    for (size_t i = 0; i < safetensors_metadata_count(f); i++) {
        const char *v = NULL, *k = safetensors_metadata_at(f, i, &v);
        CHECK(k && v && safetensors_metadata(f, k) == v);
    }
}

static double expect_float(safetensors_dtype d, const uint8_t *p) {
    switch (d) {
    case SAFETENSORS_F64: { double v; memcpy(&v, p, 8); return v; }
    case SAFETENSORS_F32: { float v; memcpy(&v, p, 4); return v; }
    case SAFETENSORS_F16: { uint16_t v; memcpy(&v, p, 2); return st_f16_to_f32(v); }
    default: { uint16_t v; memcpy(&v, p, 2); return st_bf16_to_f32(v); }
    }
}

static int same_float(double a, double b) { return a == b || (a != a && b != b); }

/* Every tensor, read in every type its dtype allows, must match the input. */
static void check_reads(safetensors_file *f, const uint8_t *data) {
    for (size_t i = 0; i < safetensors_count(f); i++) {
        const safetensors_tensor *t = safetensors_at(f, i);
        const uint8_t *src = data + t->offset;
        size_t es = safetensors_dtype_size(t->dtype);
        uint64_t n = t->numel;
        void *buf = malloc(n * 8 + 8);
        st_error err = {0};
        CHECK(safetensors_read_raw(f, t, buf, t->nbytes, &err) == ST_OK);
        CHECK(memcmp(buf, src, t->nbytes) == 0);
        if (is_float(t->dtype)) {
            float *f32 = buf;
            CHECK(safetensors_read_f32(f, t, f32, n, &err) == ST_OK);
            for (uint64_t j = 0; j < n; j++) CHECK(same_float(f32[j], (float)expect_float(t->dtype, src + j * es)));
            double *f64 = buf;
            CHECK(safetensors_read_f64(f, t, f64, n, &err) == ST_OK);
            for (uint64_t j = 0; j < n; j++) CHECK(same_float(f64[j], expect_float(t->dtype, src + j * es)));
            CHECK(safetensors_read_i64(f, t, buf, n, &err) == ST_EINVAL);
        } else {
            int64_t *i64 = buf;
            int64_t *copy = malloc(n * 8 + 8);
            st_status s = safetensors_read_i64(f, t, i64, n, &err);
            CHECK(s == ST_OK || (s == ST_ECORRUPT && t->dtype == SAFETENSORS_U64));
            int all_fit = s == ST_OK;
            if (s == ST_OK) {
                memcpy(copy, i64, n * 8);
                for (uint64_t j = 0; j < n; j++) all_fit &= copy[j] >= INT32_MIN && copy[j] <= INT32_MAX;
            }
            int32_t *i32 = buf;
            s = safetensors_read_i32(f, t, i32, n, &err);
            CHECK((s == ST_OK) == all_fit);
            if (s == ST_OK)
                for (uint64_t j = 0; j < n; j++) CHECK(i32[j] == copy[j]);
            CHECK(safetensors_read_f32(f, t, buf, n, &err) == ST_EINVAL);
            free(copy);
        }
        free(buf);
    }
}

static int is_writable_from_f32(safetensors_dtype d) {
    return d == SAFETENSORS_F32 || d == SAFETENSORS_BF16 || d == SAFETENSORS_F16;
}

/* Writes f's tensors and metadata to a new file and checks that it reads back
 * the same. F32/BF16/F16 tensors go through the writer's float conversion
 * (their values as floats, converted back while writing), which must give the
 * same values again: f32 -> bf16/f16 is exact for values that came from
 * bf16/f16, up to the payload of a NaN. The other dtypes are written as the
 * input's bytes. g is the input opened as a file, to read the floats from. */
static void check_write_round_trip(const safetensors_file *f, safetensors_file *g_in, const uint8_t *data) {
    static char path[128];
    if (!path[0])
        snprintf(path, sizeof path, "%s/strata-fuzz-%d.safetensors", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp",
                 (int)getpid());
    size_t n = safetensors_count(f), nm = safetensors_metadata_count(f);
    safetensors_entry *e = calloc(n + 1, sizeof *e);
    const char **kv = calloc(2 * nm + 1, sizeof *kv);
    float **floats = calloc(n + 1, sizeof *floats);
    st_error err = {0};
    for (size_t i = 0; i < n; i++) {
        const safetensors_tensor *t = safetensors_at(f, i);
        e[i].name = t->name;
        e[i].dtype = t->dtype;
        e[i].ndim = t->ndim;
        memcpy(e[i].shape, t->shape, sizeof t->shape);
        e[i].data = t->nbytes ? data + t->offset : NULL;
        if (is_writable_from_f32(t->dtype) && t->numel) {
            floats[i] = malloc(t->numel * sizeof(float));
            CHECK(safetensors_read_f32(g_in, safetensors_at(g_in, i), floats[i], t->numel, &err) == ST_OK);
            e[i].data = floats[i];
            e[i].from_f32 = 1;
        }
    }
    for (size_t i = 0; i < nm; i++) kv[2 * i] = safetensors_metadata_at(f, i, &kv[2 * i + 1]);
    st_status s = safetensors_write(path, e, n, kv, &err);
    if (s != ST_OK) fprintf(stderr, "fuzz_model_safetensors: write failed: %s\n", err.msg);
    CHECK(s == ST_OK);
    safetensors_file *g = NULL;
    s = safetensors_open(&g, path, &err);
    if (s != ST_OK) fprintf(stderr, "fuzz_model_safetensors: reopen failed: %s\n", err.msg);
    CHECK(s == ST_OK);
    CHECK(safetensors_count(g) == n && safetensors_metadata_count(g) == nm);
    for (size_t i = 0; i < n; i++) {
        const safetensors_tensor *a = safetensors_at(f, i), *b = safetensors_at(g, i);
        CHECK(strcmp(a->name, b->name) == 0 && a->dtype == b->dtype && a->ndim == b->ndim && a->numel == b->numel);
        CHECK(memcmp(a->shape, b->shape, sizeof a->shape) == 0);
        if (floats[i]) {
            float *back = malloc(b->numel * sizeof(float));
            CHECK(safetensors_read_f32(g, b, back, b->numel, &err) == ST_OK);
            for (uint64_t j = 0; j < b->numel; j++) CHECK(same_float(back[j], floats[i][j]));
            free(back);
        } else {
            void *buf = malloc(b->nbytes + 1);
            CHECK(safetensors_read_raw(g, b, buf, b->nbytes, &err) == ST_OK);
            CHECK(memcmp(buf, data + a->offset, a->nbytes) == 0);
            free(buf);
        }
    }
    for (size_t i = 0; i < nm; i++) {
        const char *v = NULL, *k = safetensors_metadata_at(f, i, &v);
        const char *w = safetensors_metadata(g, k);
        CHECK(w && strcmp(v, w) == 0);
    }
    safetensors_close(g);
    unlink(path);
    for (size_t i = 0; i < n; i++) free(floats[i]);
    free(floats);
    free(e);
    free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    safetensors_file *f = (safetensors_file *)&size;
    st_error err = {0};
    st_status s = safetensors_parse(&f, data, size, size, "fuzz-input", &err);
    if (s != ST_OK) {
        CHECK(f == NULL);
        CHECK(err.status == s && strstr(err.msg, "fuzz-input") && !strchr(err.msg, '\n'));
        return 0;
    }
    check_tensors(f, size);

    /* The same bytes through the file path must give the same answer. */
    int fd = memfd_create("fuzz_model_safetensors", MFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(write(fd, data, size) == (ssize_t)size);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    safetensors_file *g = NULL;
    s = safetensors_open(&g, path, &err);
    CHECK(s == ST_OK);
    CHECK(safetensors_count(g) == safetensors_count(f));
    check_tensors(g, size);
    check_reads(g, data);
    check_write_round_trip(f, g, data);
    safetensors_close(g);
    close(fd);
    safetensors_close(f);
    return 0;
}
