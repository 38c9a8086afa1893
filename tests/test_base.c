/* test_base.c - status/error formatting, size helpers, memory for transfers,
 * rng, bf16 and f16. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/base.h"

static void test_fail_formats_message(void **state) {
    (void)state;
    st_error err = {0};
    assert_int_equal(st_fail(&err, ST_ECORRUPT, "file %s: tensor %s", "a.bin", "wte"), ST_ECORRUPT);
    assert_string_equal(err.msg, "file a.bin: tensor wte");
    assert_int_equal(st_fail_errno(&err, ENOSPC, "writing %s", "x"), ST_ENOSPC);
    assert_int_equal(err.sys_errno, ENOSPC);
    assert_non_null(strstr(err.msg, "writing x: "));
    assert_int_equal(st_fail(NULL, ST_EIO, "ignored"), ST_EIO);
    /* one line whatever a name read from a file holds */
    st_fail(&err, ST_ECORRUPT, "maps to \"%s\"", "model-1.safetensors\n\t\x7f\r");
    assert_string_equal(err.msg, "maps to \"model-1.safetensors????\"");
}

static void test_aligned_alloc(void **state) {
    (void)state;
    void *p = st_alloc_aligned(4096, 10);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 4096, 0);
    st_free_aligned(p);
    assert_int_equal(st_round_up(4097, 4096), 8192);
    assert_int_equal(st_round_up(0, 4096), 0);
}

/* The VmFlags line of the mapping in /proc/self/smaps that holds address a
 * (into flags, empty if none). */
static void vm_flags_at(const void *a, char *flags, size_t cap) {
    FILE *f = fopen("/proc/self/smaps", "r");
    assert_non_null(f);
    char line[512];
    int inside = 0;
    flags[0] = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            inside = (uintptr_t)a >= lo && (uintptr_t)a < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            snprintf(flags, cap, "%s", line + 8);
            break;
        }
    }
    fclose(f);
}

/* st_alloc_io: aligned, every byte usable, and the whole 2 MiB pages (not
 * the partial one at the end) advised into huge pages where the kernel has
 * them ("hg" in the mapping's VmFlags). */
static void test_io_alloc(void **state) {
    (void)state;
    void *small = st_alloc_io(10);
    assert_non_null(small);
    assert_int_equal((uintptr_t)small % 4096, 0);
    st_free_aligned(small);

    const size_t huge = 2u << 20, n = 2 * huge + 4096;
    unsigned char *p = st_alloc_io(n);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % huge, 0);
    memset(p, 0xa5, n);
    assert_int_equal(p[n - 1], 0xa5);
    if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0) {
        char flags[512];
        vm_flags_at(p, flags, sizeof flags);
        assert_non_null(strstr(flags, " hg"));
        vm_flags_at(p + 2 * huge, flags, sizeof flags);
        assert_null(strstr(flags, " hg"));
    }
    st_free_aligned(p);
}

static void test_rng_deterministic_and_normal(void **state) {
    (void)state;
    st_rng a, b;
    st_rng_seed(&a, 42);
    st_rng_seed(&b, 42);
    for (int i = 0; i < 100; i++) assert_true(st_rng_next(&a) == st_rng_next(&b));
    double sum = 0, sq = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = st_rng_normal(&a);
        sum += x;
        sq += x * x;
    }
    assert_true(fabs(sum / n) < 0.01);
    assert_true(fabs(sq / n - 1.0) < 0.02);
    /* the pairwise fill: same moments, std scaled */
    float *buf = malloc(sizeof(float) * (size_t)n);
    st_rng_normal_fill(&a, buf, (size_t)n, 0.5f);
    sum = sq = 0;
    for (int i = 0; i < n; i++) {
        sum += buf[i];
        sq += (double)buf[i] * buf[i];
    }
    free(buf);
    assert_true(fabs(sum / n) < 0.005);
    assert_true(fabs(sq / n - 0.25) < 0.005);
}

static void test_bf16_rounding(void **state) {
    (void)state;
    assert_true(st_bf16_to_f32(st_f32_to_bf16(1.0f)) == 1.0f);
    /* 1 + 2^-8 lies exactly halfway between two bf16 values: ties to even (1.0). */
    assert_true(st_bf16_to_f32(st_f32_to_bf16(1.0f + 1.0f / 256)) == 1.0f);
    /* just above the halfway point rounds up */
    assert_true(st_bf16_to_f32(st_f32_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536)) == 1.0f + 1.0f / 128);
    assert_true(isnan(st_bf16_to_f32(st_f32_to_bf16(NAN))));
}

static void test_f16_round_trip_all_values(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = st_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(st_f32_to_f16(f), h);
    }
    assert_true(st_f16_to_f32(0x3c00) == 1.0f);
    assert_true(st_f16_to_f32(0x0001) == ldexpf(1.0f, -24));   /* smallest subnormal */
    assert_true(st_f16_to_f32(0x7bff) == 65504.0f);
    assert_int_equal(st_f32_to_f16(1e6f), 0x7c00);             /* overflow -> inf */
}

static void test_median(void **state) {
    (void)state;
    double one[] = {4.0};
    assert_true(st_median(one, 1) == 4.0);
    double odd[] = {3.0, -1.0, 2.0};
    assert_true(st_median(odd, 3) == 2.0);
    double even[] = {8.0, 1.0, 4.0, 2.0};   /* the middle two, 2 and 4 */
    assert_true(st_median(even, 4) == 3.0);
}

static void test_format_bytes(void **state) {
    (void)state;
    char buf[32];
    assert_string_equal(st_format_bytes(512, buf, sizeof buf), "512 B");
    assert_string_equal(st_format_bytes(1536.0 * 1024 * 1024, buf, sizeof buf), "1.50 GiB");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_formats_message),
        cmocka_unit_test(test_aligned_alloc),
        cmocka_unit_test(test_io_alloc),
        cmocka_unit_test(test_rng_deterministic_and_normal),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_f16_round_trip_all_values),
        cmocka_unit_test(test_format_bytes),
        cmocka_unit_test(test_median),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
