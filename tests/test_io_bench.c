/* test_io_bench.c - the bandwidth measurement shared by `strata iobench` and
 * `strata probe`: every pass times each path, the mixed pass moves half the
 * file each way, the cycle pass times reads and writes apart, the test file
 * goes unless kept, and bad settings or a missing file are refused with a
 * message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "strata/io.h"

/* Two fresh directories and a small, quick configuration over them. */
static io_bench_config two_dirs(char a[256], char b[256], const char *dirs[2]) {
    snprintf(a, 256, "%s/io-bench-XXXXXX", STRATA_BINARY_DIR);
    snprintf(b, 256, "%s/io-bench-XXXXXX", STRATA_BINARY_DIR);
    assert_non_null(mkdtemp(a));
    assert_non_null(mkdtemp(b));
    io_bench_config c = io_bench_default_config();
    c.dirs = dirs;
    c.n_dirs = 2;
    c.size = 1 << 20;
    c.block = 64 << 10;
    c.queue_depth = 4;
    return c;
}

static void test_passes(void **state) {
    (void)state;
    char a[256], b[256];
    const char *dirs[2] = {a, b};
    io_bench_config c = two_dirs(a, b, dirs);
    c.mixed = 1;
    c.keep = 1;
    io_bench_result r;
    st_error err = {0};
    assert_int_equal(io_bench(&c, &r, &err), ST_OK);
    for (int p = 0; p < 2; p++) {
        assert_true(r.write_s[p] > 0 && r.read_s[p] > 0 && r.mixed_read_s[p] > 0 && r.mixed_write_s[p] > 0);
        assert_true(r.write_s[p] <= r.write_total_s && r.read_s[p] <= r.read_total_s);
    }
    assert_true(r.mixed_read_bytes + r.mixed_write_bytes == c.size && r.mixed_read_bytes == c.size / 2);
    /* kept: a read-only pass over it works, and then the file goes */
    c.write = c.mixed = 0;
    c.keep = 0;
    assert_int_equal(io_bench(&c, &r, &err), ST_OK);
    char f[300];
    snprintf(f, sizeof f, "%s/strata-iobench.dat", a);
    assert_int_equal(access(f, F_OK), 0);   /* a read-only run leaves what it did not write */
    unlink(f);
    snprintf(f, sizeof f, "%s/strata-iobench.dat", b);
    unlink(f);
    /* now missing */
    assert_int_equal(io_bench(&c, &r, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "strata-iobench.dat does not exist"));
    /* bad settings */
    c.read = 1;
    c.size = 1000;
    assert_int_equal(io_bench(&c, &r, &err), ST_EINVAL);
    c.size = 1 << 20;
    c.file_name = "../x";
    assert_int_equal(io_bench(&c, &r, &err), ST_EINVAL);
    c.file_name = "strata-iobench.dat";
    c.n_dirs = 0;
    assert_int_equal(io_bench(&c, &r, &err), ST_EINVAL);
    rmdir(a);
    rmdir(b);
}

/* The probe's pass: the file in phases (the last one short), read then
 * written back in place, a cycle untimed and one timed. */
static void test_cycle(void **state) {
    (void)state;
    char a[256], b[256];
    const char *dirs[2] = {a, b};
    io_bench_config c = two_dirs(a, b, dirs);
    c.read = 0;
    c.cycle_phase = 3 * 4096 * 25;   /* 300 KiB: not a divisor of the file, nor a multiple of the block */
    c.cycle_warm = 1;
    io_bench_result r;
    st_error err = {0};
    assert_int_equal(io_bench(&c, &r, &err), ST_OK);
    for (int p = 0; p < 2; p++) {
        assert_true(r.cycle_read_s[p] > 0 && r.cycle_write_s[p] > 0);
        assert_true(r.read_s[p] == 0 && r.mixed_read_s[p] == 0);   /* only the passes asked for */
    }
    assert_true(r.cycle_read_total_s >= r.cycle_read_s[0] && r.cycle_read_total_s >= r.cycle_read_s[1]);
    assert_true(r.cycle_write_total_s >= r.cycle_write_s[0] && r.cycle_write_total_s >= r.cycle_write_s[1]);
    /* the whole machine's busy CPU over the cycles was read (/proc/stat): -1 would mean it was not */
    assert_true(r.cycle_machine_cpu_s >= 0 && r.cycle_cpu_s >= 0);
    char f[300];
    snprintf(f, sizeof f, "%s/strata-iobench.dat", a);
    assert_int_equal(access(f, F_OK), -1);   /* removed */
    /* refused: no write pass to lay the file down; a phase O_DIRECT cannot take */
    c.write = 0;
    assert_int_equal(io_bench(&c, &r, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "cycle pass"));
    c.write = 1;
    c.cycle_phase = 5000;
    assert_int_equal(io_bench(&c, &r, &err), ST_EINVAL);
    c.cycle_phase = 4096;
    c.cycle_idle_us = -1;
    assert_int_equal(io_bench(&c, &r, &err), ST_EINVAL);
    rmdir(a);
    rmdir(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_passes), cmocka_unit_test(test_cycle)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
