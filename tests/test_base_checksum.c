/* test_base_checksum.c - CRC32C: standard vectors, chaining, and the
 * three-stream hardware path against the table path on every size class. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "strata/base.h"
#include "strata/checksum.h"

/* Bit-at-a-time CRC32C straight from the definition: independent of both
 * implementations under test. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    }
    return ~c;
}

static void test_standard_vectors(void **state) {
    (void)state;
    unsigned char buf[32];
    assert_int_equal(st_crc32c(0, "123456789", 9), 0xe3069283u);
    assert_int_equal(st_crc32c_portable(0, "123456789", 9), 0xe3069283u);
    memset(buf, 0, sizeof buf);   /* RFC 3720 B.4 */
    assert_int_equal(st_crc32c(0, buf, 32), 0x8a9136aau);
    memset(buf, 0xff, sizeof buf);
    assert_int_equal(st_crc32c(0, buf, 32), 0x62a8ab43u);
    for (int i = 0; i < 32; i++) buf[i] = (unsigned char)i;
    assert_int_equal(st_crc32c(0, buf, 32), 0x46dd794eu);
    assert_int_equal(st_crc32c(0, buf, 0), 0u);
    assert_int_equal(st_crc32c(0x12345678u, buf, 0), 0x12345678u);
}

/* Sizes straddle every boundary of the hardware path: the 8-byte alignment
 * prologue, the 3 x 256 and 3 x 8192 stream blocks, and the byte tail. */
static void test_hardware_matches_reference_on_all_size_classes(void **state) {
    (void)state;
    size_t max = 3 * 8192 * 3 + 777;
    unsigned char *buf = malloc(max + 8);
    assert_non_null(buf);
    st_rng r;
    st_rng_seed(&r, 7);
    for (size_t i = 0; i < max + 8; i++) buf[i] = (unsigned char)st_rng_next(&r);
    static const size_t sizes[] = {1, 7, 8, 9, 255, 256, 767, 768, 769, 3 * 256 + 8, 4095, 4096, 4097,
                                   3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 3 * 256 + 5,
                                   2 * 3 * 8192, 3 * 8192 * 3 + 777};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        for (size_t off = 0; off < 8; off += 3) {
            uint32_t want = crc32c_bitwise(buf + off, sizes[s]);
            assert_int_equal(st_crc32c_portable(0, buf + off, sizes[s]), want);
            assert_int_equal(st_crc32c(0, buf + off, sizes[s]), want);
        }
    }
    free(buf);
}

static void test_chaining_equals_one_call(void **state) {
    (void)state;
    size_t n = 100000;
    unsigned char *buf = malloc(n);
    assert_non_null(buf);
    st_rng r;
    st_rng_seed(&r, 11);
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)st_rng_next(&r);
    uint32_t whole = st_crc32c(0, buf, n);
    for (int trial = 0; trial < 20; trial++) {
        size_t cut = (size_t)(st_rng_next(&r) % n);
        uint32_t c = st_crc32c(st_crc32c(0, buf, cut), buf + cut, n - cut);
        assert_int_equal(c, whole);
    }
    /* A single flipped bit anywhere changes the checksum. */
    buf[n / 3] ^= 0x10;
    assert_int_not_equal(st_crc32c(0, buf, n), whole);
    free(buf);
}

/* The merge constants in checksum.c are x^(8*len - 33) mod P for len 8192
 * and 256; recompute them from the definition. */
static uint32_t xpow_mod_p(unsigned n) {
    uint32_t v = 0x80000000u;   /* x^0 in reflected order */
    while (n--) v = (v >> 1) ^ (0x82f63b78u & (0u - (v & 1u)));
    return v;
}

static void test_merge_constants(void **state) {
    (void)state;
    assert_int_equal(xpow_mod_p(8 * 8192 - 33), 0x54a86326u);
    assert_int_equal(xpow_mod_p(8 * 256 - 33), 0xb9e02b86u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_standard_vectors),
        cmocka_unit_test(test_hardware_matches_reference_on_all_size_classes),
        cmocka_unit_test(test_chaining_equals_one_call),
        cmocka_unit_test(test_merge_constants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
