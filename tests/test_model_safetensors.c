/* test_model_safetensors.c - safetensors round trips for every dtype, the
 * atomic writer, and one test per header validation failure. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/safetensors.h"

static char tmpdir[64];

static int make_tmpdir(void **state) {
    (void)state;
    strcpy(tmpdir, "/tmp/strata-test-st-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmpdir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(char *buf, const char *name) {
    snprintf(buf, 256, "%s/%s", tmpdir, name);
    return buf;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Writes len field, then header bytes, then data: a file exactly as given. */
static void write_file(const char *path, uint64_t len_field, const void *hdr, size_t hdr_len, const void *data,
                       size_t data_len) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    uint8_t len8[8];
    memcpy(len8, &len_field, 8);
    assert_int_equal(fwrite(len8, 1, 8, fp), 8);
    if (hdr_len) assert_int_equal(fwrite(hdr, 1, hdr_len, fp), hdr_len);
    if (data_len) assert_int_equal(fwrite(data, 1, data_len, fp), data_len);
    assert_int_equal(fclose(fp), 0);
}

/* A file whose header is the given JSON, followed by data_len zero bytes. */
static void write_json_file(const char *path, const char *json, size_t data_len) {
    uint8_t *zeros = calloc(1, data_len ? data_len : 1);
    write_file(path, strlen(json), json, strlen(json), zeros, data_len);
    free(zeros);
}

/* Opening path must fail with status s, and the message must name the file
 * and contain each needle (the tensor name, the reason). */
static void expect_open_fails(const char *path, st_status s, const char *needle1, const char *needle2) {
    safetensors_file *f = (safetensors_file *)1;
    st_error err = {0};
    assert_int_equal(safetensors_open(&f, path, &err), s);
    assert_null(f);
    assert_int_equal(err.status, s);
    assert_non_null(strstr(err.msg, path));
    if (needle1 && !strstr(err.msg, needle1)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle1);
    if (needle2 && !strstr(err.msg, needle2)) fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle2);
    assert_null(strchr(err.msg, '\n'));
}

static void expect_json_fails(const char *json, size_t data_len, st_status s, const char *needle1,
                              const char *needle2) {
    char path[256];
    tmp_path(path, "bad.safetensors");
    write_json_file(path, json, data_len);
    expect_open_fails(path, s, needle1, needle2);
}

static safetensors_file *open_ok(const char *path) {
    safetensors_file *f = NULL;
    st_error err = {0};
    if (safetensors_open(&f, path, &err) != ST_OK) fail_msg("open %s: %s", path, err.msg);
    return f;
}

static void write_ok(const char *path, const safetensors_entry *e, size_t n, const char *const *kv) {
    st_error err = {0};
    if (safetensors_write(path, e, n, kv, &err) != ST_OK) fail_msg("write %s: %s", path, err.msg);
}

/* Values that exercise rounding: ties, subnormals, overflow to inf, NaN-free. */
static void fill_floats(float *x, size_t n, uint64_t seed) {
    st_rng r;
    st_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = st_rng_normal(&r) * 3.0f;
    if (n > 6) {
        x[0] = 1.0f + 1.0f / 256;            /* bf16 tie: rounds to even (1.0) */
        x[1] = 1.0f + 3.0f / 256;            /* bf16 tie: rounds to even (1 + 4/256) */
        x[2] = 1e-6f;                        /* f16 subnormal */
        x[3] = 1e6f;                         /* f16 overflow -> inf */
        x[4] = -0.0f;
        x[5] = 65504.0f;                     /* largest f16 */
    }
}

/* ------------------------------------------------------------------------- */
/* round trips                                                                */

static void test_f32_round_trip_and_layout(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "f32.safetensors");
    float a[6], b[3];
    fill_floats(a, 6, 1);
    fill_floats(b, 3, 2);
    safetensors_entry e[] = {
        {.name = "a", .dtype = SAFETENSORS_F32, .ndim = 2, .shape = {2, 3}, .data = a},
        {.name = "b.weight", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {3}, .data = b, .from_f32 = 1},
    };
    write_ok(path, e, 2, NULL);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_false(file_exists(tmp));

    safetensors_file *f = open_ok(path);
    assert_string_equal(safetensors_path(f), path);
    assert_int_equal(safetensors_count(f), 2);
    const safetensors_tensor *ta = safetensors_at(f, 0), *tb = safetensors_at(f, 1);
    assert_null(safetensors_at(f, 2));
    assert_string_equal(ta->name, "a");           /* header order is kept */
    assert_ptr_equal(safetensors_find(f, "b.weight"), tb);
    assert_null(safetensors_find(f, "c"));
    assert_int_equal(ta->dtype, SAFETENSORS_F32);
    assert_int_equal(ta->ndim, 2);
    assert_int_equal(ta->shape[0], 2);
    assert_int_equal(ta->shape[1], 3);
    assert_int_equal(ta->numel, 6);
    assert_int_equal(ta->nbytes, 24);
    assert_int_equal(ta->offset % 8, 0);          /* header padded to 8 */
    assert_int_equal(tb->offset, ta->offset + 24);

    float ra[6], rb[3];
    double rd[6];
    st_error err = {0};
    assert_int_equal(safetensors_read_f32(f, ta, ra, 6, &err), ST_OK);
    assert_memory_equal(ra, a, sizeof a);
    assert_int_equal(safetensors_read_f32(f, tb, rb, 3, &err), ST_OK);
    assert_memory_equal(rb, b, sizeof b);
    assert_int_equal(safetensors_read_f64(f, ta, rd, 6, &err), ST_OK);
    for (int i = 0; i < 6; i++) assert_true(rd[i] == (double)a[i]);
    uint8_t raw[24];
    assert_int_equal(safetensors_read_raw(f, ta, raw, 24, &err), ST_OK);
    assert_memory_equal(raw, a, 24);
    uint64_t a_offset = ta->offset;
    safetensors_close(f);

    /* the bytes on disk: length, then JSON, then a's floats at ta->offset */
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    uint8_t len8[8];
    assert_int_equal(fread(len8, 1, 8, fp), 8);
    uint64_t hlen;
    memcpy(&hlen, len8, 8);
    assert_int_equal(8 + hlen, a_offset);
    char first;
    assert_int_equal(fread(&first, 1, 1, fp), 1);
    assert_int_equal(first, '{');
    fclose(fp);
}

/* Float data converted while writing must equal the base.h conversions, and
 * read back as float/double exactly. Covers BF16 and F16, more than one I/O
 * chunk, so the chunked conversions on both sides are exercised. */
static void check_converted_round_trip(safetensors_dtype dt, const char *file) {
    char path[256];
    tmp_path(path, file);
    size_t n = SAFETENSORS_IO_CHUNK / 2 * 2 + 12345;   /* a bit more than two chunks of 2-byte values */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    double *yd = malloc(n * sizeof *yd);
    uint16_t *raw = malloc(n * 2);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(yd);
    assert_non_null(raw);
    fill_floats(x, n, 3);
    safetensors_entry e = {.name = "w", .dtype = dt, .ndim = 2, .shape = {1, (int64_t)n}, .data = x, .from_f32 = 1};
    write_ok(path, &e, 1, NULL);

    safetensors_file *f = open_ok(path);
    const safetensors_tensor *t = safetensors_find(f, "w");
    assert_non_null(t);
    assert_int_equal(t->dtype, dt);
    assert_int_equal(t->nbytes, n * 2);
    st_error err = {0};
    assert_int_equal(safetensors_read_raw(f, t, raw, n * 2, &err), ST_OK);
    assert_int_equal(safetensors_read_f32(f, t, y, n, &err), ST_OK);
    assert_int_equal(safetensors_read_f64(f, t, yd, n, &err), ST_OK);
    size_t mismatches = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = dt == SAFETENSORS_BF16 ? st_f32_to_bf16(x[i]) : st_f32_to_f16(x[i]);
        float back = dt == SAFETENSORS_BF16 ? st_bf16_to_f32(want) : st_f16_to_f32(want);
        mismatches += raw[i] != want || memcmp(&y[i], &back, 4) != 0 || yd[i] != (double)back;
    }
    assert_int_equal(mismatches, 0);
    if (dt == SAFETENSORS_BF16) {
        assert_true(y[0] == 1.0f);                 /* ties to even */
        assert_true(y[1] == 1.0f + 4.0f / 256);
    } else {
        assert_true(isinf(y[3]));                  /* 1e6 overflows F16 */
        assert_true(y[5] == 65504.0f);
        assert_true(y[2] > 0 && fabsf(y[2] - 1e-6f) < 1e-7f);   /* subnormal kept */
    }
    safetensors_close(f);
    free(x);
    free(y);
    free(yd);
    free(raw);
}

static void test_bf16_round_trip_converting(void **state) {
    (void)state;
    check_converted_round_trip(SAFETENSORS_BF16, "bf16.safetensors");
}

static void test_f16_round_trip_converting(void **state) {
    (void)state;
    check_converted_round_trip(SAFETENSORS_F16, "f16.safetensors");
}

/* Bytes given already in F16/BF16/F64 (not converted while writing). */
static void test_raw_float_dtypes_read_converted(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "rawfloat.safetensors");
    uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7bff};          /* F16: 1, -2, 2^-24, 65504 */
    uint16_t bf[3] = {0x3f80, 0x4049, 0xff80};                 /* BF16: 1, 3.140625, -inf */
    double d[3] = {0.1, -1e300, 3.0};
    safetensors_entry e[] = {
        {.name = "h", .dtype = SAFETENSORS_F16, .ndim = 1, .shape = {4}, .data = h},
        {.name = "bf", .dtype = SAFETENSORS_BF16, .ndim = 1, .shape = {3}, .data = bf},
        {.name = "d", .dtype = SAFETENSORS_F64, .ndim = 1, .shape = {3}, .data = d},
    };
    write_ok(path, e, 3, NULL);
    safetensors_file *f = open_ok(path);
    st_error err = {0};
    float y[4];
    double yd[4];
    assert_int_equal(safetensors_read_f32(f, safetensors_find(f, "h"), y, 4, &err), ST_OK);
    assert_true(y[0] == 1.0f && y[1] == -2.0f && y[2] == ldexpf(1.0f, -24) && y[3] == 65504.0f);
    assert_int_equal(safetensors_read_f32(f, safetensors_find(f, "bf"), y, 3, &err), ST_OK);
    assert_true(y[0] == 1.0f && y[1] == 3.140625f && isinf(y[2]) && y[2] < 0);
    assert_int_equal(safetensors_read_f64(f, safetensors_find(f, "d"), yd, 3, &err), ST_OK);
    assert_memory_equal(yd, d, sizeof d);                     /* F64 fixtures read exactly */
    assert_int_equal(safetensors_read_f32(f, safetensors_find(f, "d"), y, 3, &err), ST_OK);
    assert_true(y[0] == 0.1f && isinf(y[1]) && y[1] < 0 && y[2] == 3.0f);
    safetensors_close(f);
}

static void test_integer_dtypes(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "ints.safetensors");
    int64_t i64[3] = {-5, 2147483647, 7};
    int64_t big[2] = {1, 5000000000LL};
    int32_t i32[2] = {INT32_MIN, 9};
    int16_t i16[2] = {-300, 300};
    int8_t i8[2] = {-128, 127};
    uint8_t u8[2] = {0, 255}, bools[3] = {0, 1, 2};   /* any non-zero byte is true */
    uint64_t u64[2] = {3, UINT64_MAX};
    safetensors_entry e[] = {
        {.name = "i64", .dtype = SAFETENSORS_I64, .ndim = 1, .shape = {3}, .data = i64},
        {.name = "big", .dtype = SAFETENSORS_I64, .ndim = 1, .shape = {2}, .data = big},
        {.name = "i32", .dtype = SAFETENSORS_I32, .ndim = 1, .shape = {2}, .data = i32},
        {.name = "i16", .dtype = SAFETENSORS_I16, .ndim = 1, .shape = {2}, .data = i16},
        {.name = "i8", .dtype = SAFETENSORS_I8, .ndim = 1, .shape = {2}, .data = i8},
        {.name = "u8", .dtype = SAFETENSORS_U8, .ndim = 1, .shape = {2}, .data = u8},
        {.name = "mask", .dtype = SAFETENSORS_BOOL, .ndim = 1, .shape = {3}, .data = bools},
        {.name = "u64", .dtype = SAFETENSORS_U64, .ndim = 1, .shape = {2}, .data = u64},
    };
    write_ok(path, e, 8, NULL);
    safetensors_file *f = open_ok(path);
    st_error err = {0};
    int32_t r[3];
    int64_t r64[3];
    assert_int_equal(safetensors_read_i32(f, safetensors_find(f, "i64"), r, 3, &err), ST_OK);
    assert_true(r[0] == -5 && r[1] == 2147483647 && r[2] == 7);
    assert_int_equal(safetensors_read_i32(f, safetensors_find(f, "i32"), r, 2, &err), ST_OK);
    assert_true(r[0] == INT32_MIN && r[1] == 9);
    assert_int_equal(safetensors_read_i32(f, safetensors_find(f, "i16"), r, 2, &err), ST_OK);
    assert_true(r[0] == -300 && r[1] == 300);
    assert_int_equal(safetensors_read_i64(f, safetensors_find(f, "i8"), r64, 2, &err), ST_OK);
    assert_true(r64[0] == -128 && r64[1] == 127);
    assert_int_equal(safetensors_read_i32(f, safetensors_find(f, "u8"), r, 2, &err), ST_OK);
    assert_true(r[0] == 0 && r[1] == 255);
    assert_int_equal(safetensors_read_i32(f, safetensors_find(f, "mask"), r, 3, &err), ST_OK);
    assert_true(r[0] == 0 && r[1] == 1 && r[2] == 1);
    assert_int_equal(safetensors_read_i64(f, safetensors_find(f, "big"), r64, 2, &err), ST_OK);
    assert_true(r64[1] == 5000000000LL);

    /* out of int32 range: an error naming file, tensor and element */
    assert_int_equal(safetensors_read_i32(f, safetensors_find(f, "big"), r, 2, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "'big'"));
    assert_non_null(strstr(err.msg, "element 1 = 5000000000"));
    assert_int_equal(safetensors_read_i64(f, safetensors_find(f, "u64"), r64, 2, &err), ST_ECORRUPT);
    assert_non_null(strstr(err.msg, "element 1"));

    /* float and integer tensors do not mix */
    float y[3];
    assert_int_equal(safetensors_read_f32(f, safetensors_find(f, "i64"), y, 3, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "'i64'"));
    assert_non_null(strstr(err.msg, "I64"));
    safetensors_close(f);
}

static void test_metadata_round_trip(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "meta.safetensors");
    float x = 1.5f;
    safetensors_entry e = {.name = "x", .dtype = SAFETENSORS_F32, .ndim = 0, .data = &x};
    const char *kv[] = {"format", "pt", "quote\"and\\slash", "line\nbreak \xc3\xa9", "empty", "", NULL};
    write_ok(path, &e, 1, kv);
    safetensors_file *f = open_ok(path);
    assert_int_equal(safetensors_metadata_count(f), 3);
    assert_string_equal(safetensors_metadata(f, "format"), "pt");
    assert_string_equal(safetensors_metadata(f, "quote\"and\\slash"), "line\nbreak \xc3\xa9");
    assert_string_equal(safetensors_metadata(f, "empty"), "");
    assert_null(safetensors_metadata(f, "missing"));
    const char *v = NULL;
    assert_string_equal(safetensors_metadata_at(f, 0, &v), "format");
    assert_string_equal(v, "pt");
    assert_null(safetensors_metadata_at(f, 3, &v));
    assert_int_equal(safetensors_count(f), 1);    /* __metadata__ is not a tensor */
    assert_null(safetensors_find(f, "__metadata__"));
    safetensors_close(f);
}

static void test_zero_size_and_scalar_tensors(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "edge.safetensors");
    float s = -7.25f;
    float v[2] = {1, 2};
    safetensors_entry e[] = {
        {.name = "empty", .dtype = SAFETENSORS_BF16, .ndim = 2, .shape = {0, 5}, .data = NULL, .from_f32 = 1},
        {.name = "scalar", .dtype = SAFETENSORS_F32, .ndim = 0, .data = &s},
        {.name = "empty2", .dtype = SAFETENSORS_I64, .ndim = 1, .shape = {0}, .data = NULL},
        {.name = "v", .dtype = SAFETENSORS_F16, .ndim = 1, .shape = {2}, .data = v, .from_f32 = 1},
    };
    write_ok(path, e, 4, NULL);
    safetensors_file *f = open_ok(path);
    st_error err = {0};
    const safetensors_tensor *te = safetensors_find(f, "empty"), *ts = safetensors_find(f, "scalar");
    assert_int_equal(te->ndim, 2);
    assert_int_equal(te->shape[1], 5);
    assert_int_equal(te->numel, 0);
    assert_int_equal(te->nbytes, 0);
    assert_int_equal(safetensors_read_f32(f, te, NULL, 0, &err), ST_OK);
    int64_t dummy;
    assert_int_equal(safetensors_read_i64(f, safetensors_find(f, "empty2"), &dummy, 0, &err), ST_OK);
    assert_int_equal(ts->ndim, 0);
    assert_int_equal(ts->numel, 1);
    assert_int_equal(ts->nbytes, 4);
    float r = 0, rv[2];
    assert_int_equal(safetensors_read_f32(f, ts, &r, 1, &err), ST_OK);
    assert_true(r == -7.25f);
    assert_int_equal(safetensors_read_f32(f, safetensors_find(f, "v"), rv, 2, &err), ST_OK);
    assert_true(rv[0] == 1.0f && rv[1] == 2.0f);
    safetensors_close(f);
}

static void test_empty_file_list(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "none.safetensors");
    write_ok(path, NULL, 0, NULL);
    safetensors_file *f = open_ok(path);
    assert_int_equal(safetensors_count(f), 0);
    assert_null(safetensors_find(f, "x"));
    safetensors_close(f);
}

/* A failed write leaves the old file intact and no temporary file. */
static void test_write_is_atomic_and_replaces(void **state) {
    (void)state;
    char path[256], tmp[300];
    tmp_path(path, "atomic.safetensors");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    safetensors_entry e = {.name = "a", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {2}, .data = a};
    write_ok(path, &e, 1, NULL);
    safetensors_entry e2 = {.name = "b", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {3}, .data = b};
    write_ok(path, &e2, 1, NULL);                  /* replaces */
    safetensors_file *f = open_ok(path);
    assert_null(safetensors_find(f, "a"));
    assert_int_equal(safetensors_find(f, "b")->numel, 3);
    safetensors_close(f);

    /* a leftover temporary from a crash is simply overwritten */
    FILE *fp = fopen(tmp, "wb");
    assert_non_null(fp);
    fputs("junk", fp);
    fclose(fp);
    write_ok(path, &e, 1, NULL);
    assert_false(file_exists(tmp));

    /* invalid entries: refused before anything is written */
    safetensors_entry bad[2] = {e, e};             /* same name twice */
    st_error err = {0};
    assert_int_equal(safetensors_write(path, bad, 2, NULL, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "'a' given twice"));
    assert_false(file_exists(tmp));
    f = open_ok(path);
    assert_non_null(safetensors_find(f, "a"));
    safetensors_close(f);
}

static void test_write_rejects_bad_entries(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "reject.safetensors");
    float x[4] = {0};
    st_error err = {0};
    safetensors_entry e = {.name = "t", .dtype = SAFETENSORS_I32, .ndim = 1, .shape = {4}, .data = x, .from_f32 = 1};
    assert_int_equal(safetensors_write(path, &e, 1, NULL, &err), ST_EINVAL);   /* float -> I32 */
    assert_non_null(strstr(err.msg, "'t'"));
    e = (safetensors_entry){.name = "t", .dtype = SAFETENSORS_F32, .ndim = 9, .data = x};
    assert_int_equal(safetensors_write(path, &e, 1, NULL, &err), ST_EINVAL);
    e = (safetensors_entry){.name = "t", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {-1}, .data = x};
    assert_int_equal(safetensors_write(path, &e, 1, NULL, &err), ST_EINVAL);
    e = (safetensors_entry){.name = "t", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {4}, .data = NULL};
    assert_int_equal(safetensors_write(path, &e, 1, NULL, &err), ST_EINVAL);
    e = (safetensors_entry){.name = "__metadata__", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {4}, .data = x};
    assert_int_equal(safetensors_write(path, &e, 1, NULL, &err), ST_EINVAL);
    e = (safetensors_entry){.name = "bad\xff", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {4}, .data = x};
    assert_int_equal(safetensors_write(path, &e, 1, NULL, &err), ST_EINVAL);
    e = (safetensors_entry){.name = "t", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {4}, .data = x};
    const char *kv_odd[] = {"k", NULL};
    assert_int_equal(safetensors_write(path, &e, 1, kv_odd, &err), ST_EINVAL);
    const char *kv_dup[] = {"k", "1", "k", "2", NULL};
    assert_int_equal(safetensors_write(path, &e, 1, kv_dup, &err), ST_EINVAL);
    assert_false(file_exists(path));

    /* rename fails (path is a directory): the temporary file is removed */
    char dir[256], tmp[300];
    tmp_path(dir, "a-directory");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    assert_int_equal(safetensors_write(dir, &e, 1, NULL, &err), ST_EIO);
    assert_non_null(strstr(err.msg, "rename"));
    assert_false(file_exists(tmp));

    /* a directory that does not exist: the errno's status, naming the path */
    assert_int_equal(safetensors_write("/nonexistent-dir/x.safetensors", &e, 1, NULL, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.safetensors"));
}

/* Names with quotes, backslashes, control characters and UTF-8 survive the
 * writer's JSON escaping. */
static void test_names_need_escaping(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "names.safetensors");
    float x = 1;
    const char *names[] = {"a\"b", "c\\d", "tab\there", "nl\n", "\xe6\x97\xa5\xe6\x9c\xac", "", "\x01"};
    safetensors_entry e[7];
    for (int i = 0; i < 7; i++)
        e[i] = (safetensors_entry){.name = names[i], .dtype = SAFETENSORS_F32, .ndim = 0, .data = &x};
    write_ok(path, e, 7, NULL);
    safetensors_file *f = open_ok(path);
    assert_int_equal(safetensors_count(f), 7);
    for (int i = 0; i < 7; i++) {
        assert_non_null(safetensors_find(f, names[i]));
        assert_string_equal(safetensors_at(f, (size_t)i)->name, names[i]);
    }
    safetensors_close(f);
}

/* ------------------------------------------------------------------------- */
/* reading errors                                                             */

static void test_read_errors_name_file_and_tensor(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "readerr.safetensors");
    size_t n = 3000;
    float *x = calloc(n, sizeof *x);
    safetensors_entry e[] = {
        {.name = "first", .dtype = SAFETENSORS_F32, .ndim = 1, .shape = {(int64_t)n}, .data = x},
        {.name = "last", .dtype = SAFETENSORS_BF16, .ndim = 1, .shape = {(int64_t)n}, .data = x, .from_f32 = 1},
    };
    write_ok(path, e, 2, NULL);
    safetensors_file *f = open_ok(path);
    const safetensors_tensor *tl = safetensors_find(f, "last");
    st_error err = {0};
    /* wrong element count */
    assert_int_equal(safetensors_read_f32(f, tl, x, n - 1, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "'last'"));
    /* a tensor from another file */
    safetensors_tensor fake = *tl;
    assert_int_equal(safetensors_read_f32(f, &fake, x, n, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "does not belong"));
    safetensors_tensor blank = {0};
    assert_int_equal(safetensors_read_raw(f, &blank, x, 0, &err), ST_EINVAL);
    /* the file shrinks after open: a short read, naming file, tensor, offset */
    assert_int_equal(truncate(path, (off_t)(tl->offset + 100)), 0);
    assert_int_equal(safetensors_read_f32(f, tl, x, n, &err), ST_EIO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "'last'"));
    assert_non_null(strstr(err.msg, "short read"));
    assert_int_equal(safetensors_read_f32(f, safetensors_find(f, "first"), x, n, &err), ST_OK);
    safetensors_close(f);
    /* and now the header no longer fits the file */
    expect_open_fails(path, ST_ECORRUPT, "'last'", "past the end of the data");
    free(x);
}

static void test_parse_from_memory(void **state) {
    (void)state;
    const char *json = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                       "\"__metadata__\":{\"k\":\"v\"}}";
    size_t hl = strlen(json);
    uint8_t buf[256] = {0};
    uint64_t len = hl;
    memcpy(buf, &len, 8);
    memcpy(buf + 8, json, hl);
    safetensors_file *f = NULL;
    st_error err = {0};
    assert_int_equal(safetensors_parse(&f, buf, 8 + hl, 8 + hl + 8, "mem.safetensors", &err), ST_OK);
    const safetensors_tensor *t = safetensors_find(f, "w");
    assert_non_null(t);
    assert_int_equal(t->offset, 8 + hl);
    assert_string_equal(safetensors_metadata(f, "k"), "v");
    float out[4];
    assert_int_equal(safetensors_read_f32(f, t, out, 4, &err), ST_EINVAL);   /* no data in memory */
    safetensors_close(f);
    /* one byte too small a file: the tensor's end is past the data */
    assert_int_equal(safetensors_parse(&f, buf, 8 + hl, 8 + hl + 7, "mem.safetensors", &err), ST_ECORRUPT);
    assert_null(f);
    assert_non_null(strstr(err.msg, "mem.safetensors: tensor 'w'"));
    /* a prefix shorter than the header is the caller's mistake */
    assert_int_equal(safetensors_parse(&f, buf, 20, 8 + hl + 8, "mem.safetensors", &err), ST_EINVAL);
}

static void test_open_missing_file(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "does-not-exist.safetensors");
    expect_open_fails(path, ST_ENOENT, "cannot open", NULL);
    expect_open_fails(tmpdir, ST_EINVAL, "not a regular file", NULL);
}

/* ------------------------------------------------------------------------- */
/* header validation: one test per failure                                    */

static void test_bad_file_shorter_than_8_bytes(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "short.safetensors");
    FILE *fp = fopen(path, "wb");
    fwrite("\x05\0\0", 1, 3, fp);
    fclose(fp);
    expect_open_fails(path, ST_ECORRUPT, "3 bytes", "too short");
}

static void test_bad_header_length_zero(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "zero.safetensors");
    write_file(path, 0, NULL, 0, "{}", 2);
    expect_open_fails(path, ST_ECORRUPT, "header length is 0", NULL);
}

static void test_bad_header_length_past_end(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "pastend.safetensors");
    write_file(path, 100, "{}", 2, NULL, 0);
    expect_open_fails(path, ST_ECORRUPT, "header length 100", "past the end of the file");
}

static void test_bad_header_length_absurd(void **state) {
    (void)state;
    char path[256];
    tmp_path(path, "absurd.safetensors");
    write_file(path, UINT64_C(0xffffffffffffff00), "{}", 2, NULL, 0);
    expect_open_fails(path, ST_ECORRUPT, "above the", "limit");
    write_file(path, (uint64_t)SAFETENSORS_MAX_HEADER + 1, "{}", 2, NULL, 0);
    expect_open_fails(path, ST_ECORRUPT, "above the", "limit");
}

static void test_bad_header_not_json(void **state) {
    (void)state;
    expect_json_fails("{\"a\": {\"dtype\": \"F32\",}", 0, ST_ECORRUPT, "not valid JSON", NULL);
}

static void test_bad_header_not_object(void **state) {
    (void)state;
    expect_json_fails("[1, 2, 3]", 0, ST_ECORRUPT, "not a JSON object", NULL);
}

static void test_bad_header_trailing_garbage(void **state) {
    (void)state;
    expect_json_fails("{} x", 0, ST_ECORRUPT, "after the JSON object", NULL);
}

static void test_bad_header_text_not_utf8_json(void **state) {
    (void)state;
    expect_json_fails("{\"\xc0\xaf\": {}}", 0, ST_ECORRUPT, "not valid UTF-8", NULL);        /* overlong '/' */
    expect_json_fails("{\"\xed\xa0\x80\": {}}", 0, ST_ECORRUPT, "not valid UTF-8", NULL);    /* surrogate */
    /* a NUL byte would cut the name short in C: "a\0b" would read as "a" */
    char path[256];
    tmp_path(path, "nul.safetensors");
    static const char hdr[] = "{\"a\0b\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}}";
    write_file(path, sizeof hdr - 1, hdr, sizeof hdr - 1, "x", 1);
    expect_open_fails(path, ST_ECORRUPT, "not valid UTF-8", "0x00");
    /* nor may the escape \u0000; an escaped backslash before "u0000" is fine */
    expect_json_fails("{\"wte\\u0000x\": {}}", 0, ST_ECORRUPT, "not valid UTF-8", "\\u0000");
    expect_json_fails("{\"wte\\\\u0000x\": 5}", 0, ST_ECORRUPT, "'wte\\u0000x'", "not a JSON object");
    /* control bytes: JSON allows only tab, newline and return, outside strings */
    expect_json_fails("{\x01}", 0, ST_ECORRUPT, "not valid UTF-8", "0x01");
    expect_json_fails("{\"a\tb\": {}}", 0, ST_ECORRUPT, "not valid UTF-8", "0x09");
    char ok[256];
    tmp_path(ok, "whitespace.safetensors");
    write_json_file(ok, "{\r\n\"a\" :\n{\"dtype\":\"U8\",\t\"shape\":[],\"data_offsets\":[0,1]}}\n   ", 1);
    safetensors_close(open_ok(ok));
    /* the header starts with '{' itself: no whitespace or byte-order mark before it */
    expect_json_fails(" {}", 0, ST_ECORRUPT, "not a JSON object", "does not start with '{'");
    expect_json_fails("\xef\xbb\xbf{}", 0, ST_ECORRUPT, "not a JSON object", "does not start with '{'");
}

static void test_bad_entry_not_object(void **state) {
    (void)state;
    expect_json_fails("{\"wte\": [1, 2]}", 0, ST_ECORRUPT, "'wte'", "not a JSON object");
}

static void test_bad_dtype_missing(void **state) {
    (void)state;
    expect_json_fails("{\"wte\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, ST_ECORRUPT, "'wte'",
                      "missing \"dtype\"");
}

static void test_bad_dtype_unknown(void **state) {
    (void)state;
    expect_json_fails("{\"wte\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, ST_ECORRUPT,
                      "'wte'", "unknown dtype \"F33\"");
    expect_json_fails("{\"wte\": {\"dtype\": 32, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, ST_ECORRUPT,
                      "'wte'", "not a string");
    expect_json_fails("{\"wte\": {\"dtype\": \"F8_E4M3\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1,
                      ST_EUNSUPPORTED, "'wte'", "F8_E4M3");
}

static void test_bad_shape_missing(void **state) {
    (void)state;
    expect_json_fails("{\"wpe\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, ST_ECORRUPT, "'wpe'",
                      "missing \"shape\"");
}

static void test_bad_shape_not_array(void **state) {
    (void)state;
    expect_json_fails("{\"wpe\": {\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 16]}}", 16, ST_ECORRUPT,
                      "'wpe'", "\"shape\" is not an array");
}

static void test_bad_shape_negative_dim(void **state) {
    (void)state;
    expect_json_fails("{\"wpe\": {\"dtype\": \"F32\", \"shape\": [2, -2], \"data_offsets\": [0, 16]}}", 16,
                      ST_ECORRUPT, "'wpe'", "dimension 1 is negative");
}

static void test_bad_shape_non_integer_dim(void **state) {
    (void)state;
    expect_json_fails("{\"wpe\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4,
                      ST_ECORRUPT, "'wpe'", "dimension 0 is not an integer");
    expect_json_fails("{\"wpe\": {\"dtype\": \"F32\", \"shape\": [\"4\"], \"data_offsets\": [0, 16]}}", 16,
                      ST_ECORRUPT, "'wpe'", "dimension 0 is not an integer");
    expect_json_fails("{\"wpe\": {\"dtype\": \"F32\", \"shape\": [1e300], \"data_offsets\": [0, 16]}}", 16,
                      ST_ECORRUPT, "'wpe'", "dimension 0 is not an integer");
}

static void test_bad_shape_too_many_dims(void **state) {
    (void)state;
    expect_json_fails("{\"x\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}", 1,
                      ST_ECORRUPT, "'x'", "9 dimensions");
}

static void test_bad_shape_numel_overflow(void **state) {
    (void)state;
    /* each dim below 2^53, product far above 2^64 */
    expect_json_fails("{\"x\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 2], "
                      "\"data_offsets\": [0, 0]}}", 0, ST_ECORRUPT, "'x'", "overflows");
    /* numel fits in 64 bits, numel * 8 does not */
    expect_json_fails("{\"x\": {\"dtype\": \"F64\", \"shape\": [4294967296, 1073741824], "
                      "\"data_offsets\": [0, 0]}}", 0, ST_ECORRUPT, "'x'", "overflows");
}

static void test_bad_offsets_missing(void **state) {
    (void)state;
    expect_json_fails("{\"x\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4, ST_ECORRUPT, "'x'",
                      "missing \"data_offsets\"");
}

static void test_bad_offsets_not_two_integers(void **state) {
    (void)state;
    const char *bad[] = {
        "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}",
        "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}",
        "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}",
        "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4.5]}}",
        "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, \"4\"]}}",
        "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": {\"0\": 4}}}",
        "{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 18446744073709551616]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        expect_json_fails(bad[i], 8, ST_ECORRUPT, "'x'", "not two non-negative integers");
}

static void test_bad_offsets_begin_after_end(void **state) {
    (void)state;
    expect_json_fails("{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8, ST_ECORRUPT,
                      "'x'", "begin 8 > end 4");
}

static void test_bad_offsets_past_end_of_data(void **state) {
    (void)state;
    expect_json_fails("{\"x\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 7, ST_ECORRUPT,
                      "'x'", "past the end of the data (7 bytes)");
}

static void test_bad_offsets_size_mismatch(void **state) {
    (void)state;
    expect_json_fails("{\"x\": {\"dtype\": \"BF16\", \"shape\": [2, 3], \"data_offsets\": [0, 24]}}", 24,
                      ST_ECORRUPT, "'x'", "span 24 bytes, but 6 BF16 elements need 12");
}

static void test_bad_duplicate_names(void **state) {
    (void)state;
    expect_json_fails("{\"h.0.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
                      " \"h.1.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]},"
                      " \"h.0.w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
                      12, ST_ECORRUPT, "'h.0.w'", "appears twice");
    expect_json_fails("{\"x\": {\"dtype\": \"F32\", \"dtype\": \"F16\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                      4, ST_ECORRUPT, "'x'", "\"dtype\" appears twice");
    expect_json_fails("{\"__metadata__\": {}, \"__metadata__\": {}}", 0, ST_ECORRUPT, "__metadata__",
                      "appears twice");
}

static void test_bad_overlapping_tensors(void **state) {
    (void)state;
    expect_json_fails("{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                      " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [16, 20]},"
                      " \"c\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
                      20, ST_ECORRUPT, "'a' and 'c' overlap", "[8, 16)");
    /* zero-size tensors occupy no bytes, so they overlap nothing */
    char path[256];
    tmp_path(path, "zero-overlap.safetensors");
    write_json_file(path,
                    "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                    " \"z\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]}}",
                    16);
    safetensors_close(open_ok(path));
}

static void test_bad_metadata(void **state) {
    (void)state;
    expect_json_fails("{\"__metadata__\": [\"format\", \"pt\"]}", 0, ST_ECORRUPT, "\"__metadata__\"",
                      "not a JSON object");
    expect_json_fails("{\"__metadata__\": {\"format\": \"pt\", \"step\": 5}}", 0, ST_ECORRUPT, "'step'",
                      "not a string");
    expect_json_fails("{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", 0, ST_ECORRUPT, "'k'", "appears twice");
}

/* Hostile names are shown cut short and without control characters. */
static void test_bad_name_shown_safely(void **state) {
    (void)state;
    expect_json_fails("{\"a\\nb\": 5}", 0, ST_ECORRUPT, "'a?b'", "not a JSON object");
    char json[4096], name[2001];
    memset(name, 'n', 2000);
    name[2000] = 0;
    snprintf(json, sizeof json, "{\"%s\": 5}", name);
    expect_json_fails(json, 0, ST_ECORRUPT, "nnn...'", "not a JSON object");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_round_trip_and_layout),
        cmocka_unit_test(test_bf16_round_trip_converting),
        cmocka_unit_test(test_f16_round_trip_converting),
        cmocka_unit_test(test_raw_float_dtypes_read_converted),
        cmocka_unit_test(test_integer_dtypes),
        cmocka_unit_test(test_metadata_round_trip),
        cmocka_unit_test(test_zero_size_and_scalar_tensors),
        cmocka_unit_test(test_empty_file_list),
        cmocka_unit_test(test_write_is_atomic_and_replaces),
        cmocka_unit_test(test_write_rejects_bad_entries),
        cmocka_unit_test(test_names_need_escaping),
        cmocka_unit_test(test_read_errors_name_file_and_tensor),
        cmocka_unit_test(test_parse_from_memory),
        cmocka_unit_test(test_open_missing_file),
        cmocka_unit_test(test_bad_file_shorter_than_8_bytes),
        cmocka_unit_test(test_bad_header_length_zero),
        cmocka_unit_test(test_bad_header_length_past_end),
        cmocka_unit_test(test_bad_header_length_absurd),
        cmocka_unit_test(test_bad_header_not_json),
        cmocka_unit_test(test_bad_header_not_object),
        cmocka_unit_test(test_bad_header_trailing_garbage),
        cmocka_unit_test(test_bad_header_text_not_utf8_json),
        cmocka_unit_test(test_bad_entry_not_object),
        cmocka_unit_test(test_bad_dtype_missing),
        cmocka_unit_test(test_bad_dtype_unknown),
        cmocka_unit_test(test_bad_shape_missing),
        cmocka_unit_test(test_bad_shape_not_array),
        cmocka_unit_test(test_bad_shape_negative_dim),
        cmocka_unit_test(test_bad_shape_non_integer_dim),
        cmocka_unit_test(test_bad_shape_too_many_dims),
        cmocka_unit_test(test_bad_shape_numel_overflow),
        cmocka_unit_test(test_bad_offsets_missing),
        cmocka_unit_test(test_bad_offsets_not_two_integers),
        cmocka_unit_test(test_bad_offsets_begin_after_end),
        cmocka_unit_test(test_bad_offsets_past_end_of_data),
        cmocka_unit_test(test_bad_offsets_size_mismatch),
        cmocka_unit_test(test_bad_duplicate_names),
        cmocka_unit_test(test_bad_overlapping_tensors),
        cmocka_unit_test(test_bad_metadata),
        cmocka_unit_test(test_bad_name_shown_safely),
    };
    return cmocka_run_group_tests(tests, make_tmpdir, remove_tmpdir);
}
