/* mpi_testutil.h - what every multi-rank test shares (tests/mpi): the
 * job's comm, this rank and the rank count, and a failing check that ends
 * the whole job. cmocka prints a failure after the test's teardown, so the
 * teardown only notes it and the next setup (or the group's teardown)
 * aborts every rank (comm_abort), so that no rank waits forever in a
 * collective the failed one left. */
#ifndef STRATA_MPI_TESTUTIL_H
#define STRATA_MPI_TESTUTIL_H

#include <stdio.h>
#include <string.h>

#include "strata/comm.h"

static comm *C;
static int R, N;   /* this rank, the number of ranks */

static int g_passed, g_failed;
#define PASSED() (g_passed = 1)

static void abort_if_failed(void) {
    if (!g_failed) return;
    fprintf(stderr, "rank %d of %d: a check failed (above); ending the job\n", R, N);
    fflush(stdout);
    fflush(stderr);
    comm_abort(C, 1);
}
static int test_setup(void **state) {
    (void)state;
    abort_if_failed();
    g_passed = 0;
    return 0;
}
static int test_teardown(void **state) {
    (void)state;
    if (!g_passed) g_failed = 1;
    return 0;
}
static int group_setup(void **state) {
    (void)state;
    st_error err = {0};
    if (comm_open(&C, &err)) {
        fprintf(stderr, "comm_open: %s\n", err.msg);
        return -1;
    }
    if (!comm_is_mpi(C)) {
        fprintf(stderr, "not started by mpirun: run under mpirun -np 2 (or more)\n");
        comm_close(C);
        return -1;
    }
    R = comm_rank(C);
    N = comm_size(C);
    return 0;
}
#define CHECK_OK(call)                                                            \
    do {                                                                          \
        st_error e_ = {0};                                                        \
        st_status s_ = (call);                                                    \
        if (s_ != ST_OK) fprintf(stderr, "rank %d: %s: %s\n", R, #call, e_.msg); \
        assert_int_equal(s_, ST_OK);                                              \
    } while (0)
#define ERR (&e_)

#endif
