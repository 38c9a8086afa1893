/* test_cli_ranks.c - what `strata train` adds for several ranks
 * (cli/ranks.h), on one rank without mpirun: every agreement is the rank's
 * own outcome (the collectives themselves: tests/cli/mpi_ranks.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cli/ranks.h"

static void test_one_rank_agrees_with_itself(void **state) {
    (void)state;
    comm *c;
    st_error err = {0};
    assert_int_equal(comm_open(&c, &err), ST_OK);
    assert_int_equal(comm_size(c), 1);
    int peer = 1, stop, commit;
    assert_int_equal(ranks_agree(c, ST_OK, &peer, &err), ST_OK);
    assert_int_equal(peer, 0);
    assert_int_equal(ranks_agree(c, ST_EIO, &peer, &err), ST_EIO);
    assert_int_equal(peer, 0);
    assert_int_equal(ranks_step_flags(c, 1, 0, &stop, &commit, &err), ST_OK);
    assert_true(stop && !commit);
    assert_int_equal(ranks_step_flags(c, 0, 1, &stop, &commit, &err), ST_OK);
    assert_true(!stop && commit);
    assert_int_equal(ranks_reads_done(c, &err), ST_OK);
    comm_close(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_rank_agrees_with_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
