/* test_store_dirs.c - a store's directories as the command line spells
 * them: each rank's of a data-parallel job (store_dirs_of_rank). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "strata/store.h"

/* (a store_dirs points into itself: parsed in place, never copied) */
static void parse(const char *list, store_dirs *d) {
    st_error err = {0};
    assert_int_equal(store_dirs_parse(list, d, &err), ST_OK);
}

static void test_store_dirs(void **state) {
    (void)state;
    st_error err = {0};
    store_dirs in, out;
    parse("/nvme0/run,/nvme1/run", &in);
    assert_int_equal(store_dirs_of_rank(&in, 0, 1, &out, &err), ST_OK);   /* one rank: as given */
    assert_int_equal(out.n, 2);
    assert_string_equal(out.paths[0], "/nvme0/run");
    assert_string_equal(out.paths[1], "/nvme1/run");
    assert_int_equal(store_dirs_of_rank(&in, 3, 4, &out, &err), ST_OK);   /* a rank's directory below each */
    assert_int_equal(out.n, 2);
    assert_string_equal(out.paths[0], "/nvme0/run/rank-3");
    assert_string_equal(out.paths[1], "/nvme1/run/rank-3");
    parse("/mnt/nvme%r/run,/scratch/r%r", &in);   /* %r: where the rank's number goes */
    assert_int_equal(store_dirs_of_rank(&in, 12, 16, &out, &err), ST_OK);
    assert_string_equal(out.paths[0], "/mnt/nvme12/run");
    assert_string_equal(out.paths[1], "/scratch/r12");
    assert_int_equal(store_dirs_of_rank(&in, 12, 16, &in, &err), ST_OK);   /* in place */
    assert_string_equal(in.paths[0], "/mnt/nvme12/run");
    assert_string_equal(in.paths[1], "/scratch/r12");
    char longest[sizeof in.list];
    memset(longest, 'a', sizeof longest - 3);
    longest[0] = '/';
    longest[sizeof longest - 3] = 0;
    parse(longest, &in);
    assert_int_equal(store_dirs_of_rank(&in, 1, 2, &out, &err), ST_EINVAL);   /* no room for /rank-1 */
    assert_non_null(strstr(err.msg, "too long"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
